#include "player/session_switches.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "core/clock.h"
#include "engine/engine.h"
#include "player/trace.h"
#include "tokenizer/tokenizer.h"

namespace laya::player {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Generated code-like text (when there are no traces): deterministic in `seed`.
std::string generated_corpus(uint64_t seed) {
  std::mt19937_64 rng(seed);
  static const char* kWords[] = {"value", "count", "index", "buffer", "result", "total", "name", "items", "offset", "size"};
  std::string s;
  for (int f = 0; f < 400; ++f) {
    s += fmt::format("def {}_{}(a, b):\n", kWords[rng() % 10], f);
    for (int l = 0; l < 6; ++l)
      s += fmt::format("    {} = a * {} + b - {}\n", kWords[rng() % 10], rng() % 100, kWords[rng() % 10]);
    s += "    return a\n\n";
  }
  return s;
}

Result<std::string> load_corpus(const std::vector<std::string>& traces, uint64_t seed) {
  std::string corpus;
  for (const std::string& p : traces) {
    LAYA_ASSIGN_OR_RETURN(Trace t, load_trace(p));
    LAYA_ASSIGN_OR_RETURN(std::string d, final_document(t));
    corpus += d;
    if (!corpus.empty() && corpus.back() != '\n') corpus += '\n';
  }
  if (corpus.size() < 4096) corpus += generated_corpus(seed);
  return corpus;
}

// The next line start at or after byte b of `c` (0 past the end: wraps).
size_t line_start(const std::string& c, size_t b) {
  if (b == 0 || b >= c.size()) return 0;
  const size_t nl = c.find('\n', b - 1);
  return nl == std::string::npos || nl + 1 >= c.size() ? 0 : nl + 1;
}

// `bytes` bytes of whole lines of the corpus from `from`, wrapping around.
std::string cut(const std::string& c, size_t from, size_t bytes) {
  std::string out;
  size_t b = line_start(c, from);
  while (out.size() < bytes) {
    size_t nl = c.find('\n', b);
    nl = nl == std::string::npos ? c.size() : nl + 1;
    out.append(c, b, nl - b);
    b = nl >= c.size() ? 0 : nl;
  }
  return out;
}

// Documents of about spec.tokens tokens (bytes per token measured on the corpus).
std::vector<std::string> build_docs(const std::string& corpus, const tok::Tokenizer& tk, const DocSpec& spec) {
  std::vector<int32_t> ids;
  const std::string sample = corpus.substr(0, std::min<size_t>(corpus.size(), 200000));
  (void)tk.encode_append(sample, false, &ids);
  const double bpt = ids.empty() ? 4.0 : static_cast<double>(sample.size()) / static_cast<double>(ids.size());
  const auto bytes = [&](int64_t t) { return static_cast<size_t>(static_cast<double>(t) * bpt); };
  const std::string head = spec.head_tokens > 0 ? cut(corpus, 0, bytes(spec.head_tokens)) : "";
  std::mt19937_64 rng(spec.seed);
  std::vector<std::string> docs;
  for (int i = 0; i < spec.docs; ++i) {
    const bool shared = !head.empty() && i < std::max(spec.docs / 2, std::min(spec.docs, 2));  // two at least
    const size_t from = (static_cast<size_t>(i) * 7919 * 1031 + rng() % 997) % corpus.size();
    const int64_t body = shared ? std::max<int64_t>(spec.tokens - spec.head_tokens, 16) : spec.tokens;
    docs.push_back((shared ? head : "") + cut(corpus, from, bytes(body)));
  }
  return docs;
}

// A fresh session on `rc` (cache emptied) with doc's text, cursor and window:
// the time until its suggestion is ready, and the suggestion.
Result<std::pair<double, Suggestion>> recompute(Engine& rc, const tok::Tokenizer& tk, const Session& live,
                                                const SuggestOptions& opt) {
  rc.forget_cached_kv();
  const auto t0 = Clock::now();
  Session fresh(rc, tk, live.options());
  LAYA_TRY(fresh.set_text(live.text()));
  LAYA_TRY(fresh.move(live.cursor()));
  LAYA_TRY(fresh.pin_window(live.window_start()));
  LAYA_ASSIGN_OR_RETURN(Suggestion s, fresh.suggest(opt));
  return std::make_pair(ms_since(t0), std::move(s));
}

}  // namespace

std::vector<std::string> default_traces() {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("LAYA_FIXTURES"); env && *env) dirs.push_back(fs::path(env) / "traces");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (fs::path d = exe.parent_path(); !d.empty() && d != d.root_path(); d = d.parent_path())
      dirs.push_back(d / "shared" / "fixtures" / "traces");
  for (const fs::path& d : dirs) {
    if (!fs::is_directory(d, ec)) continue;
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(d, ec))
      if (e.path().extension() == ".jsonl") out.push_back(e.path().string());
    std::sort(out.begin(), out.end());
    if (!out.empty()) return out;
  }
  return {};
}

Result<std::vector<std::string>> build_doc_texts(const std::vector<std::string>& traces, const tok::Tokenizer& tk,
                                                 const DocSpec& spec) {
  LAYA_ASSIGN_OR_RETURN(std::string corpus, load_corpus(traces, spec.seed));
  return build_docs(corpus, tk, spec);
}

// Releases the least recently used document holding KV (not d); false when none is left.
Result<bool> SessionSet::release_lru(size_t d) {
  size_t lru = docs.size();
  for (size_t i = 0; i < docs.size(); ++i)
    if (i != d && active[i] && (lru == docs.size() || last_use[i] < last_use[lru])) lru = i;
  if (lru == docs.size()) return false;
  LAYA_TRY(docs[lru]->release_kv());
  active[lru] = false;
  ++released;
  return true;
}

