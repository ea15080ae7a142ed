// AVX-512 decode attention for one GQA group (see attention.h).
#include <immintrin.h>

// GCC 12 reports the intrinsics' own "undefined" pass-through operands as
// maybe-uninitialized once they are inlined into a template (as in packed_avx512vnni.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <cmath>

#include "backend/cpu/attention.h"

namespace laya::cpu {

namespace {

// exp(x) for x <= 0 (softmax after subtracting the max): 2^(x·log2 e) split
// into 2^n · 2^f, f in [-0.5, 0.5], degree-6 polynomial; relative error < 2e-7.
inline __m512 exp_avx512(__m512 x) {
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 t = _mm512_mul_ps(x, log2e);
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // f·ln2 computed in two parts for accuracy.
  const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  const __m512 f = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// Horizontal sums of 4 vectors at once: [Σa, Σb, Σc, Σd] (about 10 µops
// instead of 4 separate reductions of ~8).
inline __m128 reduce4(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));  // a b a b per 128 lane
  const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
  const __m512 abcd = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd))),
                                    _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd))));
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(abcd), _mm512_extractf32x8_ps(abcd, 1));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}


inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }

template <typename T>
void attend_group(const float* q, int group, int64_t hd, const T* k, const T* v, int64_t kv_stride, int64_t n_kv,
                  float scale, float* scores, float* out) {
  const int64_t nc = hd / 16;
  // Scores: each K row is loaded once and used by every head of the group.
  for (int64_t j = 0; j < n_kv; ++j) {
    const T* kr = k + j * kv_stride;
    __m512 acc[8];
    for (int h = 0; h < group; ++h) acc[h] = _mm512_setzero_ps();
    for (int64_t c = 0; c < nc; ++c) {
      const __m512 kv = load16(kr + c * 16);
      for (int h = 0; h < group; ++h) acc[h] = _mm512_fmadd_ps(kv, _mm512_loadu_ps(q + h * hd + c * 16), acc[h]);
    }
    int h = 0;
    for (; h + 4 <= group; h += 4) {
      alignas(16) float r[4];
      _mm_store_ps(r, _mm_mul_ps(reduce4(acc[h], acc[h + 1], acc[h + 2], acc[h + 3]), _mm_set1_ps(scale)));
      for (int i = 0; i < 4; ++i) scores[(h + i) * n_kv + j] = r[i];
    }
    for (; h < group; ++h) scores[h * n_kv + j] = _mm512_reduce_add_ps(acc[h]) * scale;
  }
  // Softmax per head.
  for (int h = 0; h < group; ++h) {
    float* sc = scores + h * n_kv;
    __m512 mx = _mm512_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 16 <= n_kv; j += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(sc + j));
    float m = _mm512_reduce_max_ps(mx);
    for (; j < n_kv; ++j) m = sc[j] > m ? sc[j] : m;
    const __m512 mv = _mm512_set1_ps(m);
    __m512 sv = _mm512_setzero_ps();
    for (j = 0; j + 16 <= n_kv; j += 16) {
      const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(sc + j), mv));
      _mm512_storeu_ps(sc + j, e);
      sv = _mm512_add_ps(sv, e);
    }
    if (j < n_kv) {
      const __mmask16 mk = static_cast<__mmask16>((1u << (n_kv - j)) - 1);
      const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, sc + j), mv));
      _mm512_mask_storeu_ps(sc + j, mk, e);
      sv = _mm512_add_ps(sv, _mm512_maskz_mov_ps(mk, e));
    }
    const float inv = 1.0f / _mm512_reduce_add_ps(sv);
    for (j = 0; j < n_kv; ++j) sc[j] *= inv;
  }
  // Weighted sum of V rows, each loaded once for the group; out in registers
  // when it fits (group * nc <= 24), else accumulated in memory.
  if (group * nc <= 24) {
    __m512 o[24];
    for (int i = 0; i < group * nc; ++i) o[i] = _mm512_setzero_ps();
    for (int64_t j = 0; j < n_kv; ++j) {
      const T* vr = v + j * kv_stride;
      for (int64_t c = 0; c < nc; ++c) {
        const __m512 vv = load16(vr + c * 16);
        for (int h = 0; h < group; ++h) o[h * nc + c] = _mm512_fmadd_ps(_mm512_set1_ps(scores[h * n_kv + j]), vv, o[h * nc + c]);
      }
    }
    for (int h = 0; h < group; ++h)
      for (int64_t c = 0; c < nc; ++c) _mm512_storeu_ps(out + h * hd + c * 16, o[h * nc + c]);
  } else {
    for (int h = 0; h < group; ++h)
      for (int64_t c = 0; c < nc; ++c) _mm512_storeu_ps(out + h * hd + c * 16, _mm512_setzero_ps());
    for (int64_t j = 0; j < n_kv; ++j) {
      const T* vr = v + j * kv_stride;
      for (int64_t c = 0; c < nc; ++c) {
        const __m512 vv = load16(vr + c * 16);
        for (int h = 0; h < group; ++h) {
          float* op = out + h * hd + c * 16;
          _mm512_storeu_ps(op, _mm512_fmadd_ps(_mm512_set1_ps(scores[h * n_kv + j]), vv, _mm512_loadu_ps(op)));
        }
      }
    }
  }
}

}  // namespace

void attend_group_avx512(const float* q, int group, int64_t hd, const float* k, const float* v, int64_t kv_stride,
                         int64_t n_kv, float scale, float* scores, float* out) {
  attend_group(q, group, hd, k, v, kv_stride, n_kv, scale, scores, out);
}

void attend_group_f16_avx512(const float* q, int group, int64_t hd, const uint16_t* k, const uint16_t* v,
                             int64_t kv_stride, int64_t n_kv, float scale, float* scores, float* out) {
  attend_group(q, group, hd, k, v, kv_stride, n_kv, scale, scores, out);
}

}  // namespace laya::cpu
