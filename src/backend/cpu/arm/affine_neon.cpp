// NEON (AArch64) kernels of MLX's affine group quantization (DType::MLX_Q*;
// the scalar truth is cpu/ref/affine_ref.cpp): x86/affine_avx2.cpp's scheme
// on 4-lane vectors. The group layout is kept: per group the kernel sums q·x
// in float32 lanes and adds s·Σq·x + z·Σx, with Σx from AffineX::sum32, so no
// weight is dequantized to memory. 4 bits read x in the order their bytes
// unpack (AffineX::x4: the low nibbles, then the high ones, no interleave),
// 8 bits a byte a value; 2/3/5/6 bits unpack with scalar shifts (correct, not
// tuned: MLX models are almost all 4 or 8 bits).
// Dequantization (the prefill's tiles) gives the reference's bits for F16 and
// BF16 scales: s·q is exact in float32, so one fused s·q + z rounds as the
// reference's product-then-sum does.
#include "backend/cpu/kernels.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstring>

#include "core/fp16.h"

namespace laya::cpu {
namespace {

inline float param(const void* p, DType type, int64_t i) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  if (type == DType::F32) {
    float f;
    std::memcpy(&f, b + i * 4, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, b + i * 2, 2);
  return type == DType::F16 ? fp16_to_f32(h) : bf16_to_f32(h);
}

// 16 bytes as four vectors of 4 floats (the bytes' unsigned values), in order.
inline void u8x16_to_f32(uint8x16_t v, float32x4_t f[4]) {
  const uint16x8_t lo = vmovl_u8(vget_low_u8(v)), hi = vmovl_high_u8(v);
  f[0] = vcvtq_f32_u32(vmovl_u16(vget_low_u16(lo)));
  f[1] = vcvtq_f32_u32(vmovl_high_u16(lo));
  f[2] = vcvtq_f32_u32(vmovl_u16(vget_low_u16(hi)));
  f[3] = vcvtq_f32_u32(vmovl_high_u16(hi));
}

// 32 values from bit 0 of q (32·bits/8 bytes) as eight vectors of 4 floats:
// in order, or with kX4 a 4-bit step in AffineX::x4's order (values 0, 2,
// ..., 30, then 1, 3, ..., 31: the low nibbles, then the high ones).
template <int kBits, bool kX4>
inline void unpack32(const uint8_t* q, float32x4_t f[8]) {
  if constexpr (kBits == 4) {
    const uint8x16_t b = vld1q_u8(q);
    const uint8x16_t lo = vandq_u8(b, vdupq_n_u8(0x0F)), hi = vshrq_n_u8(b, 4);
    u8x16_to_f32(kX4 ? lo : vzip1q_u8(lo, hi), f);
    u8x16_to_f32(kX4 ? hi : vzip2q_u8(lo, hi), f + 4);
  } else if constexpr (kBits == 8) {
    u8x16_to_f32(vld1q_u8(q), f);
    u8x16_to_f32(vld1q_u8(q + 16), f + 4);
  } else {
    alignas(16) uint32_t v[32];
    for (int i = 0; i < 32; ++i) {
      const int bit = i * kBits, byte = bit / 8, shift = bit % 8;
      uint32_t x = q[byte] >> shift;
      if (shift + kBits > 8) x |= static_cast<uint32_t>(q[byte + 1]) << (8 - shift);
      v[i] = x & ((1u << kBits) - 1);
    }
    for (int k = 0; k < 8; ++k) f[k] = vcvtq_f32_u32(vld1q_u32(v + 4 * k));
  }
}

// Σq·x of 32 values in two chains (x in x4's order for 4 bits).
template <int kBits>
inline float32x4_t step32(const uint8_t* q, const float* x) {
  float32x4_t f[8];
  unpack32<kBits, true>(q, f);
  float32x4_t s0 = vmulq_f32(f[0], vld1q_f32(x)), s1 = vmulq_f32(f[1], vld1q_f32(x + 4));
  for (int k = 2; k < 8; k += 2) {
    s0 = vfmaq_f32(s0, f[k], vld1q_f32(x + 4 * k));
    s1 = vfmaq_f32(s1, f[k + 1], vld1q_f32(x + 4 * k + 4));
  }
  return vaddq_f32(s0, s1);
}

// One group of kSteps·32 values: Σq·x in vector lanes, Σx from sum32.
template <int kBits, int kSteps>
inline float32x4_t group_qx(const uint8_t* q, const float* x, const float* sum32, float* xs) {
  constexpr int kStepBytes = 32 * kBits / 8;
  float32x4_t aq = step32<kBits>(q, x);
  float s = sum32[0];
  for (int j = 1; j < kSteps; ++j) {
    aq = vaddq_f32(aq, step32<kBits>(q + j * kStepBytes, x + 32 * j));
    s += sum32[j];
  }
  *xs = s;
  return aq;
}

// Per group: Σq·x times the scale, even and odd groups into two vector
// accumulators; the bias times the group's Σx in a scalar.
template <int kBits, int kSteps>
float affine_dot_g(const AffineRow& w, const AffineX& ax, int64_t n) {
  constexpr int kGroup = 32 * kSteps, kGroupBytes = kGroup * kBits / 8;
  const uint8_t* q = w.q;
  const float* x = kBits == 4 ? ax.x4 : ax.x;
  const float* sum32 = ax.sum32;
  float32x4_t tot0 = vdupq_n_f32(0.0f), tot1 = vdupq_n_f32(0.0f);
  float bias_sum = 0.0f;
  auto group = [&](int64_t g, float32x4_t* tot) {
    float xs;
    const float32x4_t a = group_qx<kBits, kSteps>(q + g * kGroupBytes, x + g * kGroup, sum32 + g * kSteps, &xs);
    *tot = vfmaq_n_f32(*tot, a, param(w.scales, w.type, g));
    bias_sum += param(w.biases, w.type, g) * xs;
  };
  const int64_t ng = n / kGroup;
  int64_t g = 0;
  for (; g + 2 <= ng; g += 2) {
    group(g, &tot0);
    group(g + 1, &tot1);
  }
  if (g < ng) group(g, &tot0);
  return vaddvq_f32(vaddq_f32(tot0, tot1)) + bias_sum;
}

template <int kBits>
float affine_dot(const AffineRow& w, const AffineX& ax, int64_t n) {
  switch (w.group) {
    case 32: return affine_dot_g<kBits, 1>(w, ax, n);
    case 64: return affine_dot_g<kBits, 2>(w, ax, n);
    default: return affine_dot_g<kBits, 4>(w, ax, n);  // 128 (the loader allows no other)
  }
}

template <int kBits>
void affine_dequantize(const AffineRow& w, float* dst, int64_t n) {
  constexpr int kStepBytes = 32 * kBits / 8;
  const uint8_t* q = w.q;
  for (int64_t g = 0; g < n / w.group; ++g) {
    const float s = param(w.scales, w.type, g);
    const float32x4_t z = vdupq_n_f32(param(w.biases, w.type, g));
    for (int j = 0; j < w.group; j += 32, q += kStepBytes, dst += 32) {
      float32x4_t f[8];
      unpack32<kBits, false>(q, f);
      for (int k = 0; k < 8; ++k) vst1q_f32(dst + 4 * k, vfmaq_n_f32(z, f[k], s));
    }
  }
}

template <int kBits>
void set_bits(KernelTable& t) {
  t.affine_dot[kBits] = &affine_dot<kBits>;
  t.affine_dequantize[kBits] = &affine_dequantize<kBits>;
}

}  // namespace

void fill_affine_neon(KernelTable& t) {
  set_bits<2>(t);
  set_bits<3>(t);
  set_bits<4>(t);
  set_bits<5>(t);
  set_bits<6>(t);
  set_bits<8>(t);
}

}  // namespace laya::cpu

#endif  // __aarch64__
