// laya bench-sessions [-m MODEL] [--docs 100] [--tokens 2000] [--switches N] [--kv-budget MB] [--kv f32|f16|q8_0]
//                     [--seed N] [--shared-head TOKENS] [--save DIR] [--load DIR] [--check FILE] [--json out.json]
// Many documents on one engine, switched between in a random order (issue 12,
// scopes 1 and 4).
//
// Documents: --docs texts of about --tokens tokens each, cut at line starts
// from the public typing traces' final texts (the fixtures' traces/*.jsonl,
// or --traces FILES; generated code-like text when there are none), each from
// another offset, so no two are alike; the first half of them (two at
// least) start with one common head of --shared-head tokens (a licence header, a system
// prompt), so sharing is visible. The cursor is at the end of each document:
// the prompt is the window before it (all of it when it fits the model's
// context; else the window holds the last part, e.g. ~500-980 tokens of a
// 2,000-token document with the default model's 1,024-token context).
//
// One Session per document on one Engine. Each is asked for a suggestion
// once (warm-up), then --switches times a document other than the current
// one is picked at random (seeded) and:
//   switch    = focus change -> suggestion ready: suggest() at the document's
//               cursor, timed from the call to its return. A document whose
//               KV is resident resumes with nothing to compute; one whose
//               blocks were evicted (see below) recomputes what is missing.
//   keystroke = then the user types --keys characters, each followed by a
//               suggestion (the ordinary keystroke path, reported as key_ms),
//               so documents change between their switches.
//   recompute = the same switch without the store, for the first --recompute
//               switches: a fresh session on a second engine whose cache is
//               emptied each time, given the text, cursor and window, until
//               its suggestion is ready. Its suggestion must equal the switch's
//               (a mismatch is counted and fails the run).
// Residency: when the KV pool (--kv-budget) cannot take the largest document,
// the least recently used documents release their KV (Session::release_kv):
// their full blocks stay cached, evictable, and come back at their next
// switch if still there. resident_docs = documents whose KV was resident
// whenever it was needed: every switch to it computed no prompt token (all
// its blocks were there), or, never switched to, it still holds its KV at the end.
// Without --kv-budget the pool holds every document's window (default_budget;
// capped at half of MemAvailable and 8 GB), so all stay resident.
// kv_mb = KV blocks in use at the end; shared_mb = memory the shared blocks
// save (blocks held by the sessions, counted per session, minus distinct).
//
// --save DIR writes every session to DIR/sessions.laya after the run (save_ms);
// --load DIR starts from such a store instead of building documents (load_ms);
// --check FILE writes, per document, after everything else: a hash of the
// next suggestion (after typing "q") and of its prompt's logits: two runs
// (save, kill -9, load: bench/sessions_restart_check.sh) must write the same file.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <xxhash.h>

#include "cli_util.h"
#include "core/atomic_file.h"
#include "core/utf8.h"
#include "engine/engine.h"
#include "latency_stats.h"
#include "model/model.h"
#include "outputs.h"
#include "progress.h"
#include "session/session.h"
#include "session/session_store.h"
#include "tokenizer/tokenizer.h"
#include "trace.h"

namespace laya::cli {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// The fixtures' traces: $LAYA_FIXTURES/traces, else shared/fixtures/traces in
// a folder above the binary (the build tree's layout).
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

struct DocSpec {
  int docs = 100;
  int64_t tokens = 2000;
  int64_t head_tokens = 256;
  uint64_t seed = 1;
};

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

struct Run {
  Engine& eng;
  const tok::Tokenizer& tk;
  SuggestOptions opt;
  std::vector<std::unique_ptr<Session>> docs;
  std::vector<uint64_t> last_use;  // for the least-recently-used release
  std::vector<bool> active;        // holds its KV
  uint64_t clock = 0;
  int64_t released = 0;

  int64_t max_held = 0;  // the most blocks one document has held: what the next may need

