// laya bench-typing [-m MODEL] TRACE.jsonl... [--json out.json] [-t THREADS]
// laya bench-typing [-m MODEL] -p TEXT [-p TEXT...]   (just print the suggestions)
// Keystroke savings: rebuilds each trace's final document and simulates a
// user typing it left to right. At each cursor position the engine makes a
// greedy suggestion (up to --max-tokens tokens, the text before the cursor as
// context); L = the longest common prefix of the suggestion and the rest of
// the document, cut back to the last word boundary (a position next to a
// non-alphanumeric character, or the end of the suggestion). If L >= 2 the
// user presses Tab (1 keystroke) and the cursor advances by L, otherwise the
// user types one character (1 keystroke).
//   keystroke savings = 1 - keystrokes / characters
//   acceptance rate   = accepted suggestions / suggestions shown (non-empty)
// The KV cache keeps the common token prefix between consecutive positions,
// so each position costs a short prefill plus the decode steps. Control
// tokens other than end-of-text (FIM markers) are never suggested; by default
// the context's last token is re-generated under a prefix constraint (token
// healing; --no-heal turns it off).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utf8proc.h>
#include <vector>

#include "cli_util.h"
#include "core/io.h"
#include "core/json.h"
#include "engine/engine.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace laya::cli {

namespace {

using json = nlohmann::json;

std::u32string utf8_to_u32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  utf8proc_ssize_t n = static_cast<utf8proc_ssize_t>(s.size());
  while (n > 0) {
    utf8proc_int32_t cp = 0;
    utf8proc_ssize_t k = utf8proc_iterate(p, n, &cp);
    if (k <= 0) {  // invalid byte: U+FFFD, skip one byte
      cp = 0xFFFD;
      k = 1;
    }
    out.push_back(static_cast<char32_t>(cp));
    p += k;
    n -= k;
  }
  return out;
}

std::string u32_to_utf8(const char32_t* s, size_t n) {
  std::string out;
  out.reserve(n);
  utf8proc_uint8_t buf[4];
  for (size_t i = 0; i < n; ++i) {
    const utf8proc_ssize_t k = utf8proc_encode_char(static_cast<utf8proc_int32_t>(s[i]), buf);
    out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(k));
  }
  return out;
}

bool is_alnum(char32_t c) {
  if (c < 128) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC:
      return true;
    default:
      return false;
  }
}

struct Trace {
  std::string name;
  std::u32string doc;
};

// One trace: a header line ({"trace": name}, optional) and events
// {"op": insert|accept|delete|move, "pos": N, "text": ..., "n": N}. Errors
// name the file, the line and the field.
Result<Trace> load_trace(const std::string& path) {
  LAYA_ASSIGN_OR_RETURN(std::string content, read_file(path));
  Trace t;
  std::string base = path.substr(path.find_last_of('/') + 1);
  if (base.size() > 6 && base.ends_with(".jsonl")) base.resize(base.size() - 6);
  t.name = base;
  size_t lineno = 0;
  for (size_t start = 0; start < content.size();) {
    size_t end = content.find('\n', start);
    if (end == std::string::npos) end = content.size();
    const std::string_view line(content.data() + start, end - start);
    start = end + 1;
    ++lineno;
    if (line.empty()) continue;
    const std::string where = fmt::format("{}:{}", path, lineno);
    auto corrupt = [&](std::string_view what) { return Status(StatusCode::kCorrupt, fmt::format("{}: {}", where, what)); };
    LAYA_ASSIGN_OR_RETURN(json j, parse_json(line, where));
    if (!j.is_object()) return corrupt("not a JSON object");
    if (lineno == 1 && !j.contains("op")) {
      if (j.contains("trace") && j["trace"].is_string()) t.name = j["trace"].get<std::string>();
      continue;
    }
    if (!j.contains("op") || !j["op"].is_string() || !j.contains("pos") || !j["pos"].is_number_integer())
      return corrupt("event needs op and pos");
    const std::string op = j["op"].get<std::string>();
    const int64_t pos = j["pos"].get<int64_t>();
    if (pos < 0 || pos > static_cast<int64_t>(t.doc.size())) return corrupt(fmt::format("pos {} out of range", pos));
    if (op == "insert" || op == "accept") {
      if (!j.contains("text") || !j["text"].is_string()) return corrupt(fmt::format("{} needs text", op));
      t.doc.insert(static_cast<size_t>(pos), utf8_to_u32(j["text"].get<std::string>()));
    } else if (op == "delete") {
      int64_t n = 0;
      if (auto it = j.find("n"); it != j.end()) {
        if (!it->is_number_integer()) return corrupt(fmt::format("field \"n\" is {}, expected an integer", it->type_name()));
        n = it->get<int64_t>();
      }
      if (n < 0 || n > static_cast<int64_t>(t.doc.size()) - pos) return corrupt("delete out of range");
      t.doc.erase(static_cast<size_t>(pos), static_cast<size_t>(n));
    } else if (op != "move") {
      return corrupt(fmt::format("unknown op '{}'", op));
    }
  }
  return t;
}

