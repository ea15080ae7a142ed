// laya bench-typing [-m MODEL] TRACE.jsonl... [--json out.json] [--html report.html] [-t THREADS] [--max-tokens 8]
//                   [--max-ctx 2048] [--no-heal] [--fim psm|spm|off] [--fim-suffix-tokens 32] [-v] [-q]
// laya bench-typing [-m MODEL] -p TEXT [-p TEXT...]   (just print the suggestions)
// Keystroke savings: rebuilds each trace's final document and simulates a
// user typing it left to right on one Session per trace (the one an editor
// would use: its window, token healing and FIM options), so what is measured
// is what a user of the session gets. Before each keystroke the session makes
// a greedy suggestion (up to --max-tokens tokens); L = the longest common
// prefix of the suggestion and the rest of the document, cut back to the last
// word boundary (a position next to a non-alphanumeric character or a Han
// ideograph, or the end of the suggestion: typing_accept.h). If L >= 2 the
// user presses Tab (1 keystroke: Session::accept(L)), otherwise the user
// types the next character (1 keystroke: Session::edit at the cursor).
//   keystroke savings = 1 - keystrokes / characters
//   acceptance rate   = accepted suggestions / suggestions shown (non-empty)
//
// What the session holds: only what has been typed so far, with the cursor at
// its end. Holding the whole final document with the untyped rest after the
// cursor (as when a file is edited) would put the answer into the FIM suffix.
// So the suffix is always empty here and no prompt is a FIM prompt (fim_events
// is 0): --fim psm/spm/off differ only in the room the session keeps for a
// suffix (3 + --fim-suffix-tokens tokens when the model has FIM tokens), which
// moves the window at slightly different points. FIM with a real suffix is
// measured by `laya replay` on traces that edit inside a file.
//
// Latency, as `laya replay` reports it (same keys, nearest-rank percentiles),
// per suggestion: suggest_ms from the keystroke being handed to the session
// (the edit / accept call included) to suggest() returning; first_token_ms to
// the first piece of text (or the return, when none comes); tokens computed
// (prompt tokens fed by that suggest); free keystrokes (typed_through > 0 with
// no prompt token computed: the user typed or accepted what was predicted and
// the rest was reused with no forward pass). The keystrokes come back to back
// (no pacing); the first suggestion, on the empty document, has no keystroke
// before it.
//
// --html writes replay's latency report (report_html.h) of these suggestions,
// with each trace's keystroke savings, acceptance and tokens per keystroke.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utf8proc.h>
#include <vector>

#include "cli_util.h"
#include "engine/engine.h"
#include "latency_stats.h"
#include "outputs.h"
#include "progress.h"
#include "report_html.h"
#include "session/session.h"
#include "tokenizer/tokenizer.h"
#include "trace.h"
#include "typing_accept.h"

