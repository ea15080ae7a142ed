// Logits of fixture prompts against reference .npy files, shared by the
// reference-model tests (model_logits_test.cpp) and the families' test.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "test_util.h"

namespace laya::test {

struct LogitsError {
  double rel_l2 = 1e9, max_abs = 1e9;  // 1e9: not measured (the failure is reported)
};

// Every prompt through a fresh sequence of `eng` (all positions: in one
// prefill, or token by token through the KV cache), compared with the file
// ref_path(i): relative L2 over all the logits, and the largest |difference|.
inline LogitsError logits_error(Engine& eng, const std::vector<std::vector<int32_t>>& prompts, bool incremental,
                                const std::function<std::string(size_t)>& ref_path) {
  double num = 0, den = 0, mx = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& p = prompts[i];
    const int64_t n = static_cast<int64_t>(p.size()), nv = eng.n_vocab();
    std::vector<float> got(static_cast<size_t>(n * nv));
    auto seq = eng.new_sequence();
    if (incremental) {
      for (int64_t t = 0; t < n; ++t) {
        EXPECT_TRUE(eng.decode(*seq, p[static_cast<size_t>(t)]).ok());
        std::copy(seq->logits(), seq->logits() + nv, got.begin() + t * nv);
      }
    } else {
      const Status st = eng.prefill(*seq, p, 0, got.data());
      EXPECT_TRUE(st.ok()) << st.to_string();
    }
    NpyArray ref;
    std::string err;
    const std::string rp = ref_path(i);
    EXPECT_TRUE(read_npy_f32(rp, &ref, &err)) << err;
    EXPECT_EQ(ref.data.size(), got.size()) << rp;
    if (ref.data.size() != got.size()) return {};
    for (size_t k = 0; k < got.size(); ++k) {
      const double d = static_cast<double>(got[k]) - ref.data[k];
      num += d * d;
      den += static_cast<double>(ref.data[k]) * ref.data[k];
      mx = std::max(mx, std::fabs(d));
    }
  }
  return {std::sqrt(num / den), mx};
}

}  // namespace laya::test