struct TraceResult {
  int64_t chars = 0, keystrokes = 0, shown = 0, accepted = 0, accepted_chars = 0, positions = 0;
  int64_t prefill_tokens = 0, decode_steps = 0;
  double seconds = 0;
};

class Typist {
 public:
  Typist(Engine& eng, const tok::Tokenizer& tk, int max_tokens, bool heal)
      : eng_(eng), tk_(tk), max_tokens_(max_tokens), heal_(heal) {
    seq_ = eng_.new_sequence();
    // eog ends a suggestion; control (FIM markers, BOS) is never part of one.
    masks_ = continuation_masks(tk_, static_cast<int>(eng_.n_vocab()), eng_.hparams().eos_id);
  }

  // Greedy suggestion (code points) for the context text; fills token counters.
  // With healing, the context's last token is taken back and the first
  // suggested token must start with its bytes (so a context ending inside a
  // word or after a space is continued as the model would have tokenized it).
  Result<std::u32string> suggest(const std::string& context, TraceResult* r) {
    auto enc = tk_.encode(context);
    if (!enc.ok()) return enc.status();
    std::vector<int32_t> ids = std::move(enc).value();
    if (ids.empty()) return std::u32string();
    std::string heal_prefix;
    if (heal_ && ids.size() >= 2 && !tk_.is_control(ids.back())) {
      heal_prefix = tk_.token_bytes(ids.back());
      ids.pop_back();
    }
    const auto& cached = seq_->tokens();
    size_t common = 0;
    while (common < cached.size() && common < ids.size() && cached[common] == ids[common]) ++common;
    if (common >= ids.size()) common = ids.size() - 1;  // re-feed the last token for its logits
    std::span<const int32_t> rest(ids.data() + common, ids.size() - common);
    if (Status st = eng_.prefill(*seq_, rest, static_cast<int64_t>(common)); !st.ok()) return st;
    r->prefill_tokens += static_cast<int64_t>(rest.size());
    std::string text;
    const int64_t n_vocab = eng_.n_vocab();
    for (int i = 0; i < max_tokens_; ++i) {
      const float* lg = seq_->logits();
      int32_t best = -1;
      for (int64_t v = 0; v < n_vocab; ++v) {
        const int32_t id = static_cast<int32_t>(v);
        if (masks_.control.contains(id)) continue;
        if (i == 0 && !heal_prefix.empty()) {
          if (masks_.eog.contains(id)) continue;
          const std::string& b = tk_.token_bytes(id);
          if (b.size() < heal_prefix.size() || b.compare(0, heal_prefix.size(), heal_prefix) != 0) continue;
        }
        if (best < 0 || lg[v] > lg[best]) best = id;
      }
      if (best < 0 || masks_.eog.contains(best)) break;
      const std::string& b = tk_.token_bytes(best);
      text += (i == 0 && !heal_prefix.empty()) ? b.substr(heal_prefix.size()) : b;
      if (i + 1 == max_tokens_ || seq_->n_past() >= seq_->n_ctx()) break;
      if (Status st = eng_.decode(*seq_, best); !st.ok()) return st;
      ++r->decode_steps;
    }
    std::u32string s = utf8_to_u32(text);
    while (!s.empty() && s.back() == 0xFFFD) s.pop_back();  // a cut multi-byte character
    return s;
  }

