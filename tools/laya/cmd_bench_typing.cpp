// laya bench-typing [-m MODEL] TRACE.jsonl... [--json out.json] [--html report.html] [-t THREADS] [--max-tokens 8]
//                   [--max-ctx 2048] [--no-heal] [--fim psm|spm|off] [--fim-suffix-tokens 32] [-v] [-q]
// laya bench-typing [-m MODEL] -p TEXT [-p TEXT...]   (just print the suggestions)
// Keystroke savings: rebuilds each trace's final document and lets the
// simulated typist of player/typing_sim.h write it (a Tab takes a
// suggestion's matching words):
//   keystroke savings = 1 - keystrokes / characters
//   acceptance rate   = accepted suggestions / suggestions shown (non-empty)
//
// The typist's document holds only what has been typed so far, so the suffix
// is always empty here and no prompt is a FIM prompt (fim_events is 0):
// --fim psm/spm/off differ only in the room the session keeps for a suffix
// (3 + --fim-suffix-tokens tokens when the model has FIM tokens), which moves
// the window at slightly different points. FIM with a real suffix is measured
// by `laya replay` on traces that edit inside a file.
//
// Latency, as `laya replay` reports it (same keys, nearest-rank percentiles,
// one stats type: player/latency_stats.h), per suggestion: suggest_ms,
// first_token_ms, tokens computed, free keystrokes. The keystrokes come back
// to back (no pacing).
//
// --html writes replay's latency report (report_html.h) of these suggestions,
// with each trace's keystroke savings, acceptance and tokens per keystroke.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_util.h"
#include "engine/engine.h"
#include "model/model.h"
#include "outputs.h"
#include "player/latency_stats.h"
#include "player/trace.h"
#include "player/typing_sim.h"
#include "progress.h"
#include "report_html.h"
#include "session/session.h"
#include "tokenizer/tokenizer.h"

