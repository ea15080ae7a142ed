// Typing traces (../shared/fixtures/traces/README.md): loading with strict
// checks (every error names the file and the line, and the field where one is
// wrong), shared by the trace player (trace_player.h), the typing simulation
// (typing_sim.h) and the session-switch harness (session_switches.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace laya::player {

enum class Op { kInsert, kDelete, kMove, kAccept };

struct Event {
  Op op = Op::kInsert;
  size_t pos = 0, n = 0;  // code points
  std::string text;
  double t_ms = 0;
  size_t line = 0;
};

struct Trace {
  std::string path, name, final_sha256;
  int64_t header_chars = -1;  // the header's "chars", -1 when absent
  std::vector<Event> events;
};

// Plays a trace faster while keeping its rhythm: every pause between two
// events (and before the first) longer than cap_ms becomes cap_ms; shorter
// ones stay. A pause capped at 300 ms still lets a core fall asleep (it does
// within ~0.1 ms), so the result is the keystroke after a pause, not back to
// back. cap_ms <= 0: unchanged.
void cap_pauses(Trace& t, double cap_ms);

// Code points of valid UTF-8 `s`.
size_t cp_count(std::string_view s);
// Byte length of the first n_cp code points of valid UTF-8 `s`.
size_t cp_bytes(std::string_view s, size_t n_cp);

// The latest t_ms a trace may have: one week. Replay sleeps until each event's
// time, so a t_ms of 1e15 would be a hang, not a trace.
inline constexpr double kMaxTraceMs = 7 * 24 * 3600e3;
// The largest trace file read (real ones are < 1 MB; this keeps a wrong path
// such as a disk image from being read into memory).
inline constexpr size_t kMaxTraceBytes = size_t{256} << 20;

// Checks a whole trace, as a whole, before any work; `path` names it in every
// error, with the line ("t.jsonl:3: field \"n\" is string, expected an integer"):
//   - the first non-empty line is the header: an object with "final_sha256"
//     (64 hex digits) and optionally "trace" (a non-empty string naming the
//     trace; else the file name without .jsonl), "events" and "chars"
//     (integers, checked against the events and the final document);
//   - every other line is an event: an object with a known "op", "t_ms" a
//     finite number in [0, kMaxTraceMs] that never decreases, "pos" an
//     integer inside the document as it is at that point, "text" (insert,
//     accept) a non-empty string of valid UTF-8, "n" (delete) an integer in
//     [1, what is left after pos];
//   - at least one event.
// The sha256 check needs the rebuilt text: final_document does it.
Result<Trace> parse_trace(std::string_view content, const std::string& path);

// read_file (a regular file of at most kMaxTraceBytes) + parse_trace.
Result<Trace> load_trace(const std::string& path);

// Results are keyed by trace name: two traces of one name (the same file
// twice, or two headers with one "trace") would overwrite each other's.
Status check_unique_names(const std::vector<Trace>& traces);

// The trace's final document (UTF-8): every event applied in order, an
// `accept` inserting its text. Its sha256 must equal the header's
// final_sha256, and its length the header's "chars" where given (else
// kCorrupt naming the file).
Result<std::string> final_document(const Trace& t);

}  // namespace laya::player
