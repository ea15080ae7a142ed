// NEON (AArch64) vectors: the exp of GELU and the vector type the kernels
// written once for every ISA take (NeonVec, cpu/vec_ops.h says what it must
// provide). Only for AArch64 translation units (the arm/ files). Internal
// linkage, as x86/vec_avx2.h says why.
#pragma once

#include <arm_neon.h>

#include "backend/cpu/exp_poly.h"

namespace laya::cpu {
namespace {

// exp(x) for x <= exp_poly::kMaxArg: the x86 kernels' function (exp_poly.h,
// the same fused operations in the same order as exp_avx2, so the same bits);
// relative error < 2e-7. x is clamped at -87, so 2^n · p stays a normal float,
// made by adding n to p's exponent field. A NaN x stays NaN (vmaxq keeps it).
inline float32x4_t exp_neon(float32x4_t x) {
  x = vmaxq_f32(x, vdupq_n_f32(exp_poly::kMinArg));
  const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(exp_poly::kLog2e)));
  // f·ln2 computed in two parts for accuracy (vfmsq: a - b·c, fused).
  const float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(exp_poly::kLn2Hi));
  const float32x4_t f = vfmsq_f32(r, n, vdupq_n_f32(exp_poly::kLn2Lo));
  float32x4_t p = vdupq_n_f32(exp_poly::kCoef[0]);
  for (int i = 1; i < 7; ++i) p = vfmaq_f32(vdupq_n_f32(exp_poly::kCoef[i]), p, f);
  const int32x4_t exponent_step = vshlq_n_s32(vcvtq_s32_f32(n), 23);  // n is whole: converted exactly
  return vreinterpretq_f32_s32(vaddq_s32(vreinterpretq_s32_f32(p), exponent_step));
}

struct NeonVec {
  using F = float32x4_t;  // 4 floats
  using D = float64x2_t;  // 2 doubles: half an F
  static constexpr int kWidth = 4;
  static F load(const float* p) { return vld1q_f32(p); }
  static void store(float* p, F v) { vst1q_f32(p, v); }
  static F set1(float s) { return vdupq_n_f32(s); }
  static F add(F a, F b) { return vaddq_f32(a, b); }
  static F sub(F a, F b) { return vsubq_f32(a, b); }
  static F mul(F a, F b) { return vmulq_f32(a, b); }
  static F div(F a, F b) { return vdivq_f32(a, b); }
  static F fmadd(F a, F b, F c) { return vfmaq_f32(c, a, b); }  // a·b + c, one rounding
  static F min(F a, F b) { return vminq_f32(a, b); }
  static F max(F a, F b) { return vmaxq_f32(a, b); }
  static F exp(F x) { return exp_neon(x); }
  // r with all but its sign bit cleared (±0) where a > lim (not where a is NaN).
  static F zero_where_above(F r, F a, float lim) {
    const uint32x4_t above = vcgtq_f32(a, vdupq_n_f32(lim));
    const uint32x4_t clear = vandq_u32(above, vdupq_n_u32(0x7fffffffu));
    return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(r), clear));
  }
  static D dzero() { return vdupq_n_f64(0.0); }
  static D dset1(double s) { return vdupq_n_f64(s); }
  static D dlo(F v) { return vcvt_f64_f32(vget_low_f32(v)); }
  static D dhi(F v) { return vcvt_high_f64_f32(v); }
  static D dadd(D a, D b) { return vaddq_f64(a, b); }
  static D dsub(D a, D b) { return vsubq_f64(a, b); }
  static D dfmadd(D a, D b, D c) { return vfmaq_f64(c, a, b); }
  static double dsum(D v) { return vaddvq_f64(v); }
};

}  // namespace
}  // namespace laya::cpu
