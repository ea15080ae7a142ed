// Element types of weights and activations. The numeric values are GGUF's
// (ggml_type) so a type read from a file needs no translation table.
#pragma once

#include <cstddef>
#include <cstdint>

namespace laya {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  BF16 = 30,
  // Not ggml types (a GGUF naming one is refused: is_ggml_type). U32: a
  // safetensors "U32" array, storage only. MLX_Q<b>: MLX's affine group
  // quantization (mx.quantize): each row's values are b-bit unsigned integers
  // q packed as one little-endian bit stream in uint32 words (value i at bit
  // i·b, so 2/4/8 bits are whole bytes, low bits first), and every `group`
  // consecutive values of a row share a scale s and a bias z: w = s·q + z.
  // The scales and biases are separate arrays (Tensor::groups).
  U32 = 0x100,
  MLX_Q2 = 0x102,
  MLX_Q3 = 0x103,
  MLX_Q4 = 0x104,
  MLX_Q5 = 0x105,
  MLX_Q6 = 0x106,
  MLX_Q8 = 0x108,
  Invalid = 0xffffffffu,
};

// A value a GGUF file may name (ggml's numbering); laya's own types are above it.
inline bool is_ggml_type(uint32_t raw) { return raw < 0x100; }
// Bits per value of an MLX affine type; 0 for any other type.
inline int mlx_bits(DType t) {
  const auto v = static_cast<uint32_t>(t);
  return v >= 0x102 && v <= 0x108 && v != 0x107 ? static_cast<int>(v - 0x100) : 0;
}
// The MLX affine type of `bits` (2, 3, 4, 5, 6, 8); Invalid for another width.
inline DType mlx_type(int bits) {
  return bits >= 2 && bits <= 8 && bits != 7 ? static_cast<DType>(0x100 + bits) : DType::Invalid;
}

struct DTypeInfo {
  const char* name;    // "Q4_K"
  int64_t block_size;  // elements per block (1 for plain floats)
  size_t block_bytes;  // bytes per block
  bool supported;      // laya can compute with it
};

// nullptr for a value that is no known type (e.g. read from a corrupt file).
const DTypeInfo* dtype_info(uint32_t raw);
inline const DTypeInfo& dtype_info(DType t) { return *dtype_info(static_cast<uint32_t>(t)); }
inline const char* dtype_name(DType t) { return dtype_info(t).name; }

// Bytes of one row of n elements; n must be a multiple of block_size. (An MLX
// type's block is 32 values, b uint32 words: its row holds the packed values
// only, its scales and biases are elsewhere.)
inline size_t row_bytes(DType t, int64_t n) {
  const DTypeInfo& i = dtype_info(t);
  return static_cast<size_t>(n / i.block_size) * i.block_bytes;
}

// ---- GGUF block layouts (bit-exact with ggml) --------------------------------
// fp16 values are stored as raw uint16_t bits.
constexpr int kQK4_0 = 32;
struct BlockQ4_0 { uint16_t d; uint8_t qs[kQK4_0 / 2]; };
struct BlockQ4_1 { uint16_t d; uint16_t m; uint8_t qs[kQK4_0 / 2]; };
constexpr int kQK5_0 = 32;
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[kQK5_0 / 2]; };
struct BlockQ5_1 { uint16_t d; uint16_t m; uint8_t qh[4]; uint8_t qs[kQK5_0 / 2]; };
constexpr int kQK8_0 = 32;
struct BlockQ8_0 { uint16_t d; int8_t qs[kQK8_0]; };
constexpr int kQK_K = 256;
constexpr int kKScaleSize = 12;
struct BlockQ4_K { uint16_t d; uint16_t dmin; uint8_t scales[kKScaleSize]; uint8_t qs[kQK_K / 2]; };
struct BlockQ5_K { uint16_t d; uint16_t dmin; uint8_t scales[kKScaleSize]; uint8_t qh[kQK_K / 8]; uint8_t qs[kQK_K / 2]; };
struct BlockQ6_K { uint8_t ql[kQK_K / 2]; uint8_t qh[kQK_K / 4]; int8_t scales[kQK_K / 16]; uint16_t d; };

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);

}  // namespace laya
