// NEON (AArch64) kernels: F32, F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K dot_row /
// dequantize_row, dot_f32, axpy_f32, the MLX affine types (arm/affine_neon.cpp),
// and scale / mul / gelu / softcap / layer_norm (cpu/vec_ops.h). Everything
// else stays the scalar entry. Weights are
// dequantized to the reference's float values and multiplied with float32
// activations (never rounded to 8 bits).
#include "backend/cpu/kernels.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstring>

#include "backend/cpu/arm/vec_neon.h"
#include "backend/cpu/vec_ops.h"  // after the vector type: scale, mul, gelu, softcap, layer_norm
#include "core/dtype.h"
#include "core/fp16.h"

namespace laya::cpu {
namespace {

float dot_f32(const float* a, const float* b, int64_t n) {
  float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
  float32x4_t acc2 = vdupq_n_f32(0.0f), acc3 = vdupq_n_f32(0.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = vfmaq_f32(acc0, vld1q_f32(a + i), vld1q_f32(b + i));
    acc1 = vfmaq_f32(acc1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
    acc2 = vfmaq_f32(acc2, vld1q_f32(a + i + 8), vld1q_f32(b + i + 8));
    acc3 = vfmaq_f32(acc3, vld1q_f32(a + i + 12), vld1q_f32(b + i + 12));
  }
  for (; i + 4 <= n; i += 4) acc0 = vfmaq_f32(acc0, vld1q_f32(a + i), vld1q_f32(b + i));
  float s = vaddvq_f32(vaddq_f32(vaddq_f32(acc0, acc1), vaddq_f32(acc2, acc3)));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

void axpy_f32(float a, const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), a));
    vst1q_f32(y + i + 4, vfmaq_n_f32(vld1q_f32(y + i + 4), vld1q_f32(x + i + 4), a));
  }
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), a));
  for (; i < n; ++i) y[i] += a * x[i];
}

float dot_row_f32(const void* w, const float* x, int64_t n) {
  return dot_f32(static_cast<const float*>(w), x, n);
}

void deq_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

// 8 halves -> two float32x4 (exact conversion).
inline void load_f16x8(const uint16_t* p, float32x4_t* lo, float32x4_t* hi) {
  const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(p));
  *lo = vcvt_f32_f16(vget_low_f16(h));
  *hi = vcvt_high_f32_f16(h);
}

float dot_row_f16(const void* w, const float* x, int64_t n) {
  const uint16_t* p = static_cast<const uint16_t*>(w);
  float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
  float32x4_t acc2 = vdupq_n_f32(0.0f), acc3 = vdupq_n_f32(0.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    float32x4_t w0, w1, w2, w3;
    load_f16x8(p + i, &w0, &w1);
    load_f16x8(p + i + 8, &w2, &w3);
    acc0 = vfmaq_f32(acc0, w0, vld1q_f32(x + i));
    acc1 = vfmaq_f32(acc1, w1, vld1q_f32(x + i + 4));
    acc2 = vfmaq_f32(acc2, w2, vld1q_f32(x + i + 8));
    acc3 = vfmaq_f32(acc3, w3, vld1q_f32(x + i + 12));
  }
  for (; i + 8 <= n; i += 8) {
    float32x4_t w0, w1;
    load_f16x8(p + i, &w0, &w1);
    acc0 = vfmaq_f32(acc0, w0, vld1q_f32(x + i));
    acc1 = vfmaq_f32(acc1, w1, vld1q_f32(x + i + 4));
  }
  float s = vaddvq_f32(vaddq_f32(vaddq_f32(acc0, acc1), vaddq_f32(acc2, acc3)));
  for (; i < n; ++i) s += fp16_to_f32(p[i]) * x[i];
  return s;
}

void deq_f16(const void* src, float* dst, int64_t n) {
  const uint16_t* p = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    float32x4_t lo, hi;
    load_f16x8(p + i, &lo, &hi);
    vst1q_f32(dst + i, lo);
    vst1q_f32(dst + i + 4, hi);
  }
  for (; i < n; ++i) dst[i] = fp16_to_f32(p[i]);
}

