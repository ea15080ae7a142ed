// Logit soft-capping, cap · tanh(x / cap), on every kernel table: the SIMD
// tables' tanh is cpu/vec_ops.h's rational function (tanh_rational.h), the
// scalar table's std::tanh. A sweep of inputs per cap, one bound against the
// double-precision value, and the same bound shown to catch a wrong constant:
// the test runs vec_ops.h's own template, on a one-lane "vector" of plain
// floats, with each constant changed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/tanh_rational.h"
#include "float_sweep.h"

namespace laya::cpu {
namespace {

// One float as V of cpu/vec_ops.h: the operations the soft-capping template
// uses, with the SIMD types' rounding (std::fma is one rounding) and their
// min / max (b where either is NaN, as minps / maxps).
struct OneLane {
  using F = float;
  static constexpr int kWidth = 1;
  static F load(const float* p) { return *p; }
  static void store(float* p, F v) { *p = v; }
  static F set1(float s) { return s; }
  static F mul(F a, F b) { return a * b; }
  static F div(F a, F b) { return a / b; }
  static F fmadd(F a, F b, F c) { return std::fma(a, b, c); }
  static F min(F a, F b) { return a < b ? a : b; }
  static F max(F a, F b) { return a > b ? a : b; }
};

}  // namespace
}  // namespace laya::cpu

#include "backend/cpu/vec_ops.h"  // after the vector type, as the ISAs' files include it

