// libFuzzer target: arbitrary bytes as a typing trace (tools/laya/player/trace.h).
// parse_trace must return a Status or a trace whose every event fits the
// document as it is at that point; final_document must then rebuild it (or
// refuse the sha256) without reading out of bounds. No crash, no sanitizer
// report, no hang.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "player/trace.h"

namespace {
volatile uint64_t g_sink;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  auto r = laya::player::parse_trace(in, "fuzz.jsonl");
  if (!r.ok()) {
    g_sink = g_sink + r.status().message().size();
    return 0;
  }
  const laya::player::Trace& t = r.value();
  if (t.events.empty() || t.final_sha256.size() != 64) __builtin_trap();
  // The invariants parse_trace promises, checked independently.
  size_t doc = 0;
  double prev = 0;
  for (const laya::player::Event& e : t.events) {
    if (e.t_ms < prev || e.pos > doc) __builtin_trap();
    prev = e.t_ms;
    switch (e.op) {
      case laya::player::Op::kInsert:
      case laya::player::Op::kAccept: doc += laya::player::cp_count(e.text); break;
      case laya::player::Op::kDelete:
        if (e.n == 0 || e.n > doc - e.pos) __builtin_trap();
        doc -= e.n;
        break;
      case laya::player::Op::kMove: break;
    }
  }
  auto d = laya::player::final_document(t);
  if (d.ok()) {
    if (laya::player::cp_count(d.value()) != doc) __builtin_trap();
    g_sink = g_sink + d->size();
  } else {
    g_sink = g_sink + d.status().message().size();
  }
  return 0;
}
