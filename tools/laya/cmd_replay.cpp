// laya replay [-m MODEL] TRACE.jsonl... [--fast] [--verify] [--json out.json] [--max-tokens 8] [-t N]
//             [--pace-cap-ms N] [--no-heal] [--fim psm|spm|off] [--fim-suffix-tokens 32]
// Plays typing traces (../shared/fixtures/traces/README.md) on one long-lived
// Session per trace, as an editor would: after every event (insert, delete,
// move, accept) it asks for a suggestion and records its latency and work.
//
// Definitions (per event):
//   suggest_ms      from the moment the event is handed to the session (the
//                   edit / move / accept call included) to the complete
//                   suggestion (suggest() returned).
//   first_token_ms  from the same moment to the first on_piece call, i.e. the
//                   first generated token's text, sampled from the prefill's
//                   logits before any decode step. When no piece comes (the
//                   suggestion is empty, or its first token is an incomplete
//                   UTF-8 character and nothing completes it), it is the
//                   moment suggest() returned: the editor learns then that
//                   there is nothing (more) to show.
//   tokens_computed prompt tokens fed to the model by that suggest (the
//                   session's prefill; decode steps not counted).
//   free keystrokes events whose suggestion came with no forward pass before
//                   its first piece: the user typed (or accepted) what the
//                   previous suggestion predicted, and the session reused the
//                   rest of it (Suggestion::typed_through > 0, no prefill).
//   accepts         on an `accept` event, the code points of the trace's
//                   `text` that the engine's own current suggestion predicted
//                   (the common prefix of both) are taken with
//                   Session::accept (accept_predicted_chars), the rest of
//                   `text` is inserted, so the document always equals the
//                   trace's.
//   window moves    suggestions whose window moved (a larger prefill follows).
//
// The pace: by default each event is handed to the session at its t_ms after
// the start of the trace, and the suggestion is asked for asynchronously
// through a SuggestScheduler, as an editor drives it: an event that comes
// while the previous suggestion runs cancels it (the edit stops it within one
// decode step) and its suggestion is never shown ("superseded"); suggest_ms
// and first_token_ms are over the suggestions that completed. An accept takes
// the newest suggestion only when it had completed (the user saw it).
// --fast hands each event over as soon as the previous suggestion is complete
// (synchronously, nothing superseded); --verify also runs synchronously, at
// the recorded pace unless --fast, since a check needs the text each
// suggestion was made for.
//
// --verify: after every event a fresh Session with the same options, text,
// cursor and window computes the suggestion from scratch; different token ids
// are a mismatch.
// At the end the document's sha256 must equal the header's final_sha256.
//
// Hot model swap (issue 12): --swap-to OTHER --swap-every N swaps the model
// between -m and OTHER every N events on another thread, while the events
// play (replay_swap.h), and once, past the middle, to --swap-bad FILE, which
// must fail and leave the old model serving. Sessions follow the swaps
// (Session on a ModelSlot); --verify checks each suggestion against a fresh
// session on the model that computed it. The JSON adds swaps, swaps_failed,
// swap_added_ms and the rest defined in replay_swap.cpp; swap_added_ms needs
// the synchronous replay (--fast or --verify) and two more replays without
// swaps (one per model, --fast, not verified) to subtract from.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.h"
#include "core/io.h"
#include "core/json.h"
#include "core/sha256.h"
#include "engine/engine.h"
#include "latency_stats.h"
#include "report_html.h"
#include "outputs.h"
#include "progress.h"
#include "replay_swap.h"
#include "session/model_slot.h"
#include "session/scheduler.h"
#include "session/session.h"
#include "session/verify.h"
#include "tokenizer/tokenizer.h"
#include "trace.h"

