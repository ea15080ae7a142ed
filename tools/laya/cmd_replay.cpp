// laya replay [-m MODEL] TRACE.jsonl... [--fast] [--verify] [--json out.json] [--max-tokens 8] [-t N]
//             [--pace-cap-ms N] [--no-heal] [--fim psm|spm|off] [--fim-suffix-tokens 32]
//             [--suggestions-out FILE]
// Plays typing traces (../shared/fixtures/traces/README.md) on one long-lived
// Session per trace, as an editor would: after every event (insert, delete,
// move, accept) it asks for a suggestion and records its latency and work.
// The player, the pace (--fast, --gap-ms, --pace-cap-ms, the recorded one),
// --verify and --idle-extend, and the definitions of every figure printed:
// player/trace_player.h. This file holds the options and the output.
//
// --suggestions-out FILE: every completed suggestion as a JSON line
// {"trace": name, "event": index of the event in the trace (from 0), "text",
// "tokens"}, so that two builds can be compared suggestion by suggestion
// (bench/ab_suggestions.sh plays with --fast, where every event completes).
//
// Hot model swap (issue 12): --swap-to OTHER --swap-every N swaps the model
// between -m and OTHER every N events on another thread, while the events
// play (player/model_swaps.h), and once, past the middle, to --swap-bad FILE,
// which must fail and leave the old model serving. Sessions follow the swaps
// (Session on a ModelSlot); --verify checks each suggestion against a fresh
// session on the model that computed it. The JSON adds swaps, swaps_failed,
// swap_added_ms and the rest defined in player/model_swaps.cpp; swap_added_ms
// needs the synchronous replay (--fast or --verify) and two more replays
// without swaps (one per model, --fast, not verified) to subtract from.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_util.h"
#include "core/atomic_file.h"
#include "engine/engine.h"
#include "model/model.h"
#include "outputs.h"
#include "player/latency_stats.h"
#include "player/model_swaps.h"
#include "player/trace.h"
#include "player/trace_player.h"
#include "progress.h"
#include "report_html.h"
#include "session/model_slot.h"

