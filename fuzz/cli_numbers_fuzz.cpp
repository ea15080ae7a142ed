// libFuzzer target: arbitrary bytes as a command-line number or id list
// (tools/laya/cli_parse.h). Every call must return a Status or a value that
// honours its contract: in range, finite, and (for integers) printed back in
// decimal it parses to itself. No crash, no sanitizer report, no hang.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cli_parse.h"

namespace {
volatile uint64_t g_sink;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  // Bounds the callers use: threads, counts, ids, seeds, signed ranges.
  static const int64_t kBounds[][2] = {{0, 8}, {0, 1 << 20}, {-1, INT32_MAX}, {0, INT64_MAX}, {INT64_MIN, INT64_MAX}};
  for (const auto& b : kBounds) {
    auto r = laya::cli::parse_int("-x", in, b[0], b[1]);
    if (r.ok()) {
      if (r.value() < b[0] || r.value() > b[1]) __builtin_trap();
      auto again = laya::cli::parse_int("-x", std::to_string(r.value()), b[0], b[1]);
      if (!again.ok() || again.value() != r.value()) __builtin_trap();
    } else {
      g_sink = g_sink + r.status().message().size();
    }
  }
  static const double kReal[][2] = {{0, 1}, {0, 1e4}, {-1e308, 1e308}};
  for (const auto& b : kReal) {
    auto r = laya::cli::parse_real("--x", in, b[0], b[1]);
    if (r.ok() && (!std::isfinite(r.value()) || r.value() < b[0] || r.value() > b[1])) __builtin_trap();
    if (!r.ok()) g_sink = g_sink + r.status().message().size();
  }
  for (int64_t hi : {int64_t{511}, int64_t{INT32_MAX}}) {
    auto r = laya::cli::parse_id_list("--ids", in, 0, hi);
    if (r.ok()) {
      if (r->empty()) __builtin_trap();
      for (int32_t id : r.value())
        if (id < 0 || id > hi) __builtin_trap();
      g_sink = g_sink + r->size();
    } else {
      // Cut, whatever the input: a 100 KB value must not become a 100 KB
      // message (each shown value is at most 40 characters, 4 bytes each escaped).
      if (r.status().message().size() > 1024) __builtin_trap();
    }
  }
  return 0;
}
