// Per-row CPU kernels: dequantize a weight row, dot a weight row with float
// activations. One table per instruction set; the scalar table (cpu/ref) is
// the truth every SIMD table is tested against.
//
// Weights stay in their file format (mmapped, never repacked here);
// activations are float32. Multiplying the dequantized weights in float32
// (instead of rounding activations to 8 bits as llama.cpp does) is what makes
// laya closer to the reference than llama.cpp.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/dtype.h"
#include "core/tensor.h"

namespace laya::cpu {

enum class Isa : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kNeon = 3 };

const char* isa_name(Isa isa);
// The ISA of isa_name(); false for any other name.
bool parse_isa(std::string_view name, Isa* out);

// The best ISA this CPU supports, lowered by the environment variable
// LAYA_ISA=scalar|avx2|avx512 (used by tests to force a path). Computed once.
// The default of a CPU backend's ISA (BackendOptions::isa).
Isa active_isa();
bool isa_supported(Isa isa);  // CPU + build support

using DequantizeRowFn = void (*)(const void* src, float* dst, int64_t n);
using DotRowFn = float (*)(const void* w, const float* x, int64_t n);
// One weight row against m token rows of activations (x: m rows ldx apart;
// y[t * ldy] for token t): each result the same bits as dot_row(w, x + t *
// ldx, n) (the same operations in the same order), the row's weights read
// and unpacked once for all m. What makes a pass of a few drafted tokens cost
// about one decode step, and decide exactly as decoding them one by one would.
using DotRowsFn = void (*)(const void* w, const float* x, int64_t ldx, int64_t m, int64_t n, float* y, int64_t ldy);

// One row of an MLX affine matrix (DType::MLX_Q*, core/dtype.h): its packed
// values and its groups' scales and biases, as the file holds them. The
// kernels keep the group layout: a group's scale and bias are read once and
// applied to its sums, no dequantized copy of the row is made (except by
// affine_dequantize, for the prefill's tiles).
struct AffineRow {
  const uint8_t* q = nullptr;       // n · bits / 8 bytes
  const void* scales = nullptr;     // n / group values of `type`
  const void* biases = nullptr;
  DType type = DType::F16;          // F16, BF16 or F32
  int32_t group = 64;               // 32, 64 or 128
};
// One token's activations as the affine dot kernels read them, made once per
// matmul by affine_prepare for all rows: x; x4, x with each 32 values in the
// order a 4-bit step unpacks bytes (the low nibbles: values 0, 2, ..., 30,
// then the high ones: 1, 3, ..., 31), so no shuffle interleaves them back;
// and sum32, the sum of every 32 values (a group's Σx, which its bias
// multiplies, is the same for every row).
struct AffineX {
  const float* x = nullptr;
  const float* x4 = nullptr;     // n values
  const float* sum32 = nullptr;  // n / 32 values
};
// x4 and sum32 of x (n a multiple of 32).
void affine_prepare(const float* x, int64_t n, float* x4, float* sum32);
// Σ_i (s·q_i + z)·x_i over a row of n values (n a multiple of group). The
// scalar reference reads x.x only: a wrong x4 or sum32 shows as a SIMD kernel
// that differs from it.
using AffineDotFn = float (*)(const AffineRow& w, const AffineX& x, int64_t n);
// dst[i] = s·q_i + z.
using AffineDequantizeFn = void (*)(const AffineRow& w, float* dst, int64_t n);

// Row r of an MLX tensor (its type's bits are mlx_bits(t.type)).
inline AffineRow affine_row(const uint8_t* data, size_t row_stride, const GroupParams& g, int64_t cols, int64_t r) {
  const size_t per_row = static_cast<size_t>(cols / g.size) * (g.type == DType::F32 ? 4 : 2);
  return AffineRow{data + static_cast<size_t>(r) * row_stride, g.scales + static_cast<size_t>(r) * per_row,
                   g.biases + static_cast<size_t>(r) * per_row, g.type, g.size};
}

struct KernelTable {
  Isa isa;
  // Indexed by static_cast<uint32_t>(DType), size 32. nullptr = not supported.
  // n is the row length in elements and is a multiple of the block size.
  DequantizeRowFn dequantize_row[32];
  DotRowFn dot_row[32];
  // nullptr: the caller loops over dot_row (same bits, weights read m times).
  DotRowsFn dot_rows[32];
  // MLX affine types, indexed by bits (2..8; 7 is none).
  AffineDotFn affine_dot[9];
  AffineDequantizeFn affine_dequantize[9];
  // Plain float helpers used by attention / prefill.
  float (*dot_f32)(const float* a, const float* b, int64_t n);
  void (*axpy_f32)(float a, const float* x, float* y, int64_t n);  // y += a*x
  // The model families' elementwise and per-row ops (Backend::scale, mul,
  // gelu, softcap, layer_norm: the backend splits them across its threads).
  // SIMD tables share one source, cpu/vec_ops.h. x may equal y.
  void (*scale_f32)(float* x, int64_t n, float s);     // x *= s
  void (*mul_f32)(float* y, const float* x, int64_t n);  // y *= x
  void (*gelu_f32)(float* x, int64_t n);               // x = gelu_tanh(x) (kGelu*)
  void (*softcap_f32)(float* x, int64_t n, float cap);  // x = cap·tanh(x·(1/cap)), 1/cap rounded first
  // One row: out = (x - mean) / sqrt(var + eps) * w + b, mean and variance
  // summed in double (two passes).
  void (*layer_norm_f32)(const float* x, const float* w, const float* b, int64_t n, float eps, float* out);
};

// GELU's tanh approximation (transformers' gelu_pytorch_tanh):
// 0.5·x·(1 + tanh(kGeluSqrt2OverPi · (x + kGeluCubic · x³))).
inline constexpr float kGeluSqrt2OverPi = 0.7978845608028654f;
inline constexpr float kGeluCubic = 0.044715f;

// Table of one ISA; nullptr when the CPU or the build lacks it.
const KernelTable* kernels_for(Isa isa);
// The table of active_isa().
const KernelTable& kernels();

inline void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  kernels().dequantize_row[static_cast<uint32_t>(t)](src, dst, n);
}
inline float dot_row(DType t, const void* w, const float* x, int64_t n) {
  return kernels().dot_row[static_cast<uint32_t>(t)](w, x, n);
}

// Per-ISA table builders (defined in cpu/ref, cpu/x86, cpu/arm).
void fill_scalar_table(KernelTable& t);
void fill_avx2_table(KernelTable& t);    // only when LAYA_HAVE_X86 is defined
void fill_avx512_table(KernelTable& t);  // only when LAYA_HAVE_X86 is defined
void fill_neon_table(KernelTable& t);    // only when LAYA_HAVE_ARM is defined
// The MLX affine entries (cpu/ref/affine_ref.cpp, cpu/x86/affine_avx2.cpp,
// cpu/arm/affine_neon.cpp).
void fill_affine_scalar(KernelTable& t);
void fill_affine_avx2(KernelTable& t);   // only when LAYA_HAVE_X86 is defined
void fill_affine_neon(KernelTable& t);   // only on AArch64

}  // namespace laya::cpu