  int64_t context_tokens(const std::string& context) {
    auto enc = tk_.encode(context);
    return enc.ok() ? static_cast<int64_t>(enc.value().size()) : 0;
  }

 private:
  Engine& eng_;
  const tok::Tokenizer& tk_;
  int max_tokens_;
  bool heal_;
  ContinuationMasks masks_;
  std::unique_ptr<Sequence> seq_;
};

// One line of the results table (ks: keystroke savings, ar: acceptance rate).
void print_summary(const std::string& name, const TraceResult& r, double ks, double ar) {
  fmt::print("{:<20} chars {:>6}  keystrokes {:>6}  savings {:>6.2f}%  accepted {:>5}/{:<5} ({:.1f}%)  {:.1f} s\n", name,
             r.chars, r.keystrokes, 100 * ks, r.accepted, r.shown, 100 * ar, r.seconds);
}

// Accepted length: the common prefix of suggestion and document, cut back to
// the last word boundary.
int64_t accept_length(const std::u32string& sug, const char32_t* rest, int64_t n_rest) {
  int64_t lcp = 0;
  const int64_t ns = static_cast<int64_t>(sug.size());
  while (lcp < ns && lcp < n_rest && sug[lcp] == rest[lcp]) ++lcp;
  for (int64_t k = lcp; k > 0; --k) {
    if (k == ns || !is_alnum(sug[k - 1]) || !is_alnum(sug[k])) return k;
  }
  return 0;
}

}  // namespace

