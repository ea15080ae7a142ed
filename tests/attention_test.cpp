// The SIMD decode-attention kernel against the scalar one on random data.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/cpu/attention.h"

namespace laya::cpu {
namespace {

TEST(KernelAttention, SimdMatchesScalar) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int group : {1, 4, 7}) {
    for (int64_t hd : {16, 64, 128}) {
      AttendGroupFn f = attend_group_for(group, hd);
      if (f == attend_group_scalar) continue;
      for (int64_t n_kv : {1, 15, 17, 300}) {
        const int64_t stride = hd * 3 + 16;
        std::vector<float> q(static_cast<size_t>(group * hd)), k(static_cast<size_t>(n_kv * stride)),
            v(static_cast<size_t>(n_kv * stride));
        for (auto& x : q) x = nd(rng);
        for (auto& x : k) x = nd(rng) * 2.f;
        for (auto& x : v) x = nd(rng);
        std::vector<float> s1(static_cast<size_t>(group * n_kv)), s2(s1.size());
        std::vector<float> o1(q.size()), o2(q.size());
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        attend_group_scalar(q.data(), group, hd, k.data(), v.data(), stride, n_kv, scale, s1.data(), o1.data());
        f(q.data(), group, hd, k.data(), v.data(), stride, n_kv, scale, s2.data(), o2.data());
        for (size_t i = 0; i < o1.size(); ++i)
          ASSERT_NEAR(o2[i], o1[i], 2e-5f * (1.f + std::fabs(o1[i]))) << "group " << group << " hd " << hd << " n_kv " << n_kv;
      }
    }
  }
}

}  // namespace
}  // namespace laya::cpu
