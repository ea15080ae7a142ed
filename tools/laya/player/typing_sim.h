// A simulated typist writing a document left to right on one Session (the
// one an editor would use: its window, token healing and FIM options), so
// that what is measured is what a user of the session gets: `laya
// bench-typing`'s keystroke savings. Before each keystroke the session makes
// a greedy suggestion; L = the longest common prefix of the suggestion and
// the rest of the document, cut back to the last word boundary
// (typing_accept.h). If L >= 2 the typist presses Tab (1 keystroke:
// Session::accept(L)), otherwise types the next character (1 keystroke:
// Session::edit at the cursor).
//
// The session holds only what has been typed so far, with the cursor at its
// end: holding the untyped rest after the cursor would put the answer into
// the FIM suffix. Keystrokes come back to back (no pacing); the first
// suggestion, on the empty document, has no keystroke before it. Latency is
// measured as TracePlayer measures it (SuggestClock).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "player/latency_stats.h"
#include "session/session.h"

namespace laya::player {

// What the caller hears while the document is typed; each may be empty.
struct TypingHooks {
  // Before each keystroke: the code points typed so far.
  std::function<void(int64_t typed)> before_keystroke;
  // A Tab: at code point `pos`, `n` code points of the document (`text`) accepted.
  std::function<void(int64_t pos, int64_t n, std::string_view text)> on_accept;
};

// Types `doc` (UTF-8) into a fresh session; adds chars, keystrokes, shown,
// accepted, accepted_chars, events (suggestions made), seconds and every
// suggestion's latency to *r.
Status type_document(Engine& eng, const tok::Tokenizer& tk, const SessionOptions& so, const SuggestOptions& opt,
                     const std::string& doc, LatencyStats* r, const TypingHooks& hooks = {});

}  // namespace laya::player