int cmd_bench_typing(int argc, char** argv) {
  CLI::App app{"Keystroke savings of greedy suggestions on typing traces", "laya bench-typing"};
  std::string json_path;
  std::vector<std::string> traces;
  int max_tokens = 8;
  int64_t max_ctx = 2048;
  bool verbose = false, no_heal = false;
  std::vector<std::string> prompts;
  app.add_option("traces", traces, "trace files (.jsonl)");
  app.add_option("-p,--prompt", prompts, "print the suggestion for this text (repeatable; instead of traces)");
  app.add_option("--json", json_path, "write the results as JSON to this file");
  app.add_option("--max-tokens", max_tokens, "tokens per suggestion")->check(CLI::Range(1, 64));
  app.add_option("--max-ctx", max_ctx, "context window cap in tokens (and the model's own)")->check(CLI::Range(64, 1 << 20));
  app.add_flag("-v,--verbose", verbose, "print each accepted suggestion to stderr");
  app.add_flag("--no-heal", no_heal, "no token healing: the suggestion starts after the context's last token");
  EngineFlags flags;
  flags.add_to(app, false);
  CLI11_PARSE(app, argc, argv);
  auto m = flags.load_model();
  if (!m.ok()) return report_error("bench-typing", m.status());
  std::shared_ptr<const Model> model = std::move(m).value();
  auto t = flags.load_tokenizer(*model);
  if (!t.ok()) return report_error("bench-typing", t.status());
  std::unique_ptr<tok::Tokenizer> tk = std::move(t).value();
  auto e = flags.make_typing_engine(model, max_ctx);
  if (!e.ok()) return report_error("bench-typing", e.status());
  warn("bench-typing", (*e)->memory_lock_note());
  Engine& eng = **e;
  const int64_t n_ctx = eng.options().n_ctx;  // resolved by Engine::create
  // Room kept for the suggestion; the context slides (in one jump, to about
  // half the window, at a line start) when it would overflow.
  const int64_t budget = n_ctx - max_tokens - 2;
  if (traces.empty() && prompts.empty())
    return report_error("bench-typing", Status(StatusCode::kInvalidArgument, "pass trace files or -p TEXT"));
  if (!prompts.empty()) {
    json arr = json::array();
    for (const std::string& p : prompts) {
      Typist typist(eng, *tk, max_tokens, !no_heal);
      TraceResult r;
      auto sug = typist.suggest(p, &r);
      if (!sug.ok()) return report_error("bench-typing", sug.status());
      const std::string s = u32_to_utf8(sug.value().data(), sug.value().size());
      arr.push_back({{"prompt", p}, {"suggestion", s}});
      std::printf("%s\n", json{{"prompt", p}, {"suggestion", s}}.dump().c_str());
    }
    if (traces.empty()) {
      if (!json_path.empty()) {
        std::ofstream f(json_path);
        f << arr.dump(2) << "\n";
      }
      return 0;
    }
  }

  json out;
  out["model"] = flags.model_path;
  out["max_tokens"] = max_tokens;
  out["n_ctx"] = n_ctx;
  out["token_healing"] = !no_heal;
  json jt = json::object();
  TraceResult total;
  for (const std::string& path : traces) {
    auto tr = load_trace(path);
    if (!tr.ok()) return report_error("bench-typing", tr.status());
    const std::u32string& doc = tr.value().doc;
    Typist typist(eng, *tk, max_tokens, !no_heal);
    TraceResult r;
    r.chars = static_cast<int64_t>(doc.size());
    auto t0 = std::chrono::steady_clock::now();
    int64_t pos = 0, cstart = 0;
    while (pos < r.chars) {
      std::string ctx = u32_to_utf8(doc.data() + cstart, static_cast<size_t>(pos - cstart));
      if (typist.context_tokens(ctx) > budget) {
        // Jump the window start forward to keep about half of the budget.
        int64_t lo = cstart, hi = pos;
        while (lo < hi) {  // smallest start whose context fits in budget / 2
          const int64_t mid = lo + (hi - lo) / 2;
          std::string c = u32_to_utf8(doc.data() + mid, static_cast<size_t>(pos - mid));
          if (typist.context_tokens(c) <= budget / 2) hi = mid; else lo = mid + 1;
        }
        int64_t s = lo;
        while (s < pos && s > 0 && doc[s - 1] != U'\n') ++s;  // a line start, if there is one
        cstart = s < pos ? s : lo;
        ctx = u32_to_utf8(doc.data() + cstart, static_cast<size_t>(pos - cstart));
      }
      auto sug = typist.suggest(ctx, &r);
      if (!sug.ok()) return report_error("bench-typing", sug.status());
      ++r.positions;
      ++r.keystrokes;
      if (!sug.value().empty()) ++r.shown;
      const int64_t L = accept_length(sug.value(), doc.data() + pos, r.chars - pos);
      if (L >= 2) {
        ++r.accepted;
        r.accepted_chars += L;
        if (verbose) {
          std::string a = u32_to_utf8(doc.data() + pos, static_cast<size_t>(L));
          fmt::print(stderr, "[{} @{}] +{} {}\n", tr.value().name, pos, L, a);
        }
        pos += L;
      } else {
        pos += 1;
      }
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double ks = r.chars ? 1.0 - static_cast<double>(r.keystrokes) / static_cast<double>(r.chars) : 0.0;
    const double ar = r.shown ? static_cast<double>(r.accepted) / static_cast<double>(r.shown) : 0.0;
    jt[tr.value().name] = {{"chars", r.chars}, {"keystrokes", r.keystrokes}, {"keystroke_savings", ks},
                           {"suggestions_shown", r.shown}, {"accepted", r.accepted}, {"acceptance_rate", ar},
                           {"accepted_chars", r.accepted_chars}, {"prefill_tokens", r.prefill_tokens},
                           {"decode_steps", r.decode_steps}, {"seconds", r.seconds},
                           {"ms_per_suggestion", r.positions ? 1e3 * r.seconds / static_cast<double>(r.positions) : 0.0}};
    print_summary(tr.value().name, r, ks, ar);
    std::fflush(stdout);
    total.chars += r.chars;
    total.keystrokes += r.keystrokes;
    total.shown += r.shown;
    total.accepted += r.accepted;
    total.seconds += r.seconds;
  }
  const double ks = total.chars ? 1.0 - static_cast<double>(total.keystrokes) / static_cast<double>(total.chars) : 0.0;
  const double ar = total.shown ? static_cast<double>(total.accepted) / static_cast<double>(total.shown) : 0.0;
  print_summary("overall", total, ks, ar);
  out["keystroke_savings"] = ks;
  out["acceptance_rate"] = ar;
  out["chars"] = total.chars;
  out["keystrokes"] = total.keystrokes;
  out["traces"] = jt;
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    if (!f) return report_error("bench-typing", Status(StatusCode::kIo, "cannot write " + json_path));
    f << out.dump(2) << "\n";
  }
  return 0;
}

}  // namespace laya::cli
