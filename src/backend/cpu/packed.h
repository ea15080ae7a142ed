// Decode-optimised weight layouts for Q8_0, Q4_K, Q5_0 and Q6_K matrices
// ("packed"): 16 rows interleaved so one 512-bit register holds 4
// consecutive weights of 16 rows,
// and the activations are broadcast. With AVX-512 VNNI one vpdpbusd then does
// 64 multiply-adds, and no horizontal sums are needed.
//
// Accuracy: activations are quantized per 32-block in two int8 terms,
// x ≈ d·(hi + lo/128) (|lo| ≤ 64), i.e. ~15 bits — unlike llama.cpp's single
// int8 term, the error stays far below the weights' own quantization error.
//
// Q8_0 layout of one group of 16 rows, nb = cols / 32 blocks, in records of
// two blocks (1088 bytes; a last odd block makes a 576-byte record):
//   scales: 2 × 16 fp16 (row r's scale of block 2p, then of block 2p + 1)
//   quants: 2 × [8 quads][16 rows][4] uint8 = w + 128
// Scales inline with their quants make one sequential stream per thread: a
// separate scale array was a second stream that cost ~20 % of the read rate.
// Q4_K layout of one group, per super-block of 256 (2368 bytes, vs 2304 in the file):
//   d[16], dmin[16] fp16; sc[8][16], m[8][16] uint8 (the unpacked 6-bit
//   scales/mins); quants [8 sub-blocks][4 octets][16 rows][4 bytes]: byte i of
//   octet o holds q[8o + i] (low nibble) and q[8o + 4 + i] (high nibble).
// Q5_0 layout of one group, per block of 32 (352 bytes, as in the file):
//   d[16] fp16; high bits [16 rows] u32 (bit k = 5th bit of q[k]); low nibbles
//   as Q4_K's octets [4][16 rows][4]. w = d·(q − 16).
// Q6_K layout of one group, per super-block of 256 (3360 bytes, as in the file):
//   d[16] fp16; sc[16 sub-blocks][16 rows] int8; low nibbles as Q4_K's octets
//   [32 octets][16 rows][4] (2048 B); high 2-bit planes [16 octet pairs][16 rows][4]
//   (1024 B): byte i holds hi(q[8o+i]), hi(q[8o+4+i]), hi(q[8o+8+i]), hi(q[8o+12+i])
//   in bits 0-1, 2-3, 4-5, 6-7 (o even). Values are q in [0, 63]; w = d·sc·(q − 32).
// The packed copy replaces the file mapping's pages (MADV_DONTNEED after
// packing), so the weights are not held twice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cpu/kernels.h"
#include "core/tensor.h"