// 16 signed bytes -> four float32x4 (exact).
inline void s8x16_to_f32(int8x16_t q, float32x4_t f[4]) {
  const int16x8_t lo = vmovl_s8(vget_low_s8(q));
  const int16x8_t hi = vmovl_high_s8(q);
  f[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
  f[1] = vcvtq_f32_s32(vmovl_high_s16(lo));
  f[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
  f[3] = vcvtq_f32_s32(vmovl_high_s16(hi));
}

// Quants of elements 0..15 and 16..31 of a block as signed bytes.
struct Q8_0U {
  using Block = BlockQ8_0;
  static void unpack(const Block& b, int8x16_t* q0, int8x16_t* q1) {
    *q0 = vld1q_s8(b.qs);
    *q1 = vld1q_s8(b.qs + 16);
  }
};

struct Q4_0U {
  using Block = BlockQ4_0;
  static void unpack(const Block& b, int8x16_t* q0, int8x16_t* q1) {
    const uint8x16_t v = vld1q_u8(b.qs);
    const int8x16_t eight = vdupq_n_s8(8);
    *q0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F))), eight);  // elements 0..15
    *q1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), eight);               // elements 16..31
  }
};

template <class U>
inline float32x4_t block_sum(const typename U::Block& b, const float* x) {
  int8x16_t q0, q1;
  U::unpack(b, &q0, &q1);
  float32x4_t f[4], g[4];
  s8x16_to_f32(q0, f);
  s8x16_to_f32(q1, g);
  float32x4_t s0 = vmulq_f32(f[0], vld1q_f32(x));
  float32x4_t s1 = vmulq_f32(f[1], vld1q_f32(x + 4));
  s0 = vfmaq_f32(s0, f[2], vld1q_f32(x + 8));
  s1 = vfmaq_f32(s1, f[3], vld1q_f32(x + 12));
  s0 = vfmaq_f32(s0, g[0], vld1q_f32(x + 16));
  s1 = vfmaq_f32(s1, g[1], vld1q_f32(x + 20));
  s0 = vfmaq_f32(s0, g[2], vld1q_f32(x + 24));
  s1 = vfmaq_f32(s1, g[3], vld1q_f32(x + 28));
  return vaddq_f32(s0, s1);
}

template <class U>
float dot_row_b32(const void* w, const float* x, int64_t n) {
  const typename U::Block* b = static_cast<const typename U::Block*>(w);
  const int64_t nb = n / 32;
  float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    acc0 = vfmaq_n_f32(acc0, block_sum<U>(b[i], x + i * 32), fp16_to_f32(b[i].d));
    acc1 = vfmaq_n_f32(acc1, block_sum<U>(b[i + 1], x + i * 32 + 32), fp16_to_f32(b[i + 1].d));
  }
  if (i < nb) acc0 = vfmaq_n_f32(acc0, block_sum<U>(b[i], x + i * 32), fp16_to_f32(b[i].d));
  return vaddvq_f32(vaddq_f32(acc0, acc1));
}

template <class U>
void deq_b32(const void* src, float* dst, int64_t n) {
  const typename U::Block* b = static_cast<const typename U::Block*>(src);
  const int64_t nb = n / 32;
  for (int64_t i = 0; i < nb; ++i) {
    int8x16_t q0, q1;
    U::unpack(b[i], &q0, &q1);
    float32x4_t f[4], g[4];
    s8x16_to_f32(q0, f);
    s8x16_to_f32(q1, g);
    const float d = fp16_to_f32(b[i].d);
    float* y = dst + i * 32;
    for (int k = 0; k < 4; ++k) {
      vst1q_f32(y + 4 * k, vmulq_n_f32(f[k], d));
      vst1q_f32(y + 16 + 4 * k, vmulq_n_f32(g[k], d));
    }
  }
}

// ---- BF16 ----------------------------------------------------------------------------

inline void load_bf16x8(const uint16_t* p, float32x4_t* lo, float32x4_t* hi) {
  const uint16x8_t v = vld1q_u16(p);
  *lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(v), 16));
  *hi = vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(v), 16));
}

float dot_row_bf16(const void* w, const float* x, int64_t n) {
  const uint16_t* p = static_cast<const uint16_t*>(w);
  float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
  float32x4_t acc2 = vdupq_n_f32(0.0f), acc3 = vdupq_n_f32(0.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    float32x4_t w0, w1, w2, w3;
    load_bf16x8(p + i, &w0, &w1);
    load_bf16x8(p + i + 8, &w2, &w3);
    acc0 = vfmaq_f32(acc0, w0, vld1q_f32(x + i));
    acc1 = vfmaq_f32(acc1, w1, vld1q_f32(x + i + 4));
    acc2 = vfmaq_f32(acc2, w2, vld1q_f32(x + i + 8));
    acc3 = vfmaq_f32(acc3, w3, vld1q_f32(x + i + 12));
  }
  float s = vaddvq_f32(vaddq_f32(vaddq_f32(acc0, acc1), vaddq_f32(acc2, acc3)));
  for (; i < n; ++i) s += bf16_to_f32(p[i]) * x[i];
  return s;
}

