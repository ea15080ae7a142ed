#include "player/trace_player.h"

#include <chrono>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/sha256.h"
#include "session/model_slot.h"
#include "session/scheduler.h"
#include "session/verify.h"

namespace laya::player {

namespace {

using Clock = std::chrono::steady_clock;

Clock::duration ms_duration(double ms) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms));
}

Status check_final(const Trace& t, const Session& live) {
  const std::string got = sha256_hex(live.text());
  if (got != t.final_sha256)
    return Status(StatusCode::kCorrupt, fmt::format("{}: the replayed document's sha256 is {}, the header's final_sha256 {}",
                                                    t.path, got, t.final_sha256));
  return Status::Ok();
}

Status at(const std::string& where, const Status& st) { return Status(st.code(), fmt::format("{}: {}", where, st.message())); }

// What the scheduler's callbacks record for one event (worker thread).
struct EventRecord {
  Clock::time_point handed, first_piece, done;
  bool got_piece = false, finished = false;
  SuggestOutcome outcome = SuggestOutcome::kDropped;
  Suggestion sug;  // a completed suggestion (its text for a following accept, its timings)
  Status status;
};

// Callbacks that fill *r under *mu.
SuggestCallbacks record_into(EventRecord* r, std::mutex* mu) {
  SuggestCallbacks cb;
  cb.on_piece = [r, mu](uint64_t, std::string_view) {
    std::lock_guard<std::mutex> lock(*mu);
    if (!r->got_piece) r->first_piece = Clock::now(), r->got_piece = true;
  };
  cb.on_done = [r, mu](const SuggestDone& d) {
    std::lock_guard<std::mutex> lock(*mu);
    r->done = Clock::now();
    r->finished = true;
    r->outcome = d.outcome;
    r->status = d.status;
    if (d.suggestion) r->sug = *d.suggestion;
  };
  return cb;
}

}  // namespace

size_t common_prefix_cp(std::string_view a, std::string_view b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  while (i > 0 && i < a.size() && (static_cast<unsigned char>(a[i]) & 0xC0) == 0x80) --i;  // a cut character
  while (i > 0 && i < b.size() && (static_cast<unsigned char>(b[i]) & 0xC0) == 0x80) --i;
  return cp_count(a.substr(0, i));
}

TracePlayer::TracePlayer(ModelSlot& slot, PlayOptions opt) : slot_(slot), opt_(std::move(opt)) {
  if (opt_.gap_ms > 0) opt_.fast = true;  // a fixed pause replaces the recorded one
}

Status TracePlayer::play(const Trace& t, LatencyStats* s, const PlayHooks& hooks) {
  return opt_.fast || opt_.verify ? play_sync(t, s, hooks) : play_async(t, s, hooks);
}

Status TracePlayer::play_sync(const Trace& t, LatencyStats* s, const PlayHooks& hooks) {
  Session live(slot_, opt_.session);
  SuggestClock clock;
  const auto start = Clock::now();
  for (size_t i = 0; i < t.events.size(); ++i) {
    const Event& e = t.events[i];
    const std::string where = fmt::format("{}:{}", t.path, e.line);
    if (!opt_.fast) std::this_thread::sleep_until(start + ms_duration(e.t_ms));
    if (opt_.gap_ms > 0 && i > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(opt_.gap_ms));
    clock.start();
    if (Status st = apply(live, e, s, nullptr, false); !st.ok()) return at(where, st);
    auto sug = live.suggest(opt_.suggest, clock.on_piece());
    if (!sug.ok()) return at(where, sug.status());
    ++s->events;
    clock.stop(*sug, s);
    s->times.push_back(SwapEventTime{clock.started(), clock.stopped(), s->suggest_ms.back(),
                                     live.bundle()->path == opt_.swap_to, sug->rebound, sug->timings.rebind_ms});
    if (hooks.on_suggestion) hooks.on_suggestion(i, *sug);
    if (hooks.after_event) hooks.after_event(s->events);  // before --verify's work: a swap overlaps what follows
    if (opt_.verify) {
      // The idle-time work a paced replay does between events, so that the
      // suggestions made from it are verified too (not timed: it is idle).
      if (opt_.idle_extend > 0 && !sug->cancelled) live.extend_chain(opt_.idle_extend);
      LAYA_ASSIGN_OR_RETURN(Verdict v, same_as_fresh(live, *sug, where, hooks));
      if (v == Verdict::kMismatch) ++s->mismatches;
      if (v == Verdict::kNearTie) ++s->near_ties;
    }
  }
  return check_final(t, live);
}

