// The SIMD decode-attention kernel against the scalar one on random data.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/cpu/attention.h"
#include "core/fp16.h"

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

// The fp16-cache kernels: scalar against a float32 reference run on the
// widened values (so the two must agree to rounding), SIMD against scalar.
TEST(KernelAttention, F16SimdMatchesScalarAndF32) {
  std::mt19937 rng(12);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int group : {1, 4, 7}) {
    for (int64_t hd : {16, 64, 128}) {
      AttendGroupF16Fn f = attend_group_f16_for(group, hd);
      for (int64_t n_kv : {1, 15, 17, 300}) {
        const int64_t stride = hd;
        std::vector<float> q(static_cast<size_t>(group * hd)), kf(static_cast<size_t>(n_kv * stride)), vf(kf.size());
        std::vector<uint16_t> k(kf.size()), v(kf.size());
        for (auto& x : q) x = nd(rng);
        for (size_t i = 0; i < k.size(); ++i) {
          k[i] = f32_to_fp16(nd(rng) * 2.f);
          v[i] = f32_to_fp16(nd(rng));
          kf[i] = fp16_to_f32(k[i]);
          vf[i] = fp16_to_f32(v[i]);
        }
        std::vector<float> s0(static_cast<size_t>(group * n_kv)), s1(s0.size()), s2(s0.size());
        std::vector<float> o0(q.size()), o1(q.size()), o2(q.size());
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        attend_group_scalar(q.data(), group, hd, kf.data(), vf.data(), stride, n_kv, scale, s0.data(), o0.data());
        attend_group_f16_scalar(q.data(), group, hd, k.data(), v.data(), stride, n_kv, scale, s1.data(), o1.data());
        f(q.data(), group, hd, k.data(), v.data(), stride, n_kv, scale, s2.data(), o2.data());
        for (size_t i = 0; i < o1.size(); ++i) {
          ASSERT_EQ(o1[i], o0[i]) << "scalar fp16 vs widened f32, group " << group << " hd " << hd << " n_kv " << n_kv;
          ASSERT_NEAR(o2[i], o1[i], 2e-5f * (1.f + std::fabs(o1[i]))) << "group " << group << " hd " << hd << " n_kv " << n_kv;
        }
      }
    }
  }
}

}  // namespace
}  // namespace laya::cpu