void deq_bf16(const void* src, float* dst, int64_t n) {
  const uint16_t* p = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    float32x4_t lo, hi;
    load_bf16x8(p + i, &lo, &hi);
    vst1q_f32(dst + i, lo);
    vst1q_f32(dst + i + 4, hi);
  }
  for (; i < n; ++i) dst[i] = bf16_to_f32(p[i]);
}

// ---- K-quants ------------------------------------------------------------------------

// 16 unsigned bytes -> four float32x4 (exact).
inline void u8x16_to_f32(uint8x16_t q, float32x4_t f[4]) {
  const uint16x8_t lo = vmovl_u8(vget_low_u8(q));
  const uint16x8_t hi = vmovl_high_u8(q);
  f[0] = vcvtq_f32_u32(vmovl_u16(vget_low_u16(lo)));
  f[1] = vcvtq_f32_u32(vmovl_high_u16(lo));
  f[2] = vcvtq_f32_u32(vmovl_u16(vget_low_u16(hi)));
  f[3] = vcvtq_f32_u32(vmovl_high_u16(hi));
}

// The 8 six-bit scales and mins of a Q4_K block times d / dmin.
inline void scales_mins_k4(const uint8_t* q, float d, float dmin, float* sc, float* mn) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = d * static_cast<float>(q[j] & 63);
    mn[j] = dmin * static_cast<float>(q[j + 4] & 63);
  }
  for (int j = 4; j < 8; ++j) {
    sc[j] = d * static_cast<float>((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
    mn[j] = dmin * static_cast<float>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Q4_K: element 64*jj + l (l < 32) is the low nibble of qs[32*jj + l] with scale
// 2*jj, element 64*jj + 32 + l the high nibble with scale 2*jj + 1.
// y = d1*q - m1: the product is exact, so this is the reference's value.
template <bool kStore>
inline void q4k_block(const BlockQ4_K& b, const float* x, float* y, float32x4_t acc[4]) {
  float sc[8], mn[8];
  scales_mins_k4(b.scales, fp16_to_f32(b.d), fp16_to_f32(b.dmin), sc, mn);
  const uint8x16_t m4 = vdupq_n_u8(0x0F);
  for (int jj = 0; jj < 4; ++jj) {
    const float32x4_t d1 = vdupq_n_f32(sc[2 * jj]), m1 = vdupq_n_f32(mn[2 * jj]);
    const float32x4_t d2 = vdupq_n_f32(sc[2 * jj + 1]), m2 = vdupq_n_f32(mn[2 * jj + 1]);
    for (int c = 0; c < 2; ++c) {
      const uint8x16_t v = vld1q_u8(b.qs + 32 * jj + 16 * c);
      float32x4_t lo[4], hi[4];
      u8x16_to_f32(vandq_u8(v, m4), lo);
      u8x16_to_f32(vshrq_n_u8(v, 4), hi);
      const int e = 64 * jj + 16 * c;
      for (int k = 0; k < 4; ++k) {
        const float32x4_t wl = vsubq_f32(vmulq_f32(lo[k], d1), m1);
        const float32x4_t wh = vsubq_f32(vmulq_f32(hi[k], d2), m2);
        if constexpr (kStore) {
          vst1q_f32(y + e + 4 * k, wl);
          vst1q_f32(y + e + 32 + 4 * k, wh);
        } else {
          acc[k & 1] = vfmaq_f32(acc[k & 1], wl, vld1q_f32(x + e + 4 * k));
          acc[2 + (k & 1)] = vfmaq_f32(acc[2 + (k & 1)], wh, vld1q_f32(x + e + 32 + 4 * k));
        }
      }
    }
  }
}

// Q6_K: per 128 elements, l < 32: q1 = ql[l] low | qh[l] bits 0-1, q2 = ql[l+32] low |
// bits 2-3, q3 = ql[l] high | bits 4-5, q4 = ql[l+32] high | bits 6-7; minus 32;
// elements l, l+32, l+64, l+96 with scales sc[l/16 + 0, 2, 4, 6].
template <bool kStore>
inline void q6k_block(const BlockQ6_K& b, const float* x, float* y, float32x4_t acc[4]) {
  const float d = fp16_to_f32(b.d);
  float ds[16];
  for (int k = 0; k < 16; ++k) ds[k] = d * static_cast<float>(b.scales[k]);
  const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(0x03);
  const int8x16_t k32 = vdupq_n_s8(32);
  for (int nn = 0; nn < 2; ++nn) {
    const uint8_t* ql = b.ql + 64 * nn;
    const uint8_t* qh = b.qh + 32 * nn;
    const float* s = ds + 8 * nn;
    for (int c = 0; c < 2; ++c) {
      const uint8x16_t a = vld1q_u8(ql + 16 * c);
      const uint8x16_t bq = vld1q_u8(ql + 32 + 16 * c);
      const uint8x16_t h = vld1q_u8(qh + 16 * c);
      uint8x16_t q[4];
      q[0] = vorrq_u8(vandq_u8(a, m4), vshlq_n_u8(vandq_u8(h, m3), 4));
      q[1] = vorrq_u8(vandq_u8(bq, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h, 2), m3), 4));
      q[2] = vorrq_u8(vshrq_n_u8(a, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h, 4), m3), 4));
      q[3] = vorrq_u8(vshrq_n_u8(bq, 4), vshlq_n_u8(vshrq_n_u8(h, 6), 4));
      for (int g = 0; g < 4; ++g) {
        float32x4_t f[4];
        s8x16_to_f32(vsubq_s8(vreinterpretq_s8_u8(q[g]), k32), f);
        const float scale = s[c + 2 * g];
        const int e = 128 * nn + 32 * g + 16 * c;
        for (int k = 0; k < 4; ++k) {
          const float32x4_t w = vmulq_n_f32(f[k], scale);
          if constexpr (kStore) {
            vst1q_f32(y + e + 4 * k, w);
          } else {
            acc[k] = vfmaq_f32(acc[k], w, vld1q_f32(x + e + 4 * k));
          }
        }
      }
    }
  }
}