namespace laya::cli {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// The latency samples (latency_stats.h, as replay's) plus the keystroke figures.
struct TraceResult : LatencySamples {
  int64_t chars = 0, keystrokes = 0, shown = 0, accepted = 0, accepted_chars = 0, positions = 0;
  int64_t prefill_tokens = 0, decode_steps = 0;
  double seconds = 0;
  void add(const TraceResult& o) {
    LatencySamples::add(o);
    chars += o.chars;
    keystrokes += o.keystrokes;
    shown += o.shown;
    accepted += o.accepted;
    accepted_chars += o.accepted_chars;
    positions += o.positions;
    prefill_tokens += o.prefill_tokens;
    decode_steps += o.decode_steps;
    seconds += o.seconds;
  }
  double savings() const { return chars ? 1.0 - static_cast<double>(keystrokes) / static_cast<double>(chars) : 0.0; }
  double acceptance() const { return shown ? static_cast<double>(accepted) / static_cast<double>(shown) : 0.0; }
};

// The keys of one trace (and of the overall result): today's keystroke
// figures plus replay's latency keys.
void add_json(const TraceResult& r, json* j) {
  json& o = *j;
  o["chars"] = r.chars;
  o["keystrokes"] = r.keystrokes;
  o["keystroke_savings"] = r.savings();
  o["suggestions_shown"] = r.shown;
  o["accepted"] = r.accepted;
  o["acceptance_rate"] = r.acceptance();
  o["accepted_chars"] = r.accepted_chars;
  o["prefill_tokens"] = r.prefill_tokens;  // prompt tokens computed by all suggestions
  o["decode_steps"] = r.decode_steps;
  o["seconds"] = r.seconds;
  o["ms_per_suggestion"] = r.positions ? 1e3 * r.seconds / static_cast<double>(r.positions) : 0.0;
  o["events"] = r.positions;  // suggestions made (one per keystroke, the first before any)
  r.add_json(j);  // latency keys as replay's; fim_events is 0 here (typing at the end: no suffix)
}

// One line of the results table (savings, acceptance rate), then the latency.
void print_summary(const std::string& name, const TraceResult& r) {
  fmt::print("{:<20} chars {:>6}  keystrokes {:>6}  savings {:>6.2f}%  accepted {:>5}/{:<5} ({:.1f}%)  {:.1f} s\n", name,
             r.chars, r.keystrokes, 100 * r.savings(), r.accepted, r.shown, 100 * r.acceptance(), r.seconds);
  fmt::print("{}", r.lines());
  fmt::print("  free keystrokes {}, window moves {}, FIM {}, healed {}\n", r.free_keystrokes, r.window_moves, r.fim_events,
             r.healed_events);
}

// The report's section of one trace: the latency samples and the keystrokes.
ReportTrace report_trace(const TraceResult& r, const std::string& name) {
  ReportTrace t = r.report_trace(name);
  t.typing = {r.chars, r.keystrokes, r.shown, r.accepted, r.accepted_chars};
  return t;
}

// The simulated user types `doc` (UTF-8) into a fresh session. `bar`
// advances by the document's characters from `chars_before`.
Status type_document(Engine& eng, const tok::Tokenizer& tk, const SessionOptions& so, const SuggestOptions& opt,
                     const std::string& name, const std::string& doc, bool verbose, Progress& bar,
                     uint64_t chars_before, TraceResult* r) {
  const std::u32string doc32 = utf8_to_u32(doc);
  Session s(eng, tk, so);
  r->chars = static_cast<int64_t>(doc32.size());
  SuggestClock clock;
  Suggestion sug;
  enum class Key { kNone, kType, kTab } key = Key::kNone;
  int64_t pos = 0, tab_len = 0;
  const auto start = Clock::now();
  while (pos < r->chars) {
    bar.update(chars_before + static_cast<uint64_t>(pos));
    clock.start();
    if (key == Key::kTab) {
      LAYA_TRY(s.accept(static_cast<size_t>(tab_len)));
    } else if (key == Key::kType) {
      const size_t b = cp_bytes(doc, static_cast<size_t>(pos - 1));
      LAYA_TRY(s.edit(s.cursor(), 0, std::string_view(doc).substr(b, cp_bytes(std::string_view(doc).substr(b), 1))));
    }
    LAYA_TRY(s.suggest_into(opt, &sug, clock.on_piece()));
    clock.stop(sug, r);
    r->prefill_tokens += sug.timings.tokens_computed;
    r->decode_steps += static_cast<int64_t>(sug.timings.decode_ms.size());
    ++r->positions;
    ++r->keystrokes;
    if (!sug.text.empty()) ++r->shown;
    const int64_t L = accept_length(utf8_to_u32(sug.text), doc32.data() + pos, r->chars - pos);
    if (L >= 2) {
      ++r->accepted;
      r->accepted_chars += L;
      if (verbose) {
        const size_t b = cp_bytes(doc, static_cast<size_t>(pos));
        const std::string a = doc.substr(b, cp_bytes(std::string_view(doc).substr(b), static_cast<size_t>(L)));
        bar.clear();
        fmt::print(stderr, "[{} @{}] +{} {}\n", name, pos, L, a);
      }
      key = Key::kTab;
      tab_len = L;
      pos += L;
    } else {
      key = Key::kType;
      pos += 1;
    }
  }
  r->seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return Status::Ok();
}

// -p: each text's suggestion on a fresh session, printed as a JSON line; all
// of them as an array (for --json).
Result<json> suggest_prompts(Engine& eng, const tok::Tokenizer& tk, const SessionOptions& so, const SuggestOptions& opt,
                             const std::vector<std::string>& prompts) {
  json arr = json::array();
  for (const std::string& p : prompts) {
    Session s(eng, tk, so);
    LAYA_TRY(s.set_text(p));
    LAYA_ASSIGN_OR_RETURN(Suggestion sug, s.suggest(opt));
    const json line = {{"prompt", p}, {"suggestion", sug.text}};
    arr.push_back(line);
    // -p text from the command line may be invalid UTF-8: replaced, not thrown.
    std::printf("%s\n", line.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  }
  return arr;
}

// Every trace typed in turn: the per-trace JSON and summary lines, the total,
// and (want_report) the report's sections. A trace that fails stops the run
// (`failed`); the traces before it are kept.
struct TypedTraces {
  json per_trace = json::object();
  TraceResult total;
  std::vector<ReportTrace> report;
  Status failed;
};
TypedTraces type_traces(Engine& eng, const tok::Tokenizer& tk, const SessionOptions& so, const SuggestOptions& opt,
                        const std::vector<Trace>& traces, const std::vector<std::string>& docs, bool verbose,
                        Progress& bar, bool want_report) {
  TypedTraces run;
  for (size_t i = 0; i < traces.size(); ++i) {
    TraceResult r;
    bar.set_label("bench-typing " + traces[i].name);
    Status st = type_document(eng, tk, so, opt, traces[i].name, docs[i], verbose, bar,
                              static_cast<uint64_t>(run.total.chars), &r);
    bar.clear();  // before any result line
    if (!st.ok()) {
      run.failed = Status(st.code(), fmt::format("{}: {}", traces[i].path, st.message()));
      break;
    }
    json j = json::object();
    add_json(r, &j);
    run.per_trace[traces[i].name] = j;
    print_summary(traces[i].name, r);
    std::fflush(stdout);
    run.total.add(r);
    if (want_report) run.report.push_back(report_trace(r, traces[i].name));
  }
  return run;
}

}  // namespace

int cmd_bench_typing(int argc, char** argv) {
  CLI::App app{"Keystroke savings of greedy suggestions on typing traces (on sessions)", "laya bench-typing"};
  app.footer("Example: laya bench-typing ../shared/fixtures/traces/*.jsonl --json savings.json --html report.html");
  std::string json_path, html_path;
  std::vector<std::string> paths;
  int max_tokens = 8;
  int64_t max_ctx = 2048;
  bool verbose = false, no_heal = false;
  std::vector<std::string> prompts;
  app.add_option("traces", paths, "trace files (.jsonl)");
  app.add_option("-p,--prompt", prompts, "print the suggestion for this text (repeatable; instead of traces)");
  app.add_option("--json", json_path, "write the results as JSON to this file");
  app.add_option("--html", html_path, "write the latency and keystroke-savings report (one self-contained HTML file) here");
  app.add_option("--max-tokens", max_tokens, "tokens per suggestion")->transform(int_in(1, 64));
  app.add_option("--max-ctx", max_ctx, "context cap in tokens (and the model's own)")->transform(int_in(64, 1 << 20));
  app.add_flag("-v,--verbose", verbose, "print each accepted suggestion to stderr");
  SessionOptions so;
  std::string fim = "psm";
  app.add_flag("--no-heal", no_heal, "no token healing: the suggestion starts after the text's last token");
  app.add_option("--fim", fim, "fill-in-the-middle prompt order where the model has FIM tokens: psm, spm or off")
      ->check(CLI::IsMember({"psm", "spm", "off"}));
  app.add_option("--fim-suffix-tokens", so.fim_suffix_tokens, "bound of the suffix in tokens")->transform(int_in(1, 512));
  EngineFlags flags;
  flags.add_to(app, false);
  if (auto rc = parse_args(app, argc, argv, "bench-typing")) return *rc;
  if (paths.empty() && prompts.empty())
    return report_error("bench-typing", Status(StatusCode::kInvalidArgument, "pass trace files or -p TEXT"));
  for (const std::string& p : prompts)
    if (Status st = check_utf8_arg("--prompt", p); !st.ok()) return report_error("bench-typing", st);
  // --json is checked before any work: never a trace or the model, and an
  // existing file only when it is an earlier result of bench-typing.
  std::vector<std::string> inputs = paths;
  inputs.push_back(flags.model_path);
  const OutputOptions json_opt =
      json_output("--json", inputs, {"traces", "n_ctx", "max_tokens"}, {"prompt", "suggestion"});
  if (!json_path.empty()) {
    if (Status st = check_output(json_path, json_opt); !st.ok()) return report_error("bench-typing", st);
  }
  const OutputOptions html_opt = html_report_output("--html", inputs);
  if (!html_path.empty()) {
    if (paths.empty())
      return report_error("bench-typing", Status(StatusCode::kInvalidArgument, "--html needs trace files (not only -p)"));
    if (Status st = check_output(html_path, html_opt); !st.ok()) return report_error("bench-typing", st);
    if (html_path == json_path)
      return report_error("bench-typing", Status(StatusCode::kInvalidArgument, "--html and --json name the same file"));
  }
  // Every trace is read, checked and rebuilt before the model is loaded: a bad file fails at once.
  std::vector<Trace> traces;
  std::vector<std::string> docs;
  for (const std::string& p : paths) {
    auto t = load_trace(p);
    if (!t.ok()) return report_error("bench-typing", t.status());
    auto d = final_document(t.value());
    if (!d.ok()) return report_error("bench-typing", d.status());
    traces.push_back(std::move(t).value());
    docs.push_back(std::move(d).value());
  }
  if (Status st = check_unique_names(traces); !st.ok()) return report_error("bench-typing", st);
  auto m = flags.load_model();
  if (!m.ok()) return report_error("bench-typing", m.status());
  std::shared_ptr<const Model> model = std::move(m).value();
  auto t = flags.load_tokenizer(*model);
  if (!t.ok()) return report_error("bench-typing", t.status());
  std::unique_ptr<tok::Tokenizer> tk = std::move(t).value();
  auto e = flags.make_typing_engine(model, max_ctx, "bench-typing", app.count("--max-ctx") > 0);
  if (!e.ok()) return report_error("bench-typing", e.status());
  warn("bench-typing", (*e)->memory_lock_note());
  Engine& eng = **e;
  const int64_t n_ctx = eng.options().n_ctx;  // resolved by Engine::create
  so.heal = !no_heal;
  so.fim = fim == "spm" ? FimOrder::kSpm : fim == "off" ? FimOrder::kOff : FimOrder::kPsm;
  SuggestOptions opt;
  opt.max_tokens = max_tokens;
  if (!prompts.empty()) {
    auto arr = suggest_prompts(eng, *tk, so, opt, prompts);
    if (!arr.ok()) return report_error("bench-typing", arr.status());
    if (traces.empty()) {
      if (!json_path.empty()) {
        if (Status st = write_file_atomic(json_path, dump_json(*arr), json_opt); !st.ok())
          return report_error("bench-typing", st);
      }
      return 0;
    }
  }

  // Every trace was checked before the model was loaded, so a bad file fails
  // before any work. A trace that fails while it runs stops the run, and the
  // results of the traces before it are still written (marked "incomplete").
  TypedTraces run;
  {
    uint64_t all_chars = 0;
    for (const std::string& d : docs) all_chars += cp_count(d);
    Progress bar("bench-typing", all_chars, progress_allowed(flags.quiet), "chars");
    run = type_traces(eng, *tk, so, opt, traces, docs, verbose, bar, !html_path.empty());
  }
  const TraceResult& total = run.total;
  const Status& failed = run.failed;
  json& jt = run.per_trace;
  print_summary("overall", total);
  json out;
  out["model"] = flags.model_path;
  out["max_tokens"] = max_tokens;
  out["n_ctx"] = n_ctx;
  out["token_healing"] = so.heal;
  out["fim"] = fim;
  out["fim_suffix_tokens"] = so.fim_suffix_tokens;
  add_json(total, &out);
  out["traces"] = jt;
  if (!failed.ok()) out["incomplete"] = failed.message();
  const int rc = failed.ok() ? 0 : report_error("bench-typing", failed);
  if (!json_path.empty()) {
    if (Status st = write_file_atomic(json_path, dump_json(out), json_opt); !st.ok())
      return report_error("bench-typing", st);
  }
  if (!html_path.empty() && !run.report.empty()) {
    ReportInput in;
    in.model = flags.model_path;
    in.machine = machine_description(flags.threads);
    in.how = fmt::format("a simulated user typing each trace's final text, keystrokes back to back (Tab takes a "
                         "suggestion's matching words), up to {} tokens per suggestion", max_tokens);
    in.command = command_line(argc, argv);
    in.traces = std::move(run.report);
    if (Status st = write_file_atomic(html_path, report_html(in), html_opt); !st.ok())
      return report_error("bench-typing", st);
  }
  return rc;
}

}  // namespace laya::cli
