// Typing traces (../shared/fixtures/traces/README.md): loading with strict
// checks (every error names the file and the line, and the field where one is
// wrong), shared by `laya replay` and `laya bench-typing`.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace laya::cli {

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
  std::vector<Event> events;
};

// Code points of valid UTF-8 `s`.
size_t cp_count(std::string_view s);
// Byte length of the first n_cp code points of valid UTF-8 `s`.
size_t cp_bytes(std::string_view s, size_t n_cp);

// Reads and checks a whole trace: the header line (with "final_sha256"; its
// "trace" names the trace, else the file name without .jsonl), then events
// whose fields have the right types, whose offsets lie in the document as it
// is at that point, and whose t_ms never decreases.
Result<Trace> load_trace(const std::string& path);

// The trace's final document (UTF-8): every event applied in order, an
// `accept` inserting its text. Its sha256 must equal the header's
// final_sha256 (else kCorrupt naming the file).
Result<std::string> final_document(const Trace& t);

}  // namespace laya::cli
