// AVX-512 GEMM tile: 4 tokens × 4 rows per step, 16 zmm accumulators.
#include <immintrin.h>

#include "backend/cpu/gemm.h"

namespace laya::cpu {

namespace {

inline float hsum(__m512 v) { return _mm512_reduce_add_ps(v); }

// Computes up to 4×4 outputs; nt <= 4 tokens, nr <= 4 rows (unused lanes
// point at valid memory and are discarded).
template <int NT, int NR>
inline void block(const float* const* w, const float* x, int64_t ldx, int64_t k, float* y, int64_t ldy) {
  __m512 acc[NT][NR];
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < NR; ++r) acc[t][r] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    __m512 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = _mm512_loadu_ps(w[r] + i);
    for (int t = 0; t < NT; ++t) {
      const __m512 xv = _mm512_loadu_ps(x + t * ldx + i);
      for (int r = 0; r < NR; ++r) acc[t][r] = _mm512_fmadd_ps(xv, wv[r], acc[t][r]);
    }
  }
  if (i < k) {
    const __mmask16 m = static_cast<__mmask16>((1u << (k - i)) - 1);
    __m512 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = _mm512_maskz_loadu_ps(m, w[r] + i);
    for (int t = 0; t < NT; ++t) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + t * ldx + i);
      for (int r = 0; r < NR; ++r) acc[t][r] = _mm512_fmadd_ps(xv, wv[r], acc[t][r]);
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < NR; ++r) y[t * ldy + r] = hsum(acc[t][r]);
}

template <int NT>
inline void rows_for_tokens(const float* const* w, int64_t n_rows, const float* x, int64_t ldx, int64_t k, float* y,
                            int64_t ldy) {
  int64_t r = 0;
  for (; r + 4 <= n_rows; r += 4) block<NT, 4>(w + r, x, ldx, k, y + r, ldy);
  for (; r < n_rows; ++r) block<NT, 1>(w + r, x, ldx, k, y + r, ldy);
}

}  // namespace

void gemm_tile_avx512(const float* const* w, int64_t n_rows, const float* x, int64_t ldx, int64_t n_tok, int64_t k,
                      float* y, int64_t ldy) {
  int64_t t = 0;
  for (; t + 4 <= n_tok; t += 4) rows_for_tokens<4>(w, n_rows, x + t * ldx, ldx, k, y + t * ldy, ldy);
  for (; t < n_tok; ++t) rows_for_tokens<1>(w, n_rows, x + t * ldx, ldx, k, y + t * ldy, ldy);
}

}  // namespace laya::cpu