// At the recorded pace, asynchronously: see the top of trace_player.h.
Status TracePlayer::play_async(const Trace& t, LatencyStats* s, const PlayHooks& hooks) {
  Session live(slot_, opt_.session);
  SchedulerOptions sched_opt;
  sched_opt.idle_extend_tokens = opt_.idle_extend;
  SuggestScheduler sched(sched_opt);
  std::vector<EventRecord> rec(t.events.size());
  std::mutex mu;  // guards rec between the worker's callbacks and this thread
  size_t newest = 0;
  const auto start = Clock::now();
  for (size_t i = 0; i < t.events.size(); ++i) {
    const Event& e = t.events[i];
    std::this_thread::sleep_until(start + ms_duration(e.t_ms));
    const auto t0 = Clock::now();
    // An accept can take only a suggestion that had completed: the newest
    // one, if it is done (the editor showed it).
    std::optional<std::string> shown;
    {
      std::lock_guard<std::mutex> lock(mu);
      rec[i].handed = t0;
      if (e.op == Op::kAccept && i > 0 && rec[newest].finished && rec[newest].outcome == SuggestOutcome::kDone)
        shown = rec[newest].sug.text;
    }
    if (Status st = apply(live, e, s, shown ? &*shown : nullptr, true); !st.ok())
      return at(fmt::format("{}:{}", t.path, e.line), st);
    sched.submit(live, opt_.suggest, record_into(&rec[i], &mu));
    newest = i;
    if (hooks.after_event) hooks.after_event(static_cast<int64_t>(i) + 1);
  }
  sched.wait_idle();
  sched.forget(live);
  for (size_t i = 0; i < rec.size(); ++i) {
    const EventRecord& r = rec[i];
    ++s->events;
    if (r.outcome == SuggestOutcome::kError) return at(fmt::format("{}:{}", t.path, t.events[i].line), r.status);
    if (r.outcome != SuggestOutcome::kDone) {
      ++s->superseded;
      continue;
    }
    s->record(std::chrono::duration<double, std::milli>(r.done - r.handed).count(),
              std::chrono::duration<double, std::milli>((r.got_piece ? r.first_piece : r.done) - r.handed).count(),
              r.sug);
    if (hooks.on_suggestion) hooks.on_suggestion(i, r.sug);
  }
  return check_final(t, live);
}

// An accept takes the part of the engine's current suggestion that the
// trace's text starts with, then inserts the rest of the text.
Status TracePlayer::apply(Session& s, const Event& e, LatencyStats* st, const std::string* shown, bool async) {
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

// From scratch on the model that computed `a` (the one `live` is bound to
// after its suggest: a session moves to a new model only at its next one).
Result<TracePlayer::Verdict> TracePlayer::same_as_fresh(const Session& live, const Suggestion& a,
                                                        const std::string& where, const PlayHooks& hooks) {
  std::vector<int32_t> prompt, b_tokens;
  std::string b_text;
  {
    Session fresh(live.engine(), live.tokenizer(), opt_.session);
    Status st = fresh.set_text(live.text());
    if (st.ok()) st = fresh.move(live.cursor());
    if (st.ok()) st = fresh.pin_window(live.window_start());
    if (!st.ok()) return Status(st.code(), fmt::format("{}: --verify: {}", where, st.message()));
    auto b = fresh.suggest(opt_.suggest);
    if (!b.ok()) return Status(b.status().code(), fmt::format("{}: --verify: {}", where, b.status().message()));
    if (b->tokens == a.tokens) return Verdict::kSame;
    prompt = fresh.prompt_tokens();
    b_tokens = b->tokens;
    b_text = b->text;
  }  // the fresh session's KV goes back to the pool before the tie check takes its own
  LAYA_ASSIGN_OR_RETURN(double gap, logit_gap_where_they_part(live.engine(), prompt, a.tokens, b_tokens));
  const bool tie = opt_.tie_tolerance > 0 && gap <= opt_.tie_tolerance;
  if (hooks.on_mismatch)
    hooks.on_mismatch(fmt::format("{}: {}: incremental \"{}\" != from scratch \"{}\" (logit gap {:.2e} of the largest)",
                                  where, tie ? "near tie" : "mismatch", a.text, b_text, gap));
  return tie ? Verdict::kNearTie : Verdict::kMismatch;
}

}  // namespace laya::player
