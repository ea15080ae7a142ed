// AVX2 + FMA vectors: the exp of the softmax and of GELU, and the vector type
// the kernels written once for every ISA take (Avx2Vec, cpu/vec_ops.h says
// what it must provide). Only for translation units compiled with -mavx2
// -mfma -mf16c (the *_avx2.cpp files). Everything here has internal linkage:
// an out-of-line copy compiled with these flags must never be the one the
// linker picks for another translation unit.
#pragma once

#include <immintrin.h>

#include "backend/cpu/exp_poly.h"

namespace laya::cpu {
namespace {

// exp(x) for x <= exp_poly::kMaxArg: 2^(x·log2 e) split into 2^n · 2^f,
// f in [-0.5, 0.5], degree-6 polynomial (exp_poly.h); relative error < 2e-7.
// x is clamped at -87, so n >= -126 and 2^n · p stays a normal float: it is
// made by adding n to p's exponent field. A NaN x gives a number (the clamp
// takes the other operand); the callers' results carry the NaN.
inline __m256 exp_avx2(__m256 x) {
  const __m256 log2e = _mm256_set1_ps(exp_poly::kLog2e);
  x = _mm256_max_ps(x, _mm256_set1_ps(exp_poly::kMinArg));
  const __m256 t = _mm256_mul_ps(x, log2e);
  const __m256 n = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // f·ln2 computed in two parts for accuracy.
  const __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(exp_poly::kLn2Hi), x);
  const __m256 f = _mm256_fnmadd_ps(n, _mm256_set1_ps(exp_poly::kLn2Lo), r);
  __m256 p = _mm256_set1_ps(exp_poly::kCoef[0]);
  for (int i = 1; i < 7; ++i) p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(exp_poly::kCoef[i]));
  const __m256i exponent_step = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
  return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), exponent_step));
}

struct Avx2Vec {
  using F = __m256;   // 8 floats
  using D = __m256d;  // 4 doubles: half an F
  static constexpr int kWidth = 8;
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static F set1(float s) { return _mm256_set1_ps(s); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }  // a·b + c, one rounding
  static F min(F a, F b) { return _mm256_min_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F exp(F x) { return exp_avx2(x); }
  // r with all but its sign bit cleared (±0) where a > lim (not where a is NaN).
  static F zero_where_above(F r, F a, float lim) {
    const __m256 above = _mm256_cmp_ps(a, _mm256_set1_ps(lim), _CMP_GT_OQ);
    const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    return _mm256_andnot_ps(_mm256_and_ps(above, magnitude), r);
  }
  static D dzero() { return _mm256_setzero_pd(); }
  static D dset1(double s) { return _mm256_set1_pd(s); }
  static D dlo(F v) { return _mm256_cvtps_pd(_mm256_castps256_ps128(v)); }
  static D dhi(F v) { return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)); }
  static D dadd(D a, D b) { return _mm256_add_pd(a, b); }
  static D dsub(D a, D b) { return _mm256_sub_pd(a, b); }
  static D dfmadd(D a, D b, D c) { return _mm256_fmadd_pd(a, b, c); }
  static double dsum(D v) {
    const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
  }
};

}  // namespace
}  // namespace laya::cpu