namespace laya::cli {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Common prefix of two valid UTF-8 strings, in whole code points.
size_t common_prefix_cp(std::string_view a, std::string_view b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  while (i > 0 && i < a.size() && (static_cast<unsigned char>(a[i]) & 0xC0) == 0x80) --i;  // a cut character
  while (i > 0 && i < b.size() && (static_cast<unsigned char>(b[i]) & 0xC0) == 0x80) --i;
  return cp_count(a.substr(0, i));
}

// The latency samples (latency_stats.h, as bench-typing's) plus replay's own counts.
struct Stats : LatencySamples {
  int64_t events = 0, mismatches = 0, near_ties = 0, accepts = 0, accept_chars = 0, accept_predicted = 0, superseded = 0;
  std::vector<SwapEventTime> times;  // synchronous replay: every event, for the swap statistics
  void add(const Stats& o) {
    LatencySamples::add(o);
    events += o.events;
    mismatches += o.mismatches;
    near_ties += o.near_ties;
    accepts += o.accepts;
    accept_chars += o.accept_chars;
    accept_predicted += o.accept_predicted;
    superseded += o.superseded;
    times.insert(times.end(), o.times.begin(), o.times.end());
  }
};

json stats_json(const Stats& s, bool verify, bool samples) {
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

void print_stats(const std::string& name, const Stats& s, bool verify) {
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

class Replayer {
 public:
  // Sessions are made on `slot` and follow its swaps; `swaps` (may be null)
  // hears of every event; `swap_to`: the canonical path of --swap-to ("" none).
  Replayer(ModelSlot& slot, const SessionOptions& so, const SuggestOptions& opt, bool fast, bool verify,
           SwapDriver* swaps = nullptr, std::string swap_to = "", double gap_ms = 0)
      : slot_(slot), so_(so), opt_(opt), fast_(fast || gap_ms > 0), verify_(verify), gap_ms_(gap_ms), swaps_(swaps),
        swap_to_(std::move(swap_to)) {}

  // --verify-tie: 0 (exact: the CPU backend computes the same bits either
  // way), or the largest logit gap, relative to the largest |logit|, at which
  // a different token is a near tie rather than a mismatch.
  void set_tie_tolerance(double t) { tie_tol_ = t; }
  // --idle-extend: tokens the last suggestion is extended by while the
  // session waits for the next event (SchedulerOptions::idle_extend_tokens);
  // the synchronous replay does it between events when it verifies.
  void set_idle_extend(int n) { idle_extend_ = n; }

  // The bar to advance (nullptr: none) and the events played before this trace.
  void show_progress(Progress* p, int64_t done_before) {
    progress_ = p;
    done_before_ = done_before;
  }

  Status run(const Trace& t, Stats* s) {
    if (!fast_ && !verify_) return run_async(t, s);
    Session live(slot_, so_);
    SuggestClock clock;
    const auto start = Clock::now();
    for (const Event& e : t.events) {
      const std::string where = fmt::format("{}:{}", t.path, e.line);
      if (!fast_) std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                            std::chrono::duration<double, std::milli>(e.t_ms)));
      if (gap_ms_ > 0 && &e != &t.events.front())
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(gap_ms_));
      clock.start();
      if (Status st = apply(live, e, s); !st.ok()) return Status(st.code(), fmt::format("{}: {}", where, st.message()));
      auto sug = live.suggest(opt_, clock.on_piece());
      if (!sug.ok()) return Status(sug.status().code(), fmt::format("{}: {}", where, sug.status().message()));
      ++s->events;
      clock.stop(*sug, s);
      s->times.push_back(SwapEventTime{clock.started(), clock.stopped(), s->suggest_ms.back(),
                                       live.bundle()->path == swap_to_, sug->rebound, sug->timings.rebind_ms});
      if (progress_) progress_->update(static_cast<uint64_t>(done_before_ + s->events));
      if (swaps_) swaps_->after_event();  // before --verify's work: the swap overlaps what follows
      if (verify_) {
        // The idle-time work a paced replay does between events, so that the
        // suggestions made from it are verified too (not timed: it is idle).
        if (idle_extend_ > 0 && !sug->cancelled) live.extend_chain(idle_extend_);
        LAYA_ASSIGN_OR_RETURN(Verdict v, same_as_fresh(live, *sug, where));
        if (v == Verdict::kMismatch) ++s->mismatches;
        if (v == Verdict::kNearTie) ++s->near_ties;
      }
    }
    const std::string got = sha256_hex(live.text());
    if (got != t.final_sha256)
      return Status(StatusCode::kCorrupt, fmt::format("{}: the replayed document's sha256 is {}, the header's final_sha256 {}",
                                                      t.path, got, t.final_sha256));
    return Status::Ok();
  }

