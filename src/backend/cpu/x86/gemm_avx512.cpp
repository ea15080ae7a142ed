// AVX-512 GEMM tile: 4 tokens × 4 rows per step, 16 zmm accumulators.
#include <immintrin.h>

// GCC 12 reports the intrinsics' own "undefined" pass-through operands
// (_mm512_reduce_add_ps's extracts) as uninitialized once inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

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

namespace laya::cpu {

// Outer-product form over a transposed 16-row tile: wt (k, 16) holds rows
// r0..r0+15 column by column, so one load feeds 8 tokens' FMAs and no
// horizontal sums are needed. y[t * ldy + r] for t < n_tok, r < n_rows (<= 16).
void gemm_tileT_avx512(const float* wt, int64_t n_rows, const float* x, int64_t ldx, int64_t n_tok, int64_t k, float* y,
                       int64_t ldy) {
  const __mmask16 rm = static_cast<__mmask16>(n_rows >= 16 ? 0xFFFF : (1u << n_rows) - 1);
  int64_t t = 0;
  for (; t + 8 <= n_tok; t += 8) {
    __m512 acc[8];
    for (int i = 0; i < 8; ++i) acc[i] = _mm512_setzero_ps();
    const float* xt = x + t * ldx;
    for (int64_t j = 0; j < k; ++j) {
      const __m512 w = _mm512_loadu_ps(wt + j * 16);
      for (int i = 0; i < 8; ++i) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(xt[i * ldx + j]), w, acc[i]);
    }
    for (int i = 0; i < 8; ++i) _mm512_mask_storeu_ps(y + (t + i) * ldy, rm, acc[i]);
  }
  // Remaining tokens: the same single accumulation chain per token as above,
  // so a token's result does not depend on how the batch was cut.
  for (; t < n_tok; ++t) {
    __m512 a0 = _mm512_setzero_ps();
    const float* xt = x + t * ldx;
    for (int64_t j = 0; j < k; ++j) a0 = _mm512_fmadd_ps(_mm512_set1_ps(xt[j]), _mm512_loadu_ps(wt + j * 16), a0);
    _mm512_mask_storeu_ps(y + t * ldy, rm, a0);
  }
}

// (16, k) row-major → (k, 16), rows past n_rows zero.
void transpose16_avx512(const float* const* rows, int64_t n_rows, int64_t k, float* wt) {
  int64_t j = 0;
  for (; j + 16 <= k; j += 16) {
    // Gather a 16x16 block with strided loads; the compiler turns the scalar
    // stores into vector ones poorly, so do it by rows.
    for (int r = 0; r < 16; ++r) {
      if (r < n_rows) {
        const __m512 v = _mm512_loadu_ps(rows[r] + j);
        alignas(64) float tmp[16];
        _mm512_store_ps(tmp, v);
        for (int c = 0; c < 16; ++c) wt[(j + c) * 16 + r] = tmp[c];
      } else {
        for (int c = 0; c < 16; ++c) wt[(j + c) * 16 + r] = 0.f;
      }
    }
  }
  for (; j < k; ++j)
    for (int r = 0; r < 16; ++r) wt[j * 16 + r] = r < n_rows ? rows[r][j] : 0.f;
}

}  // namespace laya::cpu
