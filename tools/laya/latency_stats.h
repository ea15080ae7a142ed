// Percentiles of per-event latencies and work, and their JSON, shared by
// `laya replay` and `laya bench-typing` so that both report the same keys
// computed the same way.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace laya::cli {

// Nearest rank: the smallest value with at least p of the values <= it.
template <class T>
T percentile(std::vector<T> v, double p) {
  if (v.empty()) return T{};
  std::sort(v.begin(), v.end());
  const double rank = std::ceil(p * static_cast<double>(v.size()));
  const size_t i = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return v[std::min(i, v.size() - 1)];
}

// suggest_ms / first_token_ms: {p50, p90, p99, p999, max}.
inline nlohmann::json ms_json(const std::vector<double>& v) {
  return {{"p50", percentile(v, 0.5)}, {"p90", percentile(v, 0.9)}, {"p99", percentile(v, 0.99)},
          {"p999", percentile(v, 0.999)}, {"max", percentile(v, 1.0)}};
}

// tokens_computed_per_event: {p50, p99, max}.
inline nlohmann::json count_json(const std::vector<int64_t>& v) {
  return {{"p50", percentile(v, 0.5)}, {"p99", percentile(v, 0.99)}, {"max", percentile(v, 1.0)}};
}

// "p50 0.123 p90 ... max ..." for the text output.
inline std::string ms_line(const std::vector<double>& v) {
  return fmt::format("p50 {:.3f} p90 {:.3f} p99 {:.3f} p99.9 {:.3f} max {:.3f}", percentile(v, 0.5), percentile(v, 0.9),
                     percentile(v, 0.99), percentile(v, 0.999), percentile(v, 1.0));
}

}  // namespace laya::cli