 private:
  // What the scheduler's callbacks record for one event (worker thread).
  struct EventRecord {
    Clock::time_point handed, first_piece, done;
    bool got_piece = false, finished = false;
    SuggestOutcome outcome = SuggestOutcome::kDropped;
    Suggestion sug;  // a completed suggestion (its text for a following accept, its timings)
    Status status;
  };

  // At the recorded pace, asynchronously: see the top of this file.
  Status run_async(const Trace& t, Stats* s) {
    Session live(slot_, so_);
    SchedulerOptions sched_opt;
    sched_opt.idle_extend_tokens = idle_extend_;
    SuggestScheduler sched(sched_opt);
    std::vector<EventRecord> rec(t.events.size());
    std::mutex mu;  // guards rec between the worker's callbacks and this thread
    size_t newest = 0;
    const auto start = Clock::now();
    for (size_t i = 0; i < t.events.size(); ++i) {
      const Event& e = t.events[i];
      std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double, std::milli>(e.t_ms)));
      const auto t0 = Clock::now();
      {
        std::lock_guard<std::mutex> lock(mu);
        rec[i].handed = t0;
      }
      // An accept can take only a suggestion that had completed: the newest
      // one, if it is done (the editor showed it).
      std::optional<std::string> shown;
      if (e.op == Op::kAccept && i > 0) {
        std::lock_guard<std::mutex> lock(mu);
        if (rec[newest].finished && rec[newest].outcome == SuggestOutcome::kDone) shown = rec[newest].sug.text;
      }
      const std::string where = fmt::format("{}:{}", t.path, e.line);
      if (Status st = apply(live, e, s, shown ? &*shown : nullptr, true); !st.ok())
        return Status(st.code(), fmt::format("{}: {}", where, st.message()));
      SuggestCallbacks cb;
      EventRecord* r = &rec[i];
      std::mutex* m = &mu;
      cb.on_piece = [r, m](uint64_t, std::string_view) {
        std::lock_guard<std::mutex> lock(*m);
        if (!r->got_piece) r->first_piece = Clock::now(), r->got_piece = true;
      };
      cb.on_done = [r, m](const SuggestDone& d) {
        std::lock_guard<std::mutex> lock(*m);
        r->done = Clock::now();
        r->finished = true;
        r->outcome = d.outcome;
        r->status = d.status;
        if (d.suggestion) r->sug = *d.suggestion;
      };
      sched.submit(live, opt_, std::move(cb));
      newest = i;
      if (swaps_) swaps_->after_event();
      if (progress_) progress_->update(static_cast<uint64_t>(done_before_) + i + 1);
    }
    sched.wait_idle();
    sched.forget(live);
    for (size_t i = 0; i < rec.size(); ++i) {
      const EventRecord& r = rec[i];
      ++s->events;
      if (r.outcome == SuggestOutcome::kError)
        return Status(r.status.code(), fmt::format("{}:{}: {}", t.path, t.events[i].line, r.status.message()));
      if (r.outcome != SuggestOutcome::kDone) {
        ++s->superseded;
        continue;
      }
      s->record(std::chrono::duration<double, std::milli>(r.done - r.handed).count(),
                std::chrono::duration<double, std::milli>((r.got_piece ? r.first_piece : r.done) - r.handed).count(),
                r.sug);
    }
    return check_final(t, live);
  }

  Status check_final(const Trace& t, const Session& live) {
    const std::string got = sha256_hex(live.text());
    if (got != t.final_sha256)
      return Status(StatusCode::kCorrupt, fmt::format("{}: the replayed document's sha256 is {}, the header's final_sha256 {}",
                                                      t.path, got, t.final_sha256));
    return Status::Ok();
  }

  // An accept takes the part of the engine's current suggestion that the
  // trace's text starts with, then inserts the rest of the text.
  // `shown` (asynchronous replay): the suggestion the user saw, or nullptr for
  // none; synchronously it is the session's current one.
  Status apply(Session& s, const Event& e, Stats* st, const std::string* shown = nullptr, bool async = false) {
    switch (e.op) {
      case Op::kInsert: return s.edit(e.pos, 0, e.text);
      case Op::kDelete: return s.edit(e.pos, e.n, "");
      case Op::kMove: return s.move(e.pos);
      case Op::kAccept: break;
    }
    if (s.cursor() != e.pos) LAYA_TRY(s.move(e.pos));  // not at the cursor (not in the format): nothing to take
    size_t k = 0;
    const std::string* sug = async ? shown : (s.current() ? &s.current()->text : nullptr);
    if (sug && s.cursor() == e.pos) k = common_prefix_cp(*sug, e.text);
    if (k > 0) LAYA_TRY(s.accept(k));
    ++st->accepts;
    st->accept_chars += static_cast<int64_t>(cp_count(e.text));
    st->accept_predicted += static_cast<int64_t>(k);
    const std::string_view rest = std::string_view(e.text).substr(cp_bytes(e.text, k));
    return rest.empty() ? Status::Ok() : s.edit(s.cursor(), 0, rest);
  }

  enum class Verdict { kSame, kNearTie, kMismatch };

  // From scratch on the model that computed `a` (the one `live` is bound to
  // after its suggest: a session moves to a new model only at its next one).
  Result<Verdict> same_as_fresh(const Session& live, const Suggestion& a, const std::string& where) {
    std::vector<int32_t> prompt, b_tokens;
    std::string b_text;
    {
      Session fresh(live.engine(), live.tokenizer(), so_);
      Status st = fresh.set_text(live.text());
      if (st.ok()) st = fresh.move(live.cursor());
      if (st.ok()) st = fresh.pin_window(live.window_start());
      if (!st.ok()) return Status(st.code(), fmt::format("{}: --verify: {}", where, st.message()));
      auto b = fresh.suggest(opt_);
      if (!b.ok()) return Status(b.status().code(), fmt::format("{}: --verify: {}", where, b.status().message()));
      if (b->tokens == a.tokens) return Verdict::kSame;
      prompt = fresh.prompt_tokens();
      b_tokens = b->tokens;
      b_text = b->text;
    }  // the fresh session's KV goes back to the pool before the tie check takes its own
    LAYA_ASSIGN_OR_RETURN(double gap, logit_gap_where_they_part(live.engine(), prompt, a.tokens, b_tokens));
    if (progress_) progress_->clear();
    const bool tie = tie_tol_ > 0 && gap <= tie_tol_;
    fmt::print(stderr, "laya replay: {}: {}: incremental \"{}\" != from scratch \"{}\" (logit gap {:.2e} of the largest)\n",
               where, tie ? "near tie" : "mismatch", a.text, b_text, gap);
    return tie ? Verdict::kNearTie : Verdict::kMismatch;
  }

  ModelSlot& slot_;
  SessionOptions so_;
  SuggestOptions opt_;
  bool fast_, verify_;
  double gap_ms_, tie_tol_ = 0;
  int idle_extend_ = 0;
  SwapDriver* swaps_;
  std::string swap_to_;
  Progress* progress_ = nullptr;
  int64_t done_before_ = 0;
};

}  // namespace