namespace laya::cpu {

constexpr int64_t kPackRows = 16;
// Bytes of one record of a 16-row group (layouts above).
constexpr size_t kQ4kRecordBytes = 32 + 32 + 128 + 128 + 2048;  // per super-block of 256; a multiple of 64
constexpr size_t kQ6kRecordBytes = 32 + 256 + 2048 + 1024;      // per super-block; not a multiple of 64
constexpr size_t kQ5RecordBytes = 32 + 64 + 256;                // per block of 32
constexpr size_t kQ8PairBytes = 64 + 2 * 512;                    // per two blocks of 32
// Where block b's 16 scales / 512 quant bytes start inside a Q8_0 group.
constexpr size_t q8_scales_at(int64_t b) { return static_cast<size_t>(b / 2) * kQ8PairBytes + static_cast<size_t>(b % 2) * 32; }
constexpr size_t q8_quants_at(int64_t b) { return static_cast<size_t>(b / 2) * kQ8PairBytes + 64 + static_cast<size_t>(b % 2) * 512; }

struct PackedMatrix {
  DType type = DType::Q8_0;  // Q8_0, Q5_0, Q4_K or Q6_K
  int64_t rows = 0, cols = 0, nb = 0;
  size_t group_bytes = 0;
  uint8_t* data = nullptr;  // 64-byte aligned, inside the CPU backend's packed buffer
  const uint8_t* group(int64_t g) const { return data + static_cast<size_t>(g) * group_bytes; }
};

// Activations of one token, quantized for the packed kernels.
struct QuantizedX {
  int64_t nb = 0;
  int8_t* hi = nullptr;     // nb * 32
  int8_t* lo = nullptr;     // nb * 32
  float* d = nullptr;       // nb: scale / 128 (folded)
  int32_t* corr = nullptr;  // nb: 128 * (128 * Σhi + Σlo), the w+128 offset
  float* sum = nullptr;     // nb: Σx of the block in float (Q4_K mins)
  int32_t* corr16 = nullptr;  // 2 nb: 32 * (128 * Σhi + Σlo) per 16 values (Q6_K offset)
};

bool packable(const Tensor& t);
size_t packed_bytes(const Tensor& t);
// Packs t (a packable() type: Q8_0, Q4_K, Q5_0 or Q6_K; rows % 16 == 0)
// into dst (packed_bytes(t), 64-aligned).
void pack(const Tensor& t, uint8_t* dst, PackedMatrix* out);
void pack_q8_0(const Tensor& t, uint8_t* dst, PackedMatrix* out);
void pack_q4_k(const Tensor& t, uint8_t* dst, PackedMatrix* out);
void pack_q6_k(const Tensor& t, uint8_t* dst, PackedMatrix* out);
void pack_q5_0(const Tensor& t, uint8_t* dst, PackedMatrix* out);
// 16 rows of group g, dequantized: out (16, cols). Exactly dequantize_row's values.
void dequantize_group(const PackedMatrix& m, int64_t g, float* out);
#if defined(LAYA_HAVE_X86)
// The same values transposed: wt (cols, 16), wt[k * 16 + r] = row r, column k.
void dequantize_group_t_avx512(const PackedMatrix& m, int64_t g, float* wt);
#endif
// x (cols floats) → q (buffers of nb blocks, preallocated by the caller).
void quantize_x(const float* x, int64_t cols, QuantizedX* q);
using QuantizeXFn = void (*)(const float* x, int64_t cols, QuantizedX* q);
#if defined(LAYA_HAVE_X86)
void quantize_x_avx512(const float* x, int64_t cols, QuantizedX* q);
#endif
// Matches packed_matvec_best(isa) (scalar quantize_x when there is no fast path).
QuantizeXFn quantize_x_best(Isa isa = active_isa());

using PackedMatvecFn = void (*)(const PackedMatrix& m, int64_t g_begin, int64_t g_end, const QuantizedX& x, float* y);
// y[g*16 .. g_end*16) for groups [g_begin, g_end).
void packed_matvec_scalar(const PackedMatrix& m, int64_t g_begin, int64_t g_end, const QuantizedX& x, float* y);
#if defined(LAYA_HAVE_X86)
void packed_matvec_avx512vnni(const PackedMatrix& m, int64_t g_begin, int64_t g_end, const QuantizedX& x, float* y);
void packed_matvec_q4k_avx512vnni(const PackedMatrix& m, int64_t g_begin, int64_t g_end, const QuantizedX& x, float* y);
void packed_matvec_q6k_avx512vnni(const PackedMatrix& m, int64_t g_begin, int64_t g_end, const QuantizedX& x, float* y);
#endif
void packed_matvec_q5_0_scalar(const PackedMatrix& m, int64_t g_begin, int64_t g_end, const QuantizedX& x, float* y);
#if defined(LAYA_HAVE_X86)
void packed_matvec_q5_0_avx512vnni(const PackedMatrix& m, int64_t g_begin, int64_t g_end, const QuantizedX& x, float* y);
#endif
void packed_matvec_q6k_scalar(const PackedMatrix& m, int64_t g_begin, int64_t g_end, const QuantizedX& x, float* y);
void packed_matvec_q4k_scalar(const PackedMatrix& m, int64_t g_begin, int64_t g_end, const QuantizedX& x, float* y);
#if defined(LAYA_HAVE_X86)
// Several tokens at once (prefill): xs[t] are the tokens' quantized
// activations; y[t * ldy + row]. Q8_0 and Q4_K only (packed_gemm_supported).
bool packed_gemm_supported(DType type);
void packed_gemm_avx512vnni(const PackedMatrix& m, int64_t g_begin, int64_t g_end, const QuantizedX* xs, int64_t n_tok,
                            float* y, int64_t ldy);
#endif
// The kernel for m.type from the fastest set of `isa` (see packed_matvec_best).
PackedMatvecFn packed_matvec_for(DType type, Isa isa = active_isa());
// The fastest of `isa` on this CPU; nullptr when there is no fast path (then
// the backend keeps using the file layout and float kernels).
PackedMatvecFn packed_matvec_best(Isa isa = active_isa());

}  // namespace laya::cpu