  // Releases the least recently used document holding KV (not d); false when none is left.
  Result<bool> release_lru(size_t d) {
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
  Status make_room(size_t d) {
    const KvBlockPool& pool = eng.kv_pool();
    const int64_t bp = pool.layout().block_pos;
    const int64_t need = std::min((eng.options().n_ctx + bp - 1) / bp + 1, max_held + 2);
    while (pool.n_blocks() - pool.n_in_use() < need) {
      LAYA_ASSIGN_OR_RETURN(bool freed, release_lru(d));
      if (!freed) break;  // nothing left to release: the pool is what it is
    }
    return Status::Ok();
  }
  Result<Suggestion> suggest(size_t d) {
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
};

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

struct Results {
  std::vector<double> switch_ms, recompute_ms, key_ms;
  std::vector<int64_t> switch_computed;
  std::set<size_t> switched, not_resident;
  int mismatches = 0;
  double save_ms = -1, load_ms = -1, warmup_ms = 0;
  int64_t load_shared_blocks = 0;
};

// The switches: focus change -> suggestion, --keys keystrokes, and for the first
// n_recompute the same switch without the store.
Status run_switches(Run& run, Engine* rc, int switches, int keys, int n_recompute, uint64_t seed, Progress& bar,
                    Results* r) {
  std::mt19937_64 rng(seed ^ 0x5eedULL);
  static const std::string kTyped = "the quick brown fox jumps over the lazy dog ";
  size_t cur = run.docs.size();
  size_t typed = 0;
  bar.restart("bench-sessions: switches", static_cast<uint64_t>(switches));
  for (int i = 0; i < switches; ++i) {
    bar.update(static_cast<uint64_t>(i));
    size_t d = rng() % run.docs.size();
    if (d == cur && run.docs.size() > 1) d = (d + 1) % run.docs.size();
    cur = d;
    const auto t0 = Clock::now();
    LAYA_ASSIGN_OR_RETURN(Suggestion s, run.suggest(d));
    r->switch_ms.push_back(ms_since(t0));
    r->switch_computed.push_back(s.timings.tokens_computed);
    r->switched.insert(d);
    if (s.timings.tokens_computed > 0) r->not_resident.insert(d);
    if (rc && i < n_recompute) {
      LAYA_ASSIGN_OR_RETURN(auto rs, recompute(*rc, run.tk, *run.docs[d], run.opt));
      r->recompute_ms.push_back(rs.first);
      if (rs.second.tokens != s.tokens) {
        ++r->mismatches;
        bar.clear();
        fmt::print(stderr, "laya bench-sessions: document {}: switch gave \"{}\", from scratch \"{}\"\n", d, s.text,
                   rs.second.text);
      }
    }
    for (int k = 0; k < keys; ++k) {
      Session& doc = *run.docs[d];
      const auto tk0 = Clock::now();
      LAYA_TRY(doc.edit(doc.cursor(), 0, std::string_view(kTyped).substr(typed++ % kTyped.size(), 1)));
      LAYA_ASSIGN_OR_RETURN(Suggestion ks, run.suggest(d));
      r->key_ms.push_back(ms_since(tk0));
    }
  }
  return Status::Ok();
}

// --check replaces only an earlier check file.
OutputOptions check_output_options(const std::vector<std::string>& inputs) {
  OutputOptions o;
  o.option = "--check";
  o.inputs = inputs;
  o.kind = "a bench-sessions check file";
  o.replaceable = [](const std::string& p) { return file_starts_with(p, "doc 0 tokens "); };
  return o;
}

// Per document: the next suggestion after typing "q" and its prompt's logits, hashed.
Status write_check(Run& run, const std::string& path, const std::vector<std::string>& inputs) {
  std::string out;
  for (size_t d = 0; d < run.docs.size(); ++d) {
    Session& s = *run.docs[d];
    LAYA_TRY(s.edit(s.cursor(), 0, "q"));
    LAYA_ASSIGN_OR_RETURN(Suggestion sg, run.suggest(d));
    const float* lg = s.prompt_logits();
    const uint64_t hl = lg ? XXH3_64bits(lg, static_cast<size_t>(run.eng.n_vocab()) * sizeof(float)) : 0;
    out += fmt::format("doc {} tokens {:016x} logits {:016x} text {}\n", d,
                       XXH3_64bits(sg.tokens.data(), sg.tokens.size() * sizeof(int32_t)), hl, json(sg.text).dump());
  }
  return write_file_atomic(path, out, check_output_options(inputs));
}

size_t resident_docs(const Run& run, const Results& r) {
  size_t n = 0;
  for (size_t d = 0; d < run.docs.size(); ++d)
    n += r.switched.count(d) ? !r.not_resident.count(d) : run.active[d] && run.docs[d]->kv_blocks().n_blocks() > 0;
  return n;
}

// KV in use, and what sharing saves, in MB.
std::pair<double, double> kv_memory(const Run& run) {
  const double bb = static_cast<double>(run.eng.kv_pool().layout().block_bytes());
  std::set<int32_t> distinct;
  int64_t held = 0;
  for (const auto& s : run.docs) {
    for (int32_t id : s->kv_blocks().ids()) distinct.insert(id);
    held += s->kv_blocks().n_blocks();
  }
  return {static_cast<double>(run.eng.kv_pool().n_in_use()) * bb / 1e6,
          static_cast<double>(held - static_cast<int64_t>(distinct.size())) * bb / 1e6};
}

// Half of MemAvailable, capped at 8 GB: what bench-sessions takes when no
// --kv-budget is given and the documents need more than the engine's default.
size_t memory_cap() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  size_t kb = 0;
  while (f >> key >> kb) {
    if (key == "MemAvailable:") return std::min<size_t>(kb * 1024 / 2, size_t{8} << 30);
    std::getline(f, key);
  }
  return size_t{1} << 30;
}

}  // namespace

namespace {

struct Args {
  DocSpec spec;
  int switches = 300, keys = 1, n_recompute = 30, max_tokens = 8;
  int64_t max_ctx = 4096;
  std::vector<std::string> traces;
  std::string save_dir, load_dir, check_path, json_path;
  bool hold = false;
};

// The KV budget when none is given: with --load, what the saved blocks take,
// a quarter more, and two contexts of room; else a full window for every
// document and one more block each. Capped by memory_cap(). (The shared
// --kv-budget default of the other commands stays one context: their pool is
// allocated and locked up front, so a large default would cost them memory.)
size_t default_budget(const Model& m, const std::string& kv_name, const Args& a) {
  const HParams& hp = m.hparams();
  const DType kv = kv_name == "f16" ? DType::F16 : kv_name == "q8_0" ? DType::Q8_0 : DType::F32;
  const int64_t n_ctx = std::min<int64_t>(hp.n_ctx_train > 0 ? hp.n_ctx_train : 2048, a.max_ctx);
  const size_t bb = KvLayout{hp.n_layer, hp.n_head_kv, hp.head_dim, kv, 64}.block_bytes();
  size_t want = 0;
  if (!a.load_dir.empty()) {
    std::error_code ec;
    const auto bytes = fs::file_size(fs::path(a.load_dir) / kSessionFileName, ec);
    want = (ec ? 0 : bytes + bytes / 4) + 2 * bb * static_cast<size_t>((n_ctx + 63) / 64);
  } else {
    const int64_t per_doc = (std::min<int64_t>(n_ctx, a.spec.tokens * 3 / 2 + 64) + 63) / 64 + 1;
    want = static_cast<size_t>(per_doc) * static_cast<size_t>(a.spec.docs + 1) * bb;
  }
  return std::min(want, memory_cap());
}

void print_summary(const Run& run, const Results& r, const Args& a, double kv_mb, double shared_mb) {
  fmt::print("documents {} ({}), KV budget {:.0f} MB, {} blocks of {:.2f} MB\n", run.docs.size(),
             a.load_dir.empty() ? fmt::format("{} tokens each asked", a.spec.tokens) : "loaded", static_cast<double>(run.eng.kv_pool().bytes()) / 1e6, run.eng.kv_pool().n_blocks(),
             static_cast<double>(run.eng.kv_pool().layout().block_bytes()) / 1e6);
  fmt::print("KV in use {:.1f} MB, saved by shared blocks {:.1f} MB, releases (LRU) {}\n", kv_mb, shared_mb, run.released);
  if (!r.switch_ms.empty()) {
    fmt::print("switch (focus -> suggestion) ms: {}\n", ms_line(r.switch_ms));
    fmt::print("  documents switched to {} (every switch resident: {}), resident documents {}; prompt tokens computed "
               "p50 {} max {}\n", r.switched.size(), r.switched.size() - r.not_resident.size(), resident_docs(run, r),
               percentile(r.switch_computed, 0.5),
               percentile(r.switch_computed, 1.0));
  }
  if (!r.recompute_ms.empty())
    fmt::print("recompute (no store) ms: {} ({} samples, {} mismatches)\n", ms_line(r.recompute_ms), r.recompute_ms.size(),
               r.mismatches);
  if (!r.key_ms.empty()) fmt::print("keystroke after a switch ms: {}\n", ms_line(r.key_ms));
  if (r.warmup_ms > 0) fmt::print("warm-up (first suggestion of every document) {:.0f} ms\n", r.warmup_ms);
  if (r.save_ms >= 0) fmt::print("save {:.1f} ms\n", r.save_ms);
  if (r.load_ms >= 0) fmt::print("load {:.1f} ms ({} blocks shared instead of copied)\n", r.load_ms, r.load_shared_blocks);
}

json results_json(const Run& run, const Results& r, const Args& a, double kv_mb, double shared_mb,
                  const EngineFlags& flags) {
  auto opt_ms = [](double v) { return v >= 0 ? json(v) : json(nullptr); };
  std::vector<int64_t> prompt;
  for (const auto& s : run.docs) prompt.push_back(static_cast<int64_t>(s->cached_tokens().size()));
  json j = {{"docs", run.docs.size()},
            {"tokens_per_doc", a.load_dir.empty() ? json(a.spec.tokens) : json(nullptr)},
            {"resident_docs", resident_docs(run, r)},
            {"kv_mb", kv_mb},
            {"shared_mb", shared_mb},
            {"switch_ms", {{"p50", percentile(r.switch_ms, 0.5)}, {"p99", percentile(r.switch_ms, 0.99)},
                           {"max", percentile(r.switch_ms, 1.0)}}},
            {"recompute_ms", {{"p50", percentile(r.recompute_ms, 0.5)}, {"p99", percentile(r.recompute_ms, 0.99)}}},
            {"save_ms", opt_ms(r.save_ms)},
            {"load_ms", opt_ms(r.load_ms)}};
  // Beyond the keys: what the run was, and what a reader needs to trust it.
  j["model"] = flags.model_path;
  j["kv_type"] = flags.kv;
  j["threads"] = run.eng.options().n_threads;
  j["n_ctx"] = run.eng.options().n_ctx;
  j["kv_budget_mb"] = static_cast<double>(run.eng.kv_pool().bytes()) / 1e6;
  j["switches"] = r.switch_ms.size();
  j["switched_docs"] = r.switched.size();
  j["switch_tokens_computed"] = count_json(r.switch_computed);
  j["recompute_samples"] = r.recompute_ms.size();
  j["mismatches"] = r.mismatches;
  j["key_ms"] = ms_json(r.key_ms);
  j["releases"] = run.released;
  j["prompt_tokens"] = count_json(prompt);
  j["shared_head_tokens"] = a.spec.head_tokens;
  j["seed"] = a.spec.seed;
  j["warmup_ms"] = r.warmup_ms;
  j["load_blocks_shared"] = r.load_shared_blocks;
  return j;
}

// Builds the documents and their sessions, one warm-up suggestion each.
Status build(Run& run, const Args& a, Progress& bar, Results* r) {
  const std::vector<std::string> traces = a.traces.empty() ? default_traces() : a.traces;
  LAYA_ASSIGN_OR_RETURN(std::string corpus, load_corpus(traces, a.spec.seed));
  const std::vector<std::string> texts = build_docs(corpus, run.tk, a.spec);
  const auto t0 = Clock::now();
  bar.restart("bench-sessions: documents", texts.size());
  for (size_t d = 0; d < texts.size(); ++d) {
    bar.update(d);
    run.docs.push_back(std::make_unique<Session>(run.eng, run.tk));
    run.last_use.push_back(0);
    run.active.push_back(false);
    LAYA_TRY(run.docs.back()->set_text(texts[d]));
    LAYA_ASSIGN_OR_RETURN(Suggestion s, run.suggest(d));
  }
  r->warmup_ms = ms_since(t0);
  return Status::Ok();
}

Status load(Run& run, const Args& a, Results* r) {
  const auto t0 = Clock::now();
  LAYA_ASSIGN_OR_RETURN(LoadedSessions ls, load_session_dir(run.eng, run.tk, a.load_dir));
  r->load_ms = ms_since(t0);
  r->load_shared_blocks = ls.blocks_shared;
  if (!ls.warm) warn("bench-sessions", ls.note);
  run.docs = std::move(ls.sessions);
  run.last_use.assign(run.docs.size(), 0);
  run.active.assign(run.docs.size(), true);
  for (size_t d = 0; d < run.docs.size(); ++d) run.last_use[d] = ++run.clock;
  return Status::Ok();
}

// --json, --check and --save are checked before any work.
Status check_outputs(const Args& a, const std::vector<std::string>& inputs, const OutputOptions& json_opt) {
  if (!a.json_path.empty()) LAYA_TRY(check_output(a.json_path, json_opt));
  if (!a.check_path.empty()) LAYA_TRY(check_output(a.check_path, check_output_options(inputs)));
  // --save names a folder: one that cannot be is refused now, not after the run.
  if (std::error_code ec; !a.save_dir.empty() && fs::exists(a.save_dir, ec) && !fs::is_directory(a.save_dir, ec))
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("--save {}: not a folder (the store is DIR/{})", a.save_dir, kSessionFileName));
  return Status::Ok();
}

}  // namespace

