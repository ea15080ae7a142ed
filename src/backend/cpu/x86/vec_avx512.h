// AVX-512 (F/BW/VL/DQ) vectors: the exp of the softmax and of GELU, and the
// vector type the kernels written once for every ISA take (Avx512Vec,
// cpu/vec_ops.h says what it must provide). Only for translation units
// compiled with the AVX-512 flags (the *_avx512.cpp files). Everything here
// has internal linkage (as x86/vec_avx2.h says why).
#pragma once

#include <immintrin.h>

#include "backend/cpu/exp_poly.h"

namespace laya::cpu {
namespace {

// exp(x) for x <= exp_poly::kMaxArg: 2^(x·log2 e) split into 2^n · 2^f,
// f in [-0.5, 0.5], degree-6 polynomial (exp_poly.h); relative error < 2e-7.
// The same function as exp_avx2 (x86/vec_avx2.h) but for 2^n's scaling
// (scalef here, the exponent field there: the same value within range).
inline __m512 exp_avx512(__m512 x) {
  const __m512 log2e = _mm512_set1_ps(exp_poly::kLog2e);
  x = _mm512_max_ps(x, _mm512_set1_ps(exp_poly::kMinArg));
  const __m512 t = _mm512_mul_ps(x, log2e);
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // f·ln2 computed in two parts for accuracy.
  const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(exp_poly::kLn2Hi), x);
  const __m512 f = _mm512_fnmadd_ps(n, _mm512_set1_ps(exp_poly::kLn2Lo), r);
  __m512 p = _mm512_set1_ps(exp_poly::kCoef[0]);
  for (int i = 1; i < 7; ++i) p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(exp_poly::kCoef[i]));
  return _mm512_scalef_ps(p, n);
}

struct Avx512Vec {
  using F = __m512;   // 16 floats
  using D = __m512d;  // 8 doubles: half an F
  static constexpr int kWidth = 16;
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F set1(float s) { return _mm512_set1_ps(s); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }  // a·b + c, one rounding
  static F min(F a, F b) { return _mm512_min_ps(a, b); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static F exp(F x) { return exp_avx512(x); }
  // r with all but its sign bit cleared (±0) where a > lim (not where a is NaN).
  static F zero_where_above(F r, F a, float lim) {
    const __mmask16 above = _mm512_cmp_ps_mask(a, _mm512_set1_ps(lim), _CMP_GT_OQ);
    const __m512i bits = _mm512_castps_si512(r);
    return _mm512_castsi512_ps(_mm512_mask_and_epi32(bits, above, bits, _mm512_set1_epi32(static_cast<int>(0x80000000u))));
  }
  static D dzero() { return _mm512_setzero_pd(); }
  static D dset1(double s) { return _mm512_set1_pd(s); }
  static D dlo(F v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
  static D dhi(F v) { return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))); }
  static D dadd(D a, D b) { return _mm512_add_pd(a, b); }
  static D dsub(D a, D b) { return _mm512_sub_pd(a, b); }
  static D dfmadd(D a, D b, D c) { return _mm512_fmadd_pd(a, b, c); }
  static double dsum(D v) { return _mm512_reduce_add_pd(v); }
};

}  // namespace
}  // namespace laya::cpu