// Before doc d computes: release least recently used documents until as
// many blocks as the largest document held (plus two for copy on write),
// at most a full context, are free.
Status SessionSet::make_room(size_t d) {
  const KvBlockPool& pool = eng.kv_pool();
  const int64_t bp = pool.layout().block_pos;
  const int64_t need = std::min((eng.options().n_ctx + bp - 1) / bp + 1, max_held + 2);
  while (pool.n_blocks() - pool.n_in_use() < need) {
    LAYA_ASSIGN_OR_RETURN(bool freed, release_lru(d));
    if (!freed) break;  // nothing left to release: the pool is what it is
  }
  return Status::Ok();
}

Result<Suggestion> SessionSet::suggest(size_t d) {
  LAYA_TRY(make_room(d));
  last_use[d] = ++clock;
  active[d] = true;
  auto r = docs[d]->suggest(opt);
  // A document larger than any before: release more and try again.
  while (!r.ok() && r.status().code() == StatusCode::kOutOfMemory) {
    LAYA_ASSIGN_OR_RETURN(bool freed, release_lru(d));
    if (!freed) break;
    r = docs[d]->suggest(opt);
  }
  max_held = std::max(max_held, docs[d]->kv_blocks().n_blocks());
  return r;
}

Result<double> SessionSet::build(const std::vector<std::string>& texts, const SwitchHooks& hooks) {
  const auto t0 = Clock::now();
  if (hooks.start_phase) hooks.start_phase("bench-sessions: documents", texts.size());
  for (size_t d = 0; d < texts.size(); ++d) {
    if (hooks.progress) hooks.progress(d);
    docs.push_back(std::make_unique<Session>(eng, tk));
    last_use.push_back(0);
    active.push_back(false);
    LAYA_TRY(docs.back()->set_text(texts[d]));
    LAYA_ASSIGN_OR_RETURN(Suggestion s, suggest(d));
  }
  return ms_since(t0);
}

void SessionSet::adopt(std::vector<std::unique_ptr<Session>> sessions) {
  docs = std::move(sessions);
  last_use.assign(docs.size(), 0);
  active.assign(docs.size(), true);
  for (size_t d = 0; d < docs.size(); ++d) last_use[d] = ++clock;
}

std::pair<double, double> SessionSet::kv_memory() const {
  const double bb = static_cast<double>(eng.kv_pool().layout().block_bytes());
  std::set<int32_t> distinct;
  int64_t held = 0;
  for (const auto& s : docs) {
    for (int32_t id : s->kv_blocks().ids()) distinct.insert(id);
    held += s->kv_blocks().n_blocks();
  }
  return {static_cast<double>(eng.kv_pool().n_in_use()) * bb / 1e6,
          static_cast<double>(held - static_cast<int64_t>(distinct.size())) * bb / 1e6};
}

Status run_switches(SessionSet& set, Engine* rc, const SwitchPlan& plan, const SwitchHooks& hooks, SwitchResults* r) {
  std::mt19937_64 rng(plan.seed ^ 0x5eedULL);
  static const std::string kTyped = "the quick brown fox jumps over the lazy dog ";
  size_t cur = set.docs.size();
  size_t typed = 0;
  if (hooks.start_phase) hooks.start_phase("bench-sessions: switches", static_cast<uint64_t>(plan.switches));
  for (int i = 0; i < plan.switches; ++i) {
    if (hooks.progress) hooks.progress(static_cast<uint64_t>(i));
    size_t d = rng() % set.docs.size();
    if (d == cur && set.docs.size() > 1) d = (d + 1) % set.docs.size();
    cur = d;
    const auto t0 = Clock::now();
    LAYA_ASSIGN_OR_RETURN(Suggestion s, set.suggest(d));
    r->switch_ms.push_back(ms_since(t0));
    r->switch_computed.push_back(s.timings.tokens_computed);
    r->switched.insert(d);
    if (s.timings.tokens_computed > 0) r->not_resident.insert(d);
    if (rc && i < plan.n_recompute) {
      LAYA_ASSIGN_OR_RETURN(auto rs, recompute(*rc, set.tk, *set.docs[d], set.opt));
      r->recompute_ms.push_back(rs.first);
      if (rs.second.tokens != s.tokens) {
        ++r->mismatches;
        if (hooks.on_mismatch)
          hooks.on_mismatch(fmt::format("document {}: switch gave \"{}\", from scratch \"{}\"", d, s.text, rs.second.text));
      }
    }
    for (int k = 0; k < plan.keys; ++k) {
      Session& doc = *set.docs[d];
      const auto tk0 = Clock::now();
      LAYA_TRY(doc.edit(doc.cursor(), 0, std::string_view(kTyped).substr(typed++ % kTyped.size(), 1)));
      LAYA_ASSIGN_OR_RETURN(Suggestion ks, set.suggest(d));
      r->key_ms.push_back(ms_since(tk0));
    }
  }
  return Status::Ok();
}

size_t resident_docs(const SessionSet& set, const SwitchResults& r) {
  size_t n = 0;
  for (size_t d = 0; d < set.docs.size(); ++d)
    n += r.switched.count(d) ? !r.not_resident.count(d) : set.active[d] && set.docs[d]->kv_blocks().n_blocks() > 0;
  return n;
}

}  // namespace laya::player
