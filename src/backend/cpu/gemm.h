// Dense float32 "dot-form" GEMM tile used by prefill: y[t * ldy + r] =
// x[t] · w[r] for t < n_tok, r < n_rows, both operands contiguous along k
// (weights are rows of a dequantized tile, activations rows of the batch).
// Register-blocked 4 tokens × 4 rows so each loaded vector feeds several FMAs.
#pragma once

#include <cstdint>

#include "backend/cpu/kernels.h"

namespace laya::cpu {

// w: n_rows row pointers, each k floats; x: n_tok rows, stride ldx floats.
using GemmTileFn = void (*)(const float* const* w, int64_t n_rows, const float* x, int64_t ldx, int64_t n_tok,
                            int64_t k, float* y, int64_t ldy);

void gemm_tile_scalar(const float* const* w, int64_t n_rows, const float* x, int64_t ldx, int64_t n_tok, int64_t k,
                      float* y, int64_t ldy);
#if defined(LAYA_HAVE_X86)
void gemm_tile_avx2(const float* const* w, int64_t n_rows, const float* x, int64_t ldx, int64_t n_tok, int64_t k,
                    float* y, int64_t ldy);
void gemm_tile_avx512(const float* const* w, int64_t n_rows, const float* x, int64_t ldx, int64_t n_tok, int64_t k,
                      float* y, int64_t ldy);
#endif

#if defined(LAYA_HAVE_X86)
// Outer-product form over a transposed tile wt (k, 16) (AVX-512).
void gemm_tileT_avx512(const float* wt, int64_t n_rows, const float* x, int64_t ldx, int64_t n_tok, int64_t k, float* y,
                       int64_t ldy);
// rows (n_rows <= 16 pointers to k floats) → wt (k, 16), missing rows zero.
void transpose16_avx512(const float* const* rows, int64_t n_rows, int64_t k, float* wt);
#endif

// The tile function of an ISA (scalar when the ISA has none).
GemmTileFn gemm_tile_for(Isa isa);

}  // namespace laya::cpu