namespace {

// The suggest_ms of every event of `traces` replayed with no swap on the model
// at `path` (synchronous, not verified, with the measured run's --gap-ms: a
// pause between events costs the next one the threads' wake-up, so a
// baseline without it would credit the swap with that): what swap_added_ms subtracts.
Result<std::vector<double>> baseline(const std::string& path, const ModelSlotOptions& mso, const SessionOptions& so,
                                     const SuggestOptions& opt, const std::vector<Trace>& traces, double gap_ms) {
  LAYA_ASSIGN_OR_RETURN(std::unique_ptr<ModelSlot> slot, ModelSlot::create(path, mso));
  Replayer rp(*slot, so, opt, /*fast=*/true, /*verify=*/false, nullptr, "", gap_ms);
  Stats all;
  for (const Trace& t : traces) {
    Stats s;
    LAYA_TRY(rp.run(t, &s));
    all.add(s);
  }
  fmt::print("baseline without swaps on {}: {} events, suggest_ms {}\n", path, all.events, ms_line(all.suggest_ms));
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

}  // namespace

int cmd_replay(int argc, char** argv) {
  CLI::App app{"Replay typing traces on a session: suggestion latency, reuse, free keystrokes", "laya replay"};
  app.footer("Example: laya replay --fast ../shared/fixtures/traces/*.jsonl --html report.html");
  std::vector<std::string> paths;
  std::string json_path;
  bool fast = false, verify = false, samples = false;
  std::string html_path, peer_path;
  int max_tokens = 8;
  int64_t max_ctx = 2048;
  app.add_option("traces", paths, "trace files (.jsonl)")->required();
  app.add_flag("--fast", fast, "play events back to back instead of at the recorded pace");
  double gap_ms = 0;
  app.add_option("--gap-ms", gap_ms,
                 "play events one after another with this many ms between a suggestion and the next event "
                 "(a typist's pause: the threads fall asleep; bench/serve_load.py --once --gap-ms plays the same)")
      ->transform(real_in(0, 60000));
  double pace_cap_ms = 0;
  app.add_option("--pace-cap-ms", pace_cap_ms,
                 "at the recorded pace, but every pause longer than this many ms is cut to it (the cores still go "
                 "idle between keys; the whole public set plays in minutes instead of half an hour)")
      ->transform(real_in(1, 60000));
  app.add_flag("--verify", verify, "compare every suggestion with a fresh session's (from scratch)");
  double verify_tie = -1;
  app.add_option("--verify-tie", verify_tie,
                 "with --verify: a different token whose from-scratch logit is within this fraction of the largest "
                 "|logit| of the chosen one's is a near tie, not a mismatch (default: 0 on cpu, which computes the "
                 "same bits incrementally and from scratch; 1e-5 on cuda, whose prefill and decode kernels sum in "
                 "different orders)")
      ->transform(real_in(0, 1));
  app.add_option("--json", json_path, "write the results as JSON to this file");
  app.add_option("--html", html_path, "write the latency report (one self-contained HTML file) here");
  app.add_option("--peer", peer_path,
                 "with --html: llama-server's results (bench/llamacpp_typing_client.py --json) on the same axes");
  app.add_flag("--samples", samples, "with --json: also every event's suggest_ms, first_token_ms and tokens computed");
  app.add_option("--max-tokens", max_tokens, "tokens per suggestion")->transform(int_in(1, 64));
  int idle_extend = 0;
  app.add_option("--idle-extend", idle_extend,
                 "idle-time work: tokens each completed suggestion is extended by while the next event has not "
                 "come, so typing through it past its end is free (default 0: none; measured no gain at the recorded pace with the default model, docs/PERFORMANCE.md)")
      ->transform(int_in(0, 256));
  app.add_option("--max-ctx", max_ctx, "context cap in tokens (and the model's own)")->transform(int_in(64, 1 << 20));
  SessionOptions so;
  bool no_heal = false;
  std::string fim = "psm";
  app.add_flag("--no-heal", no_heal, "no token healing");
  app.add_option("--fim", fim, "fill-in-the-middle prompt order where the model has FIM tokens: psm, spm or off")
      ->check(CLI::IsMember({"psm", "spm", "off"}));
  app.add_option("--fim-suffix-tokens", so.fim_suffix_tokens, "bound of the suffix in tokens")->transform(int_in(1, 512));
  std::string swap_to, swap_bad;
  int64_t swap_every = 0;
  app.add_option("--swap-to", swap_to, "hot swap: switch between -m and this model while the traces play");
  app.add_option("--swap-every", swap_every, "hot swap: events between swaps")->transform(int_in(1, 1 << 30));
  app.add_option("--swap-bad", swap_bad, "hot swap: once, past the middle, swap to this file (it must fail validation)");
  EngineFlags flags;
  flags.add_to(app, false);
  if (auto rc = parse_args(app, argc, argv, "replay")) return *rc;
  if (swap_to.empty() != (swap_every == 0))
    return report_error("replay", Status(StatusCode::kInvalidArgument, "--swap-to and --swap-every go together"));
  if (!swap_bad.empty() && swap_to.empty())
    return report_error("replay", Status(StatusCode::kInvalidArgument, "--swap-bad needs --swap-to and --swap-every"));
  // --json is checked before any work: never a trace or a model, and an
  // existing file only when it is an earlier result of replay.
  std::vector<std::string> inputs = paths;
  inputs.push_back(flags.model_path);
  for (const std::string* p : {&swap_to, &swap_bad})
    if (!p->empty()) inputs.push_back(*p);
  const OutputOptions json_opt = json_output("--json", inputs, {"traces", "paced", "max_tokens"});
  if (!json_path.empty()) {
    if (Status st = check_output(json_path, json_opt); !st.ok()) return report_error("replay", st);
  }
  const OutputOptions html_opt = html_report_output("--html", inputs);
  std::map<std::string, std::vector<double>> peer;
  if (!html_path.empty()) {
    if (Status st = check_output(html_path, html_opt); !st.ok()) return report_error("replay", st);
    if (!peer_path.empty()) {
      auto p = load_peer_samples(peer_path);
      if (!p.ok()) return report_error("replay", p.status());
      peer = std::move(p).value();
    }
  } else if (!peer_path.empty()) {
    return report_error("replay", Status(StatusCode::kInvalidArgument, "--peer needs --html (it draws the peer's samples)"));
  }
  // Every trace is read and checked before the model is loaded: a bad file
  // fails at once, before any work. A trace that fails while it runs stops
  // the run; the results of the traces before it are still written
  // (marked "incomplete").
  std::vector<Trace> traces;
  int64_t total_events = 0;
  for (const std::string& p : paths) {
    auto t = load_trace(p);
    if (!t.ok()) return report_error("replay", t.status());
    // The rebuilt text against final_sha256 now, not after minutes of replay.
    if (auto d = final_document(t.value()); !d.ok()) return report_error("replay", d.status());
    total_events += static_cast<int64_t>(t->events.size());
    cap_pauses(t.value(), pace_cap_ms);
    traces.push_back(std::move(t).value());
  }
  if (Status st = check_unique_names(traces); !st.ok()) return report_error("replay", st);
  if (!fast) {  // a paced replay lasts as long as the traces: say so when that is long
    double total_ms = 0;
    for (const Trace& t : traces) total_ms += t.events.back().t_ms;
    if (total_ms > 10 * 60e3)
      warn("replay", fmt::format("replaying at the recorded pace takes {:.0f} minutes (the traces' t_ms); --fast plays "
                                 "events back to back", total_ms / 60e3));
  }
  if (pace_cap_ms > 0 && (fast || gap_ms > 0))
    return report_error("replay", Status(StatusCode::kInvalidArgument,
                                         "--pace-cap-ms plays at the recorded pace: not with --fast or --gap-ms"));
  if (flags.model_path.empty()) return report_error("replay", Status(StatusCode::kInvalidArgument, "no model: pass -m MODEL"));
  // The model goes into a slot (session/model_slot.h) whether or not it is
  // swapped: one code path, and the slot validates it as it would a swap.
  ModelSlotOptions mso;
  flags.apply(&mso.engine);
  mso.engine.n_ctx = max_ctx;  // capped by the slot at each model's trained context
  // --verify's fresh session sits beside the live one: room for two full
  // contexts unless --kv-budget says otherwise (a 1B model's one context of
  // 134 MB ran out on the first long document, on the H200).
  if (verify) mso.engine.kv_default_contexts = 2;
  SuggestOptions opt;
  opt.max_tokens = max_tokens;
  so.heal = !no_heal;
  so.fim = fim == "spm" ? FimOrder::kSpm : fim == "off" ? FimOrder::kOff : FimOrder::kPsm;
  const bool swapping = !swap_to.empty();
  // Swaps load models on another thread while the replay's bar is drawn: no
  // load bar then (two bars would write over each other).
  if (swapping) mso.engine.on_prepare_progress = nullptr;
  std::vector<double> base_a, base_b;
  if (swapping && (fast || verify || gap_ms > 0)) {  // before the measured run, whose memory they must not share
    auto a = baseline(flags.model_path, mso, so, opt, traces, gap_ms);
    if (!a.ok()) return report_error("replay", a.status());
    auto b = baseline(swap_to, mso, so, opt, traces, gap_ms);
    if (!b.ok()) return report_error("replay", b.status());
    base_a = std::move(a).value();
    base_b = std::move(b).value();
  }
  auto sl = ModelSlot::create(flags.model_path, mso);
  if (!sl.ok()) return report_error("replay", sl.status());
  std::unique_ptr<ModelSlot> slot = std::move(sl).value();
  const int64_t n_ctx_train = slot->current()->model->hparams().n_ctx_train;
  if (app.count("--max-ctx") > 0 && n_ctx_train > 0 && max_ctx > n_ctx_train)
    warn("replay", fmt::format("--max-ctx {} is past the trained context of {} ({} tokens): using {}", max_ctx,
                               flags.model_path, n_ctx_train, n_ctx_train));
  warn("replay", slot->current()->engine->memory_lock_note());
  std::unique_ptr<SwapDriver> driver;
  if (swapping)
    driver = std::make_unique<SwapDriver>(*slot, flags.model_path, swap_to, swap_bad, swap_every, total_events);
  Replayer rp(*slot, so, opt, fast, verify, driver.get(), swap_to, gap_ms);
  rp.set_idle_extend(idle_extend);
  rp.set_tie_tolerance(verify_tie >= 0 ? verify_tie : flags.backend == "cpu" ? 0.0 : 1e-5);
  Stats all;
  std::vector<ReportTrace> report;  // per trace, for --html
  json per = json::object();
  Status failed;
  Progress bar("replay", static_cast<uint64_t>(total_events), progress_allowed(flags.quiet), "events");
  for (const Trace& t : traces) {
    Stats s;
    bar.set_label("replay " + t.name);
    rp.show_progress(&bar, all.events);
    failed = rp.run(t, &s);
    bar.clear();  // before any result line
    if (!failed.ok()) break;
    print_stats(t.name, s, verify);
    std::fflush(stdout);
    per[t.name] = stats_json(s, verify, samples);
    all.add(s);
    if (!html_path.empty()) {
      report.push_back(s.report_trace(t.name));
      if (auto it = peer.find(t.name); it != peer.end()) report.back().peer_suggest_ms = it->second;
    }
  }
  if (traces.size() > 1) print_stats("overall", all, verify);
  json swaps;
  bool swaps_good = true;
  if (driver) {
    driver->finish();
    swaps = swap_json(*driver, all.times, base_a, base_b, rss_mb());
    swaps_good = print_swaps(swaps, !swap_bad.empty());
  }
  const int rc = !failed.ok()                      ? report_error("replay", failed)
                 : (verify && all.mismatches > 0) || !swaps_good ? 1
                                                                 : 0;
  if (!json_path.empty()) {
    json out = stats_json(all, verify, samples);
    out["model"] = flags.model_path;
    out["max_tokens"] = max_tokens;
    out["paced"] = !fast;
    out["pace_cap_ms"] = pace_cap_ms > 0 ? json(pace_cap_ms) : json(nullptr);
    out["idle_extend_tokens"] = idle_extend;
    out["awake_ms"] = flags.awake_ms;
    out["token_healing"] = so.heal;
    out["fim"] = fim;
    out["fim_suffix_tokens"] = so.fim_suffix_tokens;
    out["traces"] = per;
    if (driver) {
      out["swap_to"] = swap_to;
      out["swap_every"] = swap_every;
      for (const auto& [k, v] : swaps.items()) out[k] = v;
    }
    if (!failed.ok()) out["incomplete"] = failed.message();
    if (Status st = write_file_atomic(json_path, dump_json(out), json_opt); !st.ok())
      return report_error("replay", st);
  }
  if (!html_path.empty() && !report.empty()) {
    ReportInput in;
    in.model = flags.model_path;
    in.paced = !fast;
    if (pace_cap_ms > 0) in.how = fmt::format("events at their recorded pace, pauses capped at {:g} ms", pace_cap_ms);
    in.machine = machine_description(flags.threads);
    in.command = command_line(argc, argv);
    in.traces = std::move(report);
    if (Status st = write_file_atomic(html_path, report_html(in), html_opt); !st.ok()) return report_error("replay", st);
  }
  return rc;
}

}  // namespace laya::cli