namespace laya::cli {

namespace {

using json = nlohmann::json;
using player::LatencyStats;
using player::Trace;

struct TypingArgs {
  std::string json_path, html_path;
  std::vector<std::string> paths, prompts;
  int max_tokens = 8;
  int64_t max_ctx = 2048;
  bool verbose = false, no_heal = false;
  std::string fim = "psm";
  SessionOptions so;
  EngineFlags flags;
};

void add_options(CLI::App& app, TypingArgs& a) {
  app.add_option("traces", a.paths, "trace files (.jsonl)");
  app.add_option("-p,--prompt", a.prompts, "print the suggestion for this text (repeatable; instead of traces)");
  app.add_option("--json", a.json_path, "write the results as JSON to this file");
  app.add_option("--html", a.html_path, "write the latency and keystroke-savings report (one self-contained HTML file) here");
  app.add_option("--max-tokens", a.max_tokens, "tokens per suggestion")->transform(int_in(1, 64));
  app.add_option("--max-ctx", a.max_ctx, "context cap in tokens (and the model's own)")->transform(int_in(64, 1 << 20));
  app.add_flag("-v,--verbose", a.verbose, "print each accepted suggestion to stderr");
  app.add_flag("--no-heal", a.no_heal, "no token healing: the suggestion starts after the text's last token");
  app.add_option("--fim", a.fim, "fill-in-the-middle prompt order where the model has FIM tokens: psm, spm or off")
      ->check(CLI::IsMember({"psm", "spm", "off"}));
  app.add_option("--fim-suffix-tokens", a.so.fim_suffix_tokens, "bound of the suffix in tokens")->transform(int_in(1, 512));
  a.flags.add_to(app, false);
}

// The keys of one trace (and of the overall result): the keystroke figures
// plus replay's latency keys.
void add_json(const LatencyStats& r, json* j) {
  json& o = *j;
  o["chars"] = r.chars;
  o["keystrokes"] = r.keystrokes;
  o["keystroke_savings"] = r.savings();
  o["suggestions_shown"] = r.shown;
  o["accepted"] = r.accepted;
  o["acceptance_rate"] = r.acceptance();
  o["accepted_chars"] = r.accepted_chars;
  o["prefill_tokens"] = r.prefill_tokens();  // prompt tokens computed by all suggestions
  o["decode_steps"] = r.decode_steps;
  o["seconds"] = r.seconds;
  o["ms_per_suggestion"] = r.events ? 1e3 * r.seconds / static_cast<double>(r.events) : 0.0;
  o["events"] = r.events;  // suggestions made (one per keystroke, the first before any)
  r.add_json(j);  // latency keys as replay's; fim_events is 0 here (typing at the end: no suffix)
}

// One line of the results table (savings, acceptance rate), then the latency.
void print_summary(const std::string& name, const LatencyStats& r) {
  fmt::print("{:<20} chars {:>6}  keystrokes {:>6}  savings {:>6.2f}%  accepted {:>5}/{:<5} ({:.1f}%)  {:.1f} s\n", name,
             r.chars, r.keystrokes, 100 * r.savings(), r.accepted, r.shown, 100 * r.acceptance(), r.seconds);
  fmt::print("{}", r.lines());
  fmt::print("  free keystrokes {}, window moves {}, FIM {}, healed {}\n", r.free_keystrokes, r.window_moves, r.fim_events,
             r.healed_events);
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
  LatencyStats total;
  std::vector<ReportTrace> report;
  Status failed;
};
TypedTraces type_traces(Engine& eng, const tok::Tokenizer& tk, const SessionOptions& so, const SuggestOptions& opt,
                        const std::vector<Trace>& traces, const std::vector<std::string>& docs, bool verbose,
                        Progress& bar, bool want_report) {
  TypedTraces run;
  for (size_t i = 0; i < traces.size(); ++i) {
    LatencyStats r;
    bar.set_label("bench-typing " + traces[i].name);
    player::TypingHooks hooks;
    const uint64_t chars_before = static_cast<uint64_t>(run.total.chars);
    hooks.before_keystroke = [&](int64_t typed) { bar.update(chars_before + static_cast<uint64_t>(typed)); };
    if (verbose)
      hooks.on_accept = [&](int64_t pos, int64_t n, std::string_view text) {
        bar.clear();
        fmt::print(stderr, "[{} @{}] +{} {}\n", traces[i].name, pos, n, text);
      };
    Status st = player::type_document(eng, tk, so, opt, docs[i], &r, hooks);
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

// Checks the arguments and the outputs before any work: --json never a trace
// or the model, and an existing file only when it is an earlier result of
// bench-typing.
Status check_args(const TypingArgs& a, OutputOptions* json_opt, OutputOptions* html_opt) {
  if (a.paths.empty() && a.prompts.empty()) return Status(StatusCode::kInvalidArgument, "pass trace files or -p TEXT");
  for (const std::string& p : a.prompts) LAYA_TRY(check_utf8_arg("--prompt", p));
  std::vector<std::string> inputs = a.paths;
  inputs.push_back(a.flags.model_path);
  *json_opt = json_output("--json", inputs, {"traces", "n_ctx", "max_tokens"}, {"prompt", "suggestion"});
  if (!a.json_path.empty()) LAYA_TRY(check_output(a.json_path, *json_opt));
  *html_opt = html_report_output("--html", inputs);
  if (!a.html_path.empty()) {
    if (a.paths.empty()) return Status(StatusCode::kInvalidArgument, "--html needs trace files (not only -p)");
    LAYA_TRY(check_output(a.html_path, *html_opt));
    if (a.html_path == a.json_path) return Status(StatusCode::kInvalidArgument, "--html and --json name the same file");
  }
  return Status::Ok();
}

// Every trace is read, checked and rebuilt before the model is loaded: a bad file fails at once.
Status load_documents(const std::vector<std::string>& paths, std::vector<Trace>* traces, std::vector<std::string>* docs) {
  for (const std::string& p : paths) {
    LAYA_ASSIGN_OR_RETURN(Trace t, player::load_trace(p));
    LAYA_ASSIGN_OR_RETURN(std::string d, player::final_document(t));
    traces->push_back(std::move(t));
    docs->push_back(std::move(d));
  }
  return player::check_unique_names(*traces);
}

json result_json(const TypingArgs& a, int64_t n_ctx, const TypedTraces& run) {
  json out;
  out["model"] = a.flags.model_path;
  out["max_tokens"] = a.max_tokens;
  out["n_ctx"] = n_ctx;
  out["token_healing"] = !a.no_heal;
  out["fim"] = a.fim;
  out["fim_suffix_tokens"] = a.so.fim_suffix_tokens;
  add_json(run.total, &out);
  out["traces"] = run.per_trace;
  if (!run.failed.ok()) out["incomplete"] = run.failed.message();
  return out;
}

Status write_html(const TypingArgs& a, TypedTraces& run, const OutputOptions& html_opt, int argc, char** argv) {
  ReportInput in;
  in.model = a.flags.model_path;
  in.machine = machine_description(a.flags.threads);
  in.how = fmt::format("a simulated user typing each trace's final text, keystrokes back to back (Tab takes a "
                       "suggestion's matching words), up to {} tokens per suggestion", a.max_tokens);
  in.command = command_line(argc, argv);
  in.traces = std::move(run.report);
  return write_file_atomic(a.html_path, report_html(in), html_opt);
}

}  // namespace

int cmd_bench_typing(int argc, char** argv) {
  CLI::App app{"Keystroke savings of greedy suggestions on typing traces (on sessions)", "laya bench-typing"};
  app.footer("Example: laya bench-typing ../shared/fixtures/traces/*.jsonl --json savings.json --html report.html");
  TypingArgs a;
  add_options(app, a);
  if (auto rc = parse_args(app, argc, argv, "bench-typing")) return *rc;
  OutputOptions json_opt, html_opt;
  if (Status st = check_args(a, &json_opt, &html_opt); !st.ok()) return report_error("bench-typing", st);
  std::vector<Trace> traces;
  std::vector<std::string> docs;
  if (Status st = load_documents(a.paths, &traces, &docs); !st.ok()) return report_error("bench-typing", st);
  auto m = a.flags.load_model();
  if (!m.ok()) return report_error("bench-typing", m.status());
  std::shared_ptr<const Model> model = std::move(m).value();
  auto t = a.flags.load_tokenizer(*model);
  if (!t.ok()) return report_error("bench-typing", t.status());
  std::unique_ptr<tok::Tokenizer> tk = std::move(t).value();
  auto e = a.flags.make_typing_engine(model, a.max_ctx, "bench-typing", app.count("--max-ctx") > 0);
  if (!e.ok()) return report_error("bench-typing", e.status());
  warn("bench-typing", (*e)->memory_lock_note());
  Engine& eng = **e;
  a.so.heal = !a.no_heal;
  a.so.fim = a.fim == "spm" ? FimOrder::kSpm : a.fim == "off" ? FimOrder::kOff : FimOrder::kPsm;
  SuggestOptions opt;
  opt.max_tokens = a.max_tokens;
  if (!a.prompts.empty()) {
    auto arr = suggest_prompts(eng, *tk, a.so, opt, a.prompts);
    if (!arr.ok()) return report_error("bench-typing", arr.status());
    if (traces.empty()) {
      Status st = a.json_path.empty() ? Status::Ok() : write_file_atomic(a.json_path, dump_json(*arr), json_opt);
      return st.ok() ? 0 : report_error("bench-typing", st);
    }
  }
  TypedTraces run;
  {
    uint64_t all_chars = 0;
    for (const std::string& d : docs) all_chars += player::cp_count(d);
    Progress bar("bench-typing", all_chars, progress_allowed(a.flags.quiet), "chars");
    run = type_traces(eng, *tk, a.so, opt, traces, docs, a.verbose, bar, !a.html_path.empty());
  }
  print_summary("overall", run.total);
  const int rc = run.failed.ok() ? 0 : report_error("bench-typing", run.failed);
  if (!a.json_path.empty()) {
    Status st = write_file_atomic(a.json_path, dump_json(result_json(a, eng.options().n_ctx, run)), json_opt);
    if (!st.ok()) return report_error("bench-typing", st);
  }
  if (!a.html_path.empty() && !run.report.empty()) {
    if (Status st = write_html(a, run, html_opt, argc, argv); !st.ok()) return report_error("bench-typing", st);
  }
  return rc;
}

}  // namespace laya::cli
