// Plays a typing trace (trace.h) on one long-lived Session, as an editor
// would: after every event (insert, delete, move, accept) it asks for a
// suggestion and records its latency and work (latency_stats.h). `laya
// replay` is this player behind command-line options; the definitions of
// what it measures:
//
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
// `fast` hands each event over as soon as the previous suggestion is complete
// (synchronously, nothing superseded), `gap_ms` the same after a fixed pause;
// `verify` also runs synchronously, at the recorded pace unless fast, since a
// check needs the text each suggestion was made for.
//
// verify: after every event a fresh Session with the same options, text,
// cursor and window computes the suggestion from scratch; different token ids
// are a mismatch (or, within tie_tolerance, a near tie).
// At the end the document's sha256 must equal the header's final_sha256.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"
#include "player/latency_stats.h"
#include "player/trace.h"
#include "session/session.h"

namespace laya {
class ModelSlot;
}

namespace laya::player {

struct PlayOptions {
  SessionOptions session;
  SuggestOptions suggest;
  bool fast = false;   // events back to back (synchronously) instead of at the recorded pace
  double gap_ms = 0;   // > 0: synchronously, with this pause between a suggestion and the next event
  bool verify = false;
  // 0 (exact: the CPU backend computes the same bits either way), or the
  // largest logit gap, relative to the largest |logit|, at which a different
  // token is a near tie rather than a mismatch.
  double tie_tolerance = 0;
  // Tokens the last suggestion is extended by while the session waits for
  // the next event (SchedulerOptions::idle_extend_tokens); the synchronous
  // player does it between events when it verifies.
  int idle_extend = 0;
  // The model path whose suggestions LatencyStats::times marks on_b ("" none).
  std::string swap_to;
};

// What the caller hears while a trace plays; every one may be empty.
struct PlayHooks {
  // After each event is handed over, on the playing thread: the events of
  // this trace handed over so far.
  std::function<void(int64_t played)> after_event;
  // A --verify difference: "t.jsonl:12: mismatch: incremental ... != from scratch ...".
  std::function<void(const std::string& message)> on_mismatch;
  // Every completed suggestion, with the index of its event in the trace.
  std::function<void(size_t event, const Suggestion& suggestion)> on_suggestion;
};

class TracePlayer {
 public:
  // Sessions are made on `slot` and follow its swaps.
  TracePlayer(ModelSlot& slot, PlayOptions opt);

  // Plays `t` on a new session, adding what it measured to *s.
  Status play(const Trace& t, LatencyStats* s, const PlayHooks& hooks = {});

 private:
  Status play_sync(const Trace& t, LatencyStats* s, const PlayHooks& hooks);
  Status play_async(const Trace& t, LatencyStats* s, const PlayHooks& hooks);
  // The event applied to the session. `shown` (asynchronous play): the
  // suggestion the user saw, or nullptr for none; synchronously it is the
  // session's current one.
  Status apply(Session& s, const Event& e, LatencyStats* st, const std::string* shown, bool async);
  enum class Verdict { kSame, kNearTie, kMismatch };
  Result<Verdict> same_as_fresh(const Session& live, const Suggestion& a, const std::string& where,
                                const PlayHooks& hooks);

  ModelSlot& slot_;
  PlayOptions opt_;
};

// Common prefix of two valid UTF-8 strings, in whole code points.
size_t common_prefix_cp(std::string_view a, std::string_view b);

}  // namespace laya::player