template <class Block, void (*kBlock)(const Block&, const float*, float*, float32x4_t*)>
float dot_row_k(const void* w, const float* x, int64_t n) {
  const Block* b = static_cast<const Block*>(w);
  float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
  for (int64_t i = 0; i < n / kQK_K; ++i) kBlock(b[i], x + i * kQK_K, nullptr, acc);
  return vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
}

template <class Block, void (*kBlock)(const Block&, const float*, float*, float32x4_t*)>
void deq_k(const void* src, float* dst, int64_t n) {
  const Block* b = static_cast<const Block*>(src);
  float32x4_t unused[4];
  for (int64_t i = 0; i < n / kQK_K; ++i) kBlock(b[i], nullptr, dst + i * kQK_K, unused);
}

inline void set(KernelTable& t, DType type, DequantizeRowFn deq, DotRowFn dot) {
  t.dequantize_row[static_cast<uint32_t>(type)] = deq;
  t.dot_row[static_cast<uint32_t>(type)] = dot;
}

}  // namespace

void fill_neon_table(KernelTable& t) {
  t.isa = Isa::kNeon;
  set(t, DType::F32, &deq_f32, &dot_row_f32);
  set(t, DType::F16, &deq_f16, &dot_row_f16);
  set(t, DType::Q8_0, &deq_b32<Q8_0U>, &dot_row_b32<Q8_0U>);
  set(t, DType::Q4_0, &deq_b32<Q4_0U>, &dot_row_b32<Q4_0U>);
  set(t, DType::BF16, &deq_bf16, &dot_row_bf16);
  set(t, DType::Q4_K, &deq_k<BlockQ4_K, q4k_block<true>>, &dot_row_k<BlockQ4_K, q4k_block<false>>);
  set(t, DType::Q6_K, &deq_k<BlockQ6_K, q6k_block<true>>, &dot_row_k<BlockQ6_K, q6k_block<false>>);
  t.dot_f32 = &dot_f32;
  t.axpy_f32 = &axpy_f32;
  fill_affine_neon(t);
  vec::fill_ops<NeonVec>(t);
}

}  // namespace laya::cpu

#else  // not AArch64: no NEON kernels; the table stays the scalar one.

namespace laya::cpu {
void fill_neon_table(KernelTable& t) { t.isa = Isa::kNeon; }
}  // namespace laya::cpu

#endif
