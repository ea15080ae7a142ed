// Sweep points the float kernel tests share (header-only: tools/ci/neon_qemu.sh
// builds the kernel tests with nothing else of the test library).
#pragma once

#include <cmath>
#include <vector>

namespace laya::test {

// ±m·2^e for e in [-149, 127] and m in {1, 1.37, 1.99}, the finite ones:
// denormals, tiny and huge values of every binade.
inline void append_binades(std::vector<float>* v) {
  for (int e = -149; e <= 127; ++e) {
    for (float m : {1.0f, 1.37f, 1.99f}) {
      const float a = std::ldexp(m, e);
      if (std::isfinite(a)) {
        v->push_back(a);
        v->push_back(-a);
      }
    }
  }
}

}  // namespace laya::test
