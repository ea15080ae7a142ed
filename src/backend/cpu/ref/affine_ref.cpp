// Scalar reference kernels of MLX's affine group quantization (DType::MLX_Q*,
// core/dtype.h): the truth the SIMD kernels are tested against.
//
// Value i of a row is the `bits`-bit unsigned integer at bit i·bits of the
// row's little-endian bit stream (MLX packs 2/4/8 bits low bits first within
// each byte, and 3/5/6 bits as 8 or 4 values in 3 or 5 bytes: the same
// stream). A group's weight is w = s·q + z with s, z of that group, computed
// in float32 (one rounding after the product, one after the sum); the dot
// product accumulates w·x in double.
#include <cstring>

#include "backend/cpu/kernels.h"
#include "core/fp16.h"

namespace laya::cpu {
namespace {

float param(const void* p, DType type, int64_t i) {
  if (type == DType::F32) {
    float f;
    std::memcpy(&f, static_cast<const uint8_t*>(p) + i * 4, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, static_cast<const uint8_t*>(p) + i * 2, 2);
  return type == DType::BF16 ? bf16_to_f32(h) : fp16_to_f32(h);
}

// The value at bit offset i·bits. A value spans at most two bytes (bits ≤ 8),
// and the second is read only when the value reaches into it, so the last
// value of a row never reads past the row.
template <int kBits>
inline uint32_t value_at(const uint8_t* q, int64_t i) {
  const int64_t bit = i * kBits;
  const int64_t byte = bit / 8;
  const int shift = static_cast<int>(bit % 8);
  uint32_t v = q[byte] >> shift;
  if (shift + kBits > 8) v |= static_cast<uint32_t>(q[byte + 1]) << (8 - shift);
  return v & ((1u << kBits) - 1);
}

template <int kBits>
void affine_dequantize_ref(const AffineRow& w, float* dst, int64_t n) {
  for (int64_t g = 0; g < n / w.group; ++g) {
    const float s = param(w.scales, w.type, g), z = param(w.biases, w.type, g);
    for (int64_t j = g * w.group; j < (g + 1) * w.group; ++j) {
      const float sq = s * static_cast<float>(value_at<kBits>(w.q, j));
      dst[j] = sq + z;
    }
  }
}

template <int kBits>
float affine_dot_ref(const AffineRow& w, const AffineX& ax, int64_t n) {
  const float* x = ax.x;
  double acc = 0.0;
  float tmp[128];  // one group (group ≤ 128, checked by the loader)
  for (int64_t g = 0; g < n / w.group; ++g) {
    const int64_t pb = w.type == DType::F32 ? 4 : 2;  // bytes of a scale (and of a bias)
    const AffineRow one{w.q + g * w.group * kBits / 8, static_cast<const uint8_t*>(w.scales) + g * pb,
                        static_cast<const uint8_t*>(w.biases) + g * pb, w.type, w.group};
    affine_dequantize_ref<kBits>(one, tmp, w.group);
    const float* xg = x + g * w.group;
    for (int j = 0; j < w.group; ++j) acc += static_cast<double>(tmp[j]) * static_cast<double>(xg[j]);
  }
  return static_cast<float>(acc);
}

template <int kBits>
void set_bits(KernelTable& t) {
  t.affine_dot[kBits] = &affine_dot_ref<kBits>;
  t.affine_dequantize[kBits] = &affine_dequantize_ref<kBits>;
}

}  // namespace

void affine_prepare(const float* x, int64_t n, float* x4, float* sum32) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    float* o = x4 + b * 32;
    for (int k = 0; k < 16; ++k) {
      o[k] = xb[2 * k];
      o[16 + k] = xb[2 * k + 1];
    }
    float s = 0.0f;
    for (int k = 0; k < 32; ++k) s += xb[k];
    sum32[b] = s;
  }
}

void fill_affine_scalar(KernelTable& t) {
  for (int b = 0; b < 9; ++b) {
    t.affine_dot[b] = nullptr;
    t.affine_dequantize[b] = nullptr;
  }
  set_bits<2>(t);
  set_bits<3>(t);
  set_bits<4>(t);
  set_bits<5>(t);
  set_bits<6>(t);
  set_bits<8>(t);
}

}  // namespace laya::cpu