namespace laya::cli {

namespace {

using json = nlohmann::json;
using player::LatencyStats;
using player::PlayHooks;
using player::PlayOptions;
using player::SwapDriver;
using player::Trace;
using player::TracePlayer;

struct ReplayArgs {
  std::vector<std::string> paths;
  std::string json_path, html_path, peer_path, suggestions_path;
  bool fast = false, verify = false, samples = false, no_heal = false;
  int max_tokens = 8, idle_extend = 0;
  int64_t max_ctx = 2048;
  double gap_ms = 0, pace_cap_ms = 0, verify_tie = -1;
  std::string fim = "psm";
  SessionOptions so;
  std::string swap_to, swap_bad;
  int64_t swap_every = 0;
  EngineFlags flags;
  std::vector<std::string> inputs;  // what the outputs may not overwrite: traces, models
};

void add_options(CLI::App& app, ReplayArgs& a) {
  app.add_option("traces", a.paths, "trace files (.jsonl)")->required();
  app.add_flag("--fast", a.fast, "play events back to back instead of at the recorded pace");
  app.add_option("--gap-ms", a.gap_ms,
                 "play events one after another with this many ms between a suggestion and the next event "
                 "(a typist's pause: the threads fall asleep; bench/serve_load.py --once --gap-ms plays the same)")
      ->transform(real_in(0, 60000));
  app.add_option("--pace-cap-ms", a.pace_cap_ms,
                 "at the recorded pace, but every pause longer than this many ms is cut to it (the cores still go "
                 "idle between keys; the whole public set plays in minutes instead of half an hour)")
      ->transform(real_in(1, 60000));
  app.add_flag("--verify", a.verify, "compare every suggestion with a fresh session's (from scratch)");
  app.add_option("--verify-tie", a.verify_tie,
                 "with --verify: a different token whose from-scratch logit is within this fraction of the largest "
                 "|logit| of the chosen one's is a near tie, not a mismatch (default: 0 on cpu, which computes the "
                 "same bits incrementally and from scratch; 1e-5 on cuda, whose prefill and decode kernels sum in "
                 "different orders)")
      ->transform(real_in(0, 1));
  app.add_option("--json", a.json_path, "write the results as JSON to this file");
  app.add_option("--html", a.html_path, "write the latency report (one self-contained HTML file) here");
  app.add_option("--peer", a.peer_path,
                 "with --html: llama-server's results (bench/llamacpp_typing_client.py --json) on the same axes");
  app.add_flag("--samples", a.samples, "with --json: also every event's suggest_ms, first_token_ms and tokens computed");
  app.add_option("--suggestions-out", a.suggestions_path,
                 "write every completed suggestion to this file, one JSON line each: trace, event, text, tokens "
                 "(bench/ab_suggestions.sh compares two builds with it)");
  app.add_option("--max-tokens", a.max_tokens, "tokens per suggestion")->transform(int_in(1, 64));
  app.add_option("--idle-extend", a.idle_extend,
                 "idle-time work: tokens each completed suggestion is extended by while the next event has not "
                 "come, so typing through it past its end is free (default 0: none; measured no gain at the recorded pace with the default model, docs/PERFORMANCE.md)")
      ->transform(int_in(0, 256));
  app.add_option("--max-ctx", a.max_ctx, "context cap in tokens (and the model's own)")->transform(int_in(64, 1 << 20));
  app.add_flag("--no-heal", a.no_heal, "no token healing");
  add_draft_option(app, &a.so.draft_max_tokens);
  app.add_option("--fim", a.fim, "fill-in-the-middle prompt order where the model has FIM tokens: psm, spm or off")
      ->check(CLI::IsMember({"psm", "spm", "off"}));
  app.add_option("--fim-suffix-tokens", a.so.fim_suffix_tokens, "bound of the suffix in tokens")->transform(int_in(1, 512));
  app.add_option("--swap-to", a.swap_to, "hot swap: switch between -m and this model while the traces play");
  app.add_option("--swap-every", a.swap_every, "hot swap: events between swaps")->transform(int_in(1, 1 << 30));
  app.add_option("--swap-bad", a.swap_bad, "hot swap: once, past the middle, swap to this file (it must fail validation)");
  a.flags.add_to(app, false);
}

json stats_json(const LatencyStats& s, bool verify, bool samples) {
  json j;
  j["events"] = s.events;
  j["mismatches"] = verify ? json(s.mismatches) : json(nullptr);  // null: not verified
  j["near_ties"] = verify ? json(s.near_ties) : json(nullptr);  // differences within --verify-tie (not mismatches)
  // Counting heap allocations needs a replaced global operator new, which the
  // CLI does not have: the allocation test (issue 10, item 7) is a later
  // slice, and no number is made up here.
  j["allocations_after_warmup"] = nullptr;
  s.add_json(&j);  // suggest_ms, first_token_ms, tokens computed, free keystrokes, window moves, FIM, healed
  j["accept_events"] = s.accepts;
  j["accept_chars"] = s.accept_chars;          // code points the accept events inserted
  j["accept_predicted_chars"] = s.accept_predicted;  // ... of them the engine's suggestion had predicted
  j["superseded"] = s.superseded;  // at the recorded pace: suggestions cancelled or dropped by the next event
  // Every completed suggestion's numbers in event order, so that runs made
  // apart (one process per trace, in parallel) can be merged exactly and a
  // report can draw the distribution, not only its percentiles.
  if (samples) j["samples"] = {{"suggest_ms", s.suggest_ms}, {"first_token_ms", s.first_token_ms},
                               {"tokens_computed", s.computed}};
  return j;
}

void print_stats(const std::string& name, const LatencyStats& s, bool verify) {
  fmt::print("{}: {} events{}, free keystrokes {}, window moves {}, FIM {}, healed {}; accepts {} ({} of {} chars "
             "predicted)\n",
             name, s.events,
             verify ? fmt::format(", {} mismatches{}", s.mismatches,
                                  s.near_ties ? fmt::format(" ({} near ties)", s.near_ties) : std::string())
                    : std::string(),
             s.free_keystrokes,
             s.window_moves, s.fim_events, s.healed_events, s.accepts, s.accept_predicted, s.accept_chars);
  if (s.superseded > 0) fmt::print("  superseded by the next event: {}\n", s.superseded);
  fmt::print("{}", s.lines());
}

// The suggest_ms of every event of `traces` replayed with no swap on the model
// at `path` (synchronous, not verified, with the measured run's --gap-ms: a
// pause between events costs the next one the threads' wake-up, so a
// baseline without it would credit the swap with that): what swap_added_ms subtracts.
Result<std::vector<double>> baseline(const std::string& path, const ModelSlotOptions& mso, PlayOptions opt,
                                     const std::vector<Trace>& traces) {
  LAYA_ASSIGN_OR_RETURN(std::unique_ptr<ModelSlot> slot, ModelSlot::create(path, mso));
  opt.fast = true;
  opt.verify = false;
  opt.swap_to.clear();
  TracePlayer rp(*slot, opt);
  LatencyStats all;
  for (const Trace& t : traces) {
    LatencyStats s;
    LAYA_TRY(rp.play(t, &s));
    all.add(s);
  }
  fmt::print("baseline without swaps on {}: {} events, suggest_ms {}\n", path, all.events,
             player::ms_line(all.suggest_ms));
  return all.suggest_ms;
}

// The swap results on stdout; false when the swaps did not go as they must
// (a good swap failed, or the bad file was taken or left no model serving).
bool print_swaps(const nlohmann::json& j, bool bad_asked) {
  fmt::print("swaps: {} done, {} failed, {} requests skipped (a swap was still running); swap_ms p50 {:.1f} max {:.1f}\n",
             j["swaps"].get<int64_t>(), j["swaps_failed"].get<int64_t>(), j["swap_requests_skipped"].get<int64_t>(),
             j["swap_ms"]["p50"].get<double>(), j["swap_ms"]["max"].get<double>());
  if (!j["swap_added_ms"].is_null())
    fmt::print("  swap_added_ms p50 {:.3f} p99 {:.3f} max {:.3f} over {} affected events; rebind_ms p50 {:.3f} max {:.3f}\n",
               j["swap_added_ms"]["p50"].get<double>(), j["swap_added_ms"]["p99"].get<double>(),
               j["swap_added_ms"]["max"].get<double>(), j["swap_affected_events"].get<int64_t>(),
               j["rebind_ms"]["p50"].get<double>(), j["rebind_ms"]["max"].get<double>());
  if (!j["swap_added_ms_by_cause"].is_null()) {
    for (const char* cause : {"first_on_new_model", "overlapped_a_load"}) {
      const auto& c = j["swap_added_ms_by_cause"][cause];
      fmt::print("    {}: {} events, p50 {:.3f} p99 {:.3f} max {:.3f}\n", cause, c["n"].get<int64_t>(),
                 c["p50"].get<double>(), c["p99"].get<double>(), c["max"].get<double>());
    }
  }
  fmt::print("  RSS {:.1f} MB after the first swap, {:.1f} MB at the end\n", j["rss_mb_after_first_swap"].get<double>(),
             j["rss_mb_end"].get<double>());
  bool good = j["swap_errors"].empty();
  for (const auto& e : j["swap_errors"]) fmt::print(stderr, "laya replay: swap failed: {}\n", e.get<std::string>());
  const auto& bad = j["bad_swap"];
  if (bad.is_null()) {
    if (bad_asked) warn("replay", "--swap-bad: no swap was requested past the middle of the run (lower --swap-every)");
  } else if (!bad["failed"].get<bool>() || !bad["old_model_kept"].get<bool>()) {
    fmt::print(stderr, "laya replay: --swap-bad {}: {}\n", bad["file"].get<std::string>(),
               bad["failed"].get<bool>() ? "the old model was not kept" : "the swap succeeded (it must fail validation)");
    good = false;
  } else {
    fmt::print("  bad swap refused, old model kept: {}\n", bad["message"].get<std::string>());
  }
  return good;
}

// The output files' rules, checked before any work, and --peer's samples.
struct ReplayOutputs {
  OutputOptions json_opt, html_opt, suggestions_opt;
  std::map<std::string, std::vector<double>> peer;
};

// --suggestions-out replaces only an earlier suggestions file.
OutputOptions suggestions_output(const std::vector<std::string>& inputs) {
  OutputOptions o;
  o.option = "--suggestions-out";
  o.inputs = inputs;
  o.kind = "a replay suggestions file (JSON lines)";
  o.replaceable = [](const std::string& p) { return file_starts_with(p, "{\"trace\":"); };
  return o;
}

// The option combinations, then every output (never a trace or a model, and
// an existing file only when it is an earlier output of its kind).
Status check_args_and_outputs(ReplayArgs& a, ReplayOutputs* out) {
  if (a.swap_to.empty() != (a.swap_every == 0))
    return Status(StatusCode::kInvalidArgument, "--swap-to and --swap-every go together");
  if (!a.swap_bad.empty() && a.swap_to.empty())
    return Status(StatusCode::kInvalidArgument, "--swap-bad needs --swap-to and --swap-every");
  a.inputs = a.paths;
  a.inputs.push_back(a.flags.model_path);
  for (const std::string* p : {&a.swap_to, &a.swap_bad})
    if (!p->empty()) a.inputs.push_back(*p);
  out->json_opt = json_output("--json", a.inputs, {"traces", "paced", "max_tokens"});
  if (!a.json_path.empty()) LAYA_TRY(check_output(a.json_path, out->json_opt));
  out->html_opt = html_report_output("--html", a.inputs);
  if (!a.html_path.empty()) {
    LAYA_TRY(check_output(a.html_path, out->html_opt));
    if (!a.peer_path.empty()) {
      LAYA_ASSIGN_OR_RETURN(out->peer, load_peer_samples(a.peer_path));
    }
  } else if (!a.peer_path.empty()) {
    return Status(StatusCode::kInvalidArgument, "--peer needs --html (it draws the peer's samples)");
  }
  out->suggestions_opt = suggestions_output(a.inputs);
  if (!a.suggestions_path.empty()) {
    if (a.suggestions_path == a.json_path || a.suggestions_path == a.html_path)
      return Status(StatusCode::kInvalidArgument, "--suggestions-out names the same file as --json or --html");
    LAYA_TRY(check_output(a.suggestions_path, out->suggestions_opt));
  }
  return Status::Ok();
}

// Every trace is read and checked before the model is loaded: a bad file
// fails at once, before any work.
Result<std::vector<Trace>> load_traces(const ReplayArgs& a, int64_t* total_events) {
  std::vector<Trace> traces;
  for (const std::string& p : a.paths) {
    LAYA_ASSIGN_OR_RETURN(Trace t, player::load_trace(p));
    // The rebuilt text against final_sha256 now, not after minutes of replay.
    LAYA_TRY(player::final_document(t).status());
    *total_events += static_cast<int64_t>(t.events.size());
    player::cap_pauses(t, a.pace_cap_ms);
    traces.push_back(std::move(t));
  }
  LAYA_TRY(player::check_unique_names(traces));
  if (!a.fast) {  // a paced replay lasts as long as the traces: say so when that is long
    double total_ms = 0;
    for (const Trace& t : traces) total_ms += t.events.back().t_ms;
    if (total_ms > 10 * 60e3)
      warn("replay", fmt::format("replaying at the recorded pace takes {:.0f} minutes (the traces' t_ms); --fast plays "
                                 "events back to back", total_ms / 60e3));
  }
  if (a.pace_cap_ms > 0 && (a.fast || a.gap_ms > 0))
    return Status(StatusCode::kInvalidArgument, "--pace-cap-ms plays at the recorded pace: not with --fast or --gap-ms");
  if (a.flags.model_path.empty()) return Status(StatusCode::kInvalidArgument, "no model: pass -m MODEL");
  return traces;
}

PlayOptions play_options(const ReplayArgs& a) {
  PlayOptions opt;
  opt.session = a.so;
  opt.session.heal = !a.no_heal;
  opt.session.fim = a.fim == "spm" ? FimOrder::kSpm : a.fim == "off" ? FimOrder::kOff : FimOrder::kPsm;
  opt.suggest.max_tokens = a.max_tokens;
  opt.fast = a.fast;
  opt.gap_ms = a.gap_ms;
  opt.verify = a.verify;
  opt.tie_tolerance = a.verify_tie >= 0 ? a.verify_tie : a.flags.backend == "cpu" ? 0.0 : 1e-5;
  opt.idle_extend = a.idle_extend;
  opt.swap_to = a.swap_to;
  return opt;
}

// The model goes into a slot (session/model_slot.h) whether or not it is
// swapped: one code path, and the slot validates it as it would a swap.
ModelSlotOptions slot_options(const ReplayArgs& a) {
  ModelSlotOptions mso;
  a.flags.apply(&mso.engine);
  mso.engine.n_ctx = a.max_ctx;  // capped by the slot at each model's trained context
  // --verify's fresh session sits beside the live one: room for two full
  // contexts unless --kv-budget says otherwise (a 1B model's one context of
  // 134 MB ran out on the first long document, on the H200).
  if (a.verify) mso.engine.kv_default_contexts = 2;
  // Swaps load models on another thread while the replay's bar is drawn: no
  // load bar then (two bars would write over each other).
  if (!a.swap_to.empty()) mso.engine.on_prepare_progress = nullptr;
  return mso;
}

// What the traces gave, trace by trace. A trace that fails while it runs
// stops the run (`failed`); the results of the traces before it are kept.
struct ReplayRun {
  LatencyStats all;
  json per = json::object();
  std::vector<ReportTrace> report;  // per trace, for --html
  std::string suggestions;          // --suggestions-out's lines
  Status failed;
};

ReplayRun play_traces(TracePlayer& rp, const std::vector<Trace>& traces, const ReplayArgs& a, SwapDriver* driver,
                      const ReplayOutputs& outs, int64_t total_events) {
  ReplayRun run;
  Progress bar("replay", static_cast<uint64_t>(total_events), progress_allowed(a.flags.quiet), "events");
  for (const Trace& t : traces) {
    LatencyStats s;
    bar.set_label("replay " + t.name);
    PlayHooks hooks;
    const int64_t done_before = run.all.events;
    hooks.after_event = [&](int64_t played) {
      bar.update(static_cast<uint64_t>(done_before + played));
      if (driver) driver->after_event();
    };
    hooks.on_mismatch = [&](const std::string& message) {
      bar.clear();
      fmt::print(stderr, "laya replay: {}\n", message);
    };
    if (!a.suggestions_path.empty())
      hooks.on_suggestion = [&](size_t event, const Suggestion& sg) {
        nlohmann::ordered_json line = {{"trace", t.name}, {"event", event}, {"text", sg.text}, {"tokens", sg.tokens}};
        run.suggestions += line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
      };
    run.failed = rp.play(t, &s, hooks);
    bar.clear();  // before any result line
    if (!run.failed.ok()) break;
    print_stats(t.name, s, a.verify);
    std::fflush(stdout);
    run.per[t.name] = stats_json(s, a.verify, a.samples);
    run.all.add(s);
    if (!a.html_path.empty()) {
      run.report.push_back(report_trace(s, t.name));
      if (auto it = outs.peer.find(t.name); it != outs.peer.end()) run.report.back().peer_suggest_ms = it->second;
    }
  }
  return run;
}

json result_json(const ReplayArgs& a, const ReplayRun& run, const json& swaps) {
  json out = stats_json(run.all, a.verify, a.samples);
  out["model"] = a.flags.model_path;
  out["max_tokens"] = a.max_tokens;
  out["paced"] = !a.fast;
  out["pace_cap_ms"] = a.pace_cap_ms > 0 ? json(a.pace_cap_ms) : json(nullptr);
  out["idle_extend_tokens"] = a.idle_extend;
  out["awake_ms"] = a.flags.awake_ms;
  out["token_healing"] = !a.no_heal;
  out["fim"] = a.fim;
  out["fim_suffix_tokens"] = a.so.fim_suffix_tokens;
  out["traces"] = run.per;
  if (!swaps.is_null()) {
    out["swap_to"] = a.swap_to;
    out["swap_every"] = a.swap_every;
    for (const auto& [k, v] : swaps.items()) out[k] = v;
  }
  if (!run.failed.ok()) out["incomplete"] = run.failed.message();
  return out;
}

// --json, --suggestions-out and --html, as far as the run went.
Status write_outputs(const ReplayArgs& a, ReplayRun& run, const json& swaps, const ReplayOutputs& outs, int argc,
                     char** argv) {
  if (!a.json_path.empty()) LAYA_TRY(write_file_atomic(a.json_path, dump_json(result_json(a, run, swaps)), outs.json_opt));
  if (!a.suggestions_path.empty()) LAYA_TRY(write_file_atomic(a.suggestions_path, run.suggestions, outs.suggestions_opt));
  if (a.html_path.empty() || run.report.empty()) return Status::Ok();
  ReportInput in;
  in.model = a.flags.model_path;
  in.paced = !a.fast;
  if (a.pace_cap_ms > 0) in.how = fmt::format("events at their recorded pace, pauses capped at {:g} ms", a.pace_cap_ms);
  in.machine = machine_description(a.flags.threads);
  in.command = command_line(argc, argv);
  in.traces = std::move(run.report);
  return write_file_atomic(a.html_path, report_html(in), outs.html_opt);
}

}  // namespace

int cmd_replay(int argc, char** argv) {
  CLI::App app{"Replay typing traces on a session: suggestion latency, reuse, free keystrokes", "laya replay"};
  app.footer("Example: laya replay --fast ../shared/fixtures/traces/*.jsonl --html report.html");
  ReplayArgs a;
  add_options(app, a);
  if (auto rc = parse_args(app, argc, argv, "replay")) return *rc;
  ReplayOutputs outs;
  if (Status st = check_args_and_outputs(a, &outs); !st.ok()) return report_error("replay", st);
  int64_t total_events = 0;
  auto tr = load_traces(a, &total_events);
  if (!tr.ok()) return report_error("replay", tr.status());
  const std::vector<Trace> traces = std::move(tr).value();
  const ModelSlotOptions mso = slot_options(a);
  const PlayOptions opt = play_options(a);
  std::vector<double> base_a, base_b;
  if (!a.swap_to.empty() && (a.fast || a.verify || a.gap_ms > 0)) {  // before the measured run, whose memory they must not share
    auto b1 = baseline(a.flags.model_path, mso, opt, traces);
    if (!b1.ok()) return report_error("replay", b1.status());
    auto b2 = baseline(a.swap_to, mso, opt, traces);
    if (!b2.ok()) return report_error("replay", b2.status());
    base_a = std::move(b1).value();
    base_b = std::move(b2).value();
  }
  auto sl = ModelSlot::create(a.flags.model_path, mso);
  if (!sl.ok()) return report_error("replay", sl.status());
  std::unique_ptr<ModelSlot> slot = std::move(sl).value();
  const int64_t n_ctx_train = slot->current()->model->hparams().n_ctx_train;
  if (app.count("--max-ctx") > 0 && n_ctx_train > 0 && a.max_ctx > n_ctx_train)
    warn("replay", fmt::format("--max-ctx {} is past the trained context of {} ({} tokens): using {}", a.max_ctx,
                               a.flags.model_path, n_ctx_train, n_ctx_train));
  warn("replay", slot->current()->engine->memory_lock_note());
  std::unique_ptr<SwapDriver> driver;
  if (!a.swap_to.empty())
    driver = std::make_unique<SwapDriver>(*slot, a.flags.model_path, a.swap_to, a.swap_bad, a.swap_every, total_events);
  TracePlayer rp(*slot, opt);
  ReplayRun run = play_traces(rp, traces, a, driver.get(), outs, total_events);
  if (traces.size() > 1) print_stats("overall", run.all, a.verify);
  json swaps;
  bool swaps_good = true;
  if (driver) {
    driver->finish();
    swaps = player::swap_json(*driver, run.all.times, base_a, base_b, player::rss_mb());
    swaps_good = print_swaps(swaps, !a.swap_bad.empty());
  }
  const int rc = !run.failed.ok()                              ? report_error("replay", run.failed)
                 : (a.verify && run.all.mismatches > 0) || !swaps_good ? 1
                                                                      : 0;
  if (Status st = write_outputs(a, run, swaps, outs, argc, argv); !st.ok()) return report_error("replay", st);
  return rc;
}

}  // namespace laya::cli
