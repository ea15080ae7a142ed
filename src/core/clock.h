// Milliseconds since a steady_clock time point: what every timing field of a
// suggestion, a prefill or a bench is measured in.
#pragma once

#include <chrono>

namespace laya {

inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace laya
