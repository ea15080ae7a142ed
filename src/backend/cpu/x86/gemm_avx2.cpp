// AVX2 GEMM tile: 4 tokens × 2 rows per step (8 ymm accumulators + 6 operands).
#include <immintrin.h>

#include "backend/cpu/gemm.h"

namespace laya::cpu {

namespace {

inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

template <int NT, int NR>
inline void block(const float* const* w, const float* x, int64_t ldx, int64_t k, float* y, int64_t ldy) {
  __m256 acc[NT][NR];
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < NR; ++r) acc[t][r] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    __m256 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = _mm256_loadu_ps(w[r] + i);
    for (int t = 0; t < NT; ++t) {
      const __m256 xv = _mm256_loadu_ps(x + t * ldx + i);
      for (int r = 0; r < NR; ++r) acc[t][r] = _mm256_fmadd_ps(xv, wv[r], acc[t][r]);
    }
  }
  for (int t = 0; t < NT; ++t) {
    for (int r = 0; r < NR; ++r) {
      float s = hsum(acc[t][r]);
      for (int64_t j = i; j < k; ++j) s += x[t * ldx + j] * w[r][j];
      y[t * ldy + r] = s;
    }
  }
}

template <int NT>
inline void rows_for_tokens(const float* const* w, int64_t n_rows, const float* x, int64_t ldx, int64_t k, float* y,
                            int64_t ldy) {
  int64_t r = 0;
  for (; r + 2 <= n_rows; r += 2) block<NT, 2>(w + r, x, ldx, k, y + r, ldy);
  for (; r < n_rows; ++r) block<NT, 1>(w + r, x, ldx, k, y + r, ldy);
}

}  // namespace

void gemm_tile_avx2(const float* const* w, int64_t n_rows, const float* x, int64_t ldx, int64_t n_tok, int64_t k,
                    float* y, int64_t ldy) {
  int64_t t = 0;
  for (; t + 4 <= n_tok; t += 4) rows_for_tokens<4>(w, n_rows, x + t * ldx, ldx, k, y + t * ldy, ldy);
  for (; t < n_tok; ++t) rows_for_tokens<1>(w, n_rows, x + t * ldx, ldx, k, y + t * ldy, ldy);
}

}  // namespace laya::cpu
