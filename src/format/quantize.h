// Scalar float32 → GGUF block quantizers (bit-exact ggml block layouts): the
// file format's encoders, used by mkmodel and by tests as the reference.
// The K-quants follow llama.cpp's reference quantize_row_*_ref (the same
// scale searches, without an importance matrix), so files written by laya
// decode to the same quality as llama.cpp's quantizer would give.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace laya {

// Types quantize_row() can produce: F32, F16, BF16, Q4_0, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K.
bool can_quantize(DType t);

// Quantizes n floats (a multiple of the type's block size) into
// row_bytes(t, n) bytes at dst. t must satisfy can_quantize().
void quantize_row(DType t, const float* src, void* dst, int64_t n);

void quantize_row_f16(const float* x, void* y, int64_t n);
void quantize_row_bf16(const float* x, void* y, int64_t n);
void quantize_row_q4_0(const float* x, void* y, int64_t n);
void quantize_row_q5_0(const float* x, void* y, int64_t n);
void quantize_row_q8_0(const float* x, void* y, int64_t n);
void quantize_row_q4_k(const float* x, void* y, int64_t n);
void quantize_row_q5_k(const float* x, void* y, int64_t n);
void quantize_row_q6_k(const float* x, void* y, int64_t n);

}  // namespace laya