namespace laya::cpu {
namespace {

const Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon};
const float kCaps[] = {1.0f, 8.0f, 30.0f, 50.0f};  // 50 / 30: Gemma 2's attention / final logits

// Per cap: x = cap·t for t in steps of 1/1024 over [-10, 10] (the rational's
// whole range, its clamp at 7.9988 and where float tanh reaches 1 at 9.01);
// steps of 2^-20 around t = ±kClamp; ±m·2^e for e in [-149, 127] (tiny,
// denormal and huge x, x / cap denormal); ±0, ±inf, NaN, ±FLT_MAX.
std::vector<float> softcap_sweep(float cap) {
  std::vector<float> v;
  for (int i = -10 * 1024; i <= 10 * 1024; ++i) v.push_back(cap * (static_cast<float>(i) / 1024.0f));
  for (float s : {1.0f, -1.0f})
    for (int k = -1000; k <= 1000; ++k) v.push_back(s * cap * (TanhRational::kClamp + std::ldexp(float(k), -20)));
  test::append_binades(&v);
  const float inf = std::numeric_limits<float>::infinity(), big = std::numeric_limits<float>::max();
  for (float s : {0.0f, -0.0f, inf, -inf, big, -big, std::numeric_limits<float>::quiet_NaN()}) v.push_back(s);
  return v;
}

// The bound, against cap·tanh(x / cap) in double:
//   |got - want| <= 5e-7·|want| + cap·2^-149
// 5e-7 = tanh_v's own 2.95e-7 (tanh_rational.h) + x·(1/cap)'s two roundings
// (2^-23 relative in the argument; tanh's condition number x·tanh'(x)/tanh(x)
// is at most 1) + the product's rounding (2^-24); the scalar table's tanhf
// (~1 ulp) fits the same. cap·2^-149: x / cap rounded to a denormal's step.
// Past t = 9.02 every table gives exactly ±cap (the float nearest the value),
// NaN gives NaN and a zero keeps its sign.
constexpr double kRel = 5e-7;

struct Verdict {
  int bad = 0;
  double worst = 0;  // of the bound, over finite x
  float worst_x = 0;
  std::string first;  // the first failures, described
};

Verdict check(const std::vector<float>& x, const std::vector<float>& got, float cap) {
  Verdict v;
  auto fail = [&](size_t i, const char* why) {
    if (v.bad++ < 4) v.first += "softcap(" + std::to_string(x[i]) + ") = " + std::to_string(got[i]) + ": " + why + "; ";
  };
  for (size_t i = 0; i < x.size(); ++i) {
    const float xi = x[i], g = got[i];
    if (std::isnan(xi)) {
      if (!std::isnan(g)) fail(i, "not NaN");
      continue;
    }
    const double t = static_cast<double>(xi) / cap;
    if (std::fabs(t) >= 9.02) {
      if (g != std::copysign(cap, xi)) fail(i, "not exactly ±cap");
      continue;
    }
    if (xi == 0) {
      if (g != 0 || std::signbit(g) != std::signbit(xi)) fail(i, "not a zero of x's sign");
      continue;
    }
    const double want = cap * std::tanh(t);
    const double err = std::fabs(g - want), bound = kRel * std::fabs(want) + std::ldexp(double(cap), -149);
    if (err / bound > v.worst) v.worst = err / bound, v.worst_x = xi;
    if (!(err <= bound)) fail(i, "past the bound");
  }
  return v;
}

template <class C>
std::vector<float> one_lane_softcap(const std::vector<float>& x, float cap) {
  std::vector<float> y = x;
  vec::softcap<OneLane, C>(y.data(), static_cast<int64_t>(y.size()), cap);
  return y;
}

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(KernelOps, SoftcapMatchesDoubleOnEveryTable) {
  for (float cap : kCaps) {
    const std::vector<float> x = softcap_sweep(cap);
    const std::vector<float> emulated = one_lane_softcap<TanhRational>(x, cap);
    const Verdict ve = check(x, emulated, cap);
    EXPECT_EQ(ve.bad, 0) << "vec_ops.h's template on one lane, cap " << cap << ": " << ve.first;
    for (Isa isa : kAllIsas) {
      const KernelTable* tab = kernels_for(isa);
      if (tab == nullptr) continue;
      std::vector<float> got = x;
      got.push_back(12345.0f);  // must not be touched
      tab->softcap_f32(got.data(), static_cast<int64_t>(x.size()), cap);
      EXPECT_EQ(got.back(), 12345.0f) << isa_name(isa);
      got.pop_back();
      const Verdict v = check(x, got, cap);
      EXPECT_EQ(v.bad, 0) << isa_name(isa) << " cap " << cap << ": " << v.first;
      // Every SIMD table computes the template's bits (the same fused
      // operations in the same order), whatever its width.
      if (isa != Isa::kScalar) {
        EXPECT_TRUE(bits_equal(got, emulated)) << isa_name(isa) << " cap " << cap;
      }
      std::printf("[ measure  ] softcap %s cap %g over %zu inputs: %.2f of the bound (worst at x = %g)\n",
                  isa_name(isa), static_cast<double>(cap), x.size(), v.worst, static_cast<double>(v.worst_x));
    }
  }
}

// Every length around the vector widths (the tails go through padded copies)
// and an odd offset: the same bits as one long call, nothing past n written.
TEST(KernelOps, SoftcapTailsEqualTheWholeArray) {
  const std::vector<float> x = softcap_sweep(30.0f);
  for (Isa isa : kAllIsas) {
    const KernelTable* tab = kernels_for(isa);
    if (tab == nullptr) continue;
    std::vector<float> whole = x;
    tab->softcap_f32(whole.data(), static_cast<int64_t>(whole.size()), 30.0f);
    for (int64_t n : {0, 1, 3, 4, 7, 8, 15, 16, 17, 31, 33, 100}) {
      std::vector<float> part = x;
      tab->softcap_f32(part.data() + 1, n, 30.0f);
      for (size_t i = 0; i < part.size(); ++i) {
        const bool inside = i >= 1 && i <= static_cast<size_t>(n);
        const float want = inside ? whole[i] : x[i];
        ASSERT_EQ(std::memcmp(&part[i], &want, sizeof(float)), 0) << isa_name(isa) << " n " << n << " i " << i;
      }
    }
  }
}

// The sweep catches a wrong constant: each of the rational's eleven
// coefficients off by one part in 10^3 fails it, and so does the clamp of an
// older version of the same coefficients (7.9053, where the fraction is still
// 5 ulps short of 1). Measured: the x^0 terms fail at 2000x the bound, the
// x^2 .. x^8 ones at 25-1200x, the x^10 one at 4x; the x^12 one (1.6e-7 at
// most, within the bound) and the old clamp fail where the value must be
// exactly ±cap.
struct Mutated {
  static constexpr int kNumTerms = TanhRational::kNumTerms;
  static constexpr int kDenTerms = TanhRational::kDenTerms;
  static inline float kNum[kNumTerms];
  static inline float kDen[kDenTerms];
  static inline float kClamp;
  static void reset() {
    std::memcpy(kNum, TanhRational::kNum, sizeof kNum);
    std::memcpy(kDen, TanhRational::kDen, sizeof kDen);
    kClamp = TanhRational::kClamp;
  }
};

TEST(KernelOps, SoftcapSweepCatchesAWrongConstant) {
  const float cap = 30.0f;
  const std::vector<float> x = softcap_sweep(cap);
  Mutated::reset();
  EXPECT_TRUE(bits_equal(one_lane_softcap<Mutated>(x, cap), one_lane_softcap<TanhRational>(x, cap)));
  auto run = [&](const std::string& what) {
    const Verdict v = check(x, one_lane_softcap<Mutated>(x, cap), cap);
    EXPECT_GT(v.bad, 0) << what << " passes the sweep";
    std::printf("[ measure  ] softcap with %s: %d inputs fail, worst %.1f of the bound\n", what.c_str(), v.bad,
                v.worst);
    Mutated::reset();
  };
  for (int i = 0; i < Mutated::kNumTerms; ++i) {
    Mutated::kNum[i] *= 1.001f;
    run("numerator coefficient " + std::to_string(i) + " x 1.001");
  }
  for (int i = 0; i < Mutated::kDenTerms; ++i) {
    Mutated::kDen[i] *= 1.001f;
    run("denominator coefficient " + std::to_string(i) + " x 1.001");
  }
  Mutated::kClamp = 7.90531110763549805f;
  run("clamp 7.9053");
}

// tanh_v on every non-negative float (softcap with cap 1 is tanh_v itself:
// multiplying by 1 is exact), against double tanh: the measurement behind
// tanh_rational.h's bound. ~2^31 inputs, ~1 min: run by hand with
// --gtest_also_run_disabled_tests --gtest_filter='*TanhExhaustive*'.
TEST(KernelOps, DISABLED_TanhExhaustive) {
  for (Isa isa : kAllIsas) {
    const KernelTable* tab = kernels_for(isa);
    if (tab == nullptr || isa == Isa::kScalar) continue;
    double worst = 0;
    float worst_x = 0;
    std::vector<float> x(1 << 20), y;
    for (uint64_t u0 = 0; u0 < 0x7f800000u; u0 += x.size()) {
      for (size_t k = 0; k < x.size(); ++k) {
        const uint32_t u = static_cast<uint32_t>(std::min<uint64_t>(u0 + k, 0x7f7fffffu));
        std::memcpy(&x[k], &u, sizeof u);
      }
      y = x;
      tab->softcap_f32(y.data(), static_cast<int64_t>(y.size()), 1.0f);
      for (size_t k = 0; k < x.size(); ++k) {
        const double want = std::tanh(static_cast<double>(x[k]));
        if (want == 0) continue;
        const double r = std::fabs(y[k] - want) / want;
        if (r > worst) worst = r, worst_x = x[k];
      }
    }
    std::printf("[ measure  ] tanh_v %s over every float >= 0: worst relative error %.3e (%.2f x 2^-24) at x = %.9g\n",
                isa_name(isa), worst, std::ldexp(worst, 24), static_cast<double>(worst_x));
    EXPECT_LE(worst, 2.95e-7);
  }
}

}  // namespace
}  // namespace laya::cpu