int cmd_bench_sessions(int argc, char** argv) {
  CLI::App app{"Many documents on one engine: switch latency, shared and resident KV, save and load",
               "laya bench-sessions"};
  app.footer("Example: laya bench-sessions --docs 100 --tokens 2000 --json sessions.json");
  Args a;
  app.add_option("--docs", a.spec.docs, "documents")->transform(int_in(1, 100000));
  app.add_option("--tokens", a.spec.tokens, "tokens per document (about)")->transform(int_in(16, 1 << 20));
  app.add_option("--shared-head", a.spec.head_tokens, "tokens of a head common to the first half of the documents")
      ->transform(int_in(0, 1 << 20));
  app.add_option("--seed", a.spec.seed, "seed of the documents and of the switch order")->transform(int_in(0, INT64_MAX));
  app.add_option("--switches", a.switches, "focus changes after the warm-up")->transform(int_in(0, 10000000));
  app.add_option("--keys", a.keys, "characters typed after each switch (each followed by a suggestion)")
      ->transform(int_in(0, 1000));
  app.add_option("--recompute", a.n_recompute, "switches also timed without the store (the first N)")
      ->transform(int_in(0, 10000000));
  app.add_option("--max-tokens", a.max_tokens, "tokens per suggestion")->transform(int_in(1, 64));
  app.add_option("--max-ctx", a.max_ctx, "context cap in tokens (and the model's own)")->transform(int_in(64, 1 << 20));
  app.add_option("--traces", a.traces, "trace files the documents are cut from (default: the fixtures' traces)");
  app.add_option("--save", a.save_dir, "save every session to DIR/sessions.laya after the run");
  app.add_option("--load", a.load_dir, "start from the sessions saved in DIR instead of building documents");
  app.add_option("--check", a.check_path, "write per-document hashes of the next suggestion and its logits");
  app.add_option("--json", a.json_path, "write the results as JSON to this file");
  app.add_flag("--hold", a.hold, "when done, print 'holding' and wait to be killed (the restart check's kill -9)");
  EngineFlags flags;
  flags.add_to(app, true);
  if (auto rc = parse_args(app, argc, argv, "bench-sessions")) return *rc;
  std::vector<std::string> inputs = a.traces;
  inputs.push_back(flags.model_path);
  const OutputOptions json_opt = json_output("--json", inputs, {"docs", "switch_ms"});
  if (Status st = check_outputs(a, inputs, json_opt); !st.ok()) return report_error("bench-sessions", st);
  auto m = flags.load_model();
  if (!m.ok()) return report_error("bench-sessions", m.status());
  std::shared_ptr<const Model> model = std::move(m).value();
  auto tr = flags.load_tokenizer(*model);
  if (!tr.ok()) return report_error("bench-sessions", tr.status());
  std::unique_ptr<tok::Tokenizer> tk = std::move(tr).value();
  EngineFlags rc_flags = flags;  // the recompute engine: the default budget (one context)
  if (flags.kv_budget_mb <= 0) flags.kv_budget_mb = static_cast<double>(default_budget(*model, flags.kv, a)) / 1e6;
  auto e = flags.make_typing_engine(model, a.max_ctx, "bench-sessions", app.count("--max-ctx") > 0);
  if (!e.ok()) return report_error("bench-sessions", e.status());
  warn("bench-sessions", (*e)->memory_lock_note());
  std::unique_ptr<Engine> rc_eng;
  if (a.n_recompute > 0 && a.switches > 0) {
    auto r2 = rc_flags.make_typing_engine(model, a.max_ctx, "bench-sessions", false);
    if (!r2.ok()) return report_error("bench-sessions", r2.status());
    rc_eng = std::move(r2).value();
  }
  Run run{**e, *tk, {}, {}, {}, {}, 0, 0};
  run.opt.max_tokens = a.max_tokens;
  Results r;
  Status st;
  {
    Progress bar("bench-sessions", 0, progress_allowed(flags.quiet));
    st = a.load_dir.empty() ? build(run, a, bar, &r) : load(run, a, &r);
    if (st.ok()) st = run_switches(run, rc_eng.get(), a.switches, a.keys, a.n_recompute, a.spec.seed, bar, &r);
  }  // the bar is wiped here, before any result line
  if (!st.ok()) return report_error("bench-sessions", st);
  const auto [kv_mb, shared_mb] = kv_memory(run);
  if (!a.save_dir.empty()) {
    std::vector<const Session*> all;
    for (const auto& s : run.docs) all.push_back(s.get());
    const auto t0 = Clock::now();
    if (Status s2 = save_session_dir(all, a.save_dir); !s2.ok()) return report_error("bench-sessions", s2);
    r.save_ms = ms_since(t0);
  }
  print_summary(run, r, a, kv_mb, shared_mb);
  if (!a.check_path.empty())
    if (Status s2 = write_check(run, a.check_path, inputs); !s2.ok()) return report_error("bench-sessions", s2);
  if (!a.json_path.empty())
    if (Status s2 = write_file_atomic(a.json_path, dump_json(results_json(run, r, a, kv_mb, shared_mb, flags)), json_opt);
        !s2.ok())
      return report_error("bench-sessions", s2);
  std::fflush(stdout);
  if (a.hold) {
    std::printf("holding\n");
    std::fflush(stdout);
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }
  return r.mismatches > 0 ? 1 : 0;
}

}  // namespace laya::cli
