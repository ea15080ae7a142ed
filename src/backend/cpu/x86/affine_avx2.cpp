// AVX2 + FMA + F16C kernels of MLX's affine group quantization (DType::MLX_Q*;
// the scalar truth is cpu/ref/affine_ref.cpp). Compiled with -mavx2 -mfma
// -mf16c; installed only after a runtime CPU check (kernels.cpp).
//
// The group layout is kept: per group the kernel sums q·x in float32 vector
// lanes and adds s·Σq·x + z·Σx, with Σx from AffineX::sum32 (made once per
// matmul), so a group's scale and bias cost two multiply-adds whatever its
// size, and no weight is dequantized to memory. 4 bits read x in the order
// their bytes unpack (AffineX::x4: no shuffle), 8 bits one byte a value;
// 2/3/5/6 bits unpack with scalar shifts (correct, not tuned: MLX models are
// almost all 4 or 8 bits).
// Dequantization (the prefill's tiles) gives the reference's bits for F16 and
// BF16 scales: s·q is exact in float32 (≤ 11 + 8 significant bits), so one
// fused s·q + z rounds as the reference's product-then-sum does.
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/kernels.h"

namespace laya::cpu {
namespace {

// Local helpers (no shared inline functions: an out-of-line copy compiled with
// AVX flags could be picked by the linker for other translation units).
inline float param(const void* p, DType type, int64_t i) {
  const uint8_t* b = static_cast<const uint8_t*>(p);
  if (type == DType::F32) {
    float f;
    std::memcpy(&f, b + i * 4, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, b + i * 2, 2);
  if (type == DType::F16) return _cvtsh_ss(h);
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float hsum(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

inline __m256 u8x8(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)); }

// 32 values of 4 bits (16 bytes) as four vectors of 8 floats in AffineX::x4's
// order: values 0, 2, ..., 14 | 16, ..., 30 | 1, 3, ..., 15 | 17, ..., 31.
inline void unpack32_q4_x4(const uint8_t* q, __m256 f[4]) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  const __m256i a = _mm256_cvtepu8_epi32(v), b = _mm256_cvtepu8_epi32(_mm_srli_si128(v, 8));
  const __m256i m4 = _mm256_set1_epi32(0x0F);
  f[0] = _mm256_cvtepi32_ps(_mm256_and_si256(a, m4));
  f[1] = _mm256_cvtepi32_ps(_mm256_and_si256(b, m4));
  f[2] = _mm256_cvtepi32_ps(_mm256_srli_epi32(a, 4));
  f[3] = _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4));
}

// 32 values of 4 bits in order (for dequantization).
inline void unpack32_q4(const uint8_t* q, __m256 f[4]) {
  const __m128i m4 = _mm_set1_epi8(0x0F);
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  const __m128i lo = _mm_and_si128(b, m4), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m4);
  const __m128i v0 = _mm_unpacklo_epi8(lo, hi), v1 = _mm_unpackhi_epi8(lo, hi);  // values 0-15, 16-31
  f[0] = u8x8(v0);
  f[1] = u8x8(_mm_srli_si128(v0, 8));
  f[2] = u8x8(v1);
  f[3] = u8x8(_mm_srli_si128(v1, 8));
}

// 32 values of 8 bits (32 bytes).
inline void unpack32_q8(const uint8_t* q, __m256 f[4]) {
  for (int k = 0; k < 4; ++k) f[k] = u8x8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + 8 * k)));
}

// Any width: 32 values from bit 0 of q (32·bits/8 bytes, a whole number).
template <int kBits>
inline void unpack32_any(const uint8_t* q, __m256 f[4]) {
  alignas(32) int32_t v[32];
  for (int i = 0; i < 32; ++i) {
    const int bit = i * kBits, byte = bit / 8, shift = bit % 8;
    uint32_t x = q[byte] >> shift;
    if (shift + kBits > 8) x |= static_cast<uint32_t>(q[byte + 1]) << (8 - shift);
    v[i] = static_cast<int32_t>(x & ((1u << kBits) - 1));
  }
  for (int k = 0; k < 4; ++k) f[k] = _mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(v + 8 * k)));
}

template <int kBits>
inline void unpack32(const uint8_t* q, __m256 f[4]) {
  if constexpr (kBits == 4) unpack32_q4(q, f);
  else if constexpr (kBits == 8) unpack32_q8(q, f);
  else unpack32_any<kBits>(q, f);
}

// Σq·x of 32 values in two short chains (the products of a step are
// independent of the previous step's: the loop is not bound by FMA latency).
template <int kBits>
inline __m256 step32(const uint8_t* q, const float* x) {
  __m256 f[4];
  if constexpr (kBits == 4) unpack32_q4_x4(q, f);
  else unpack32<kBits>(q, f);
  __m256 s0 = _mm256_mul_ps(f[0], _mm256_loadu_ps(x));
  __m256 s1 = _mm256_mul_ps(f[1], _mm256_loadu_ps(x + 8));
  s0 = _mm256_fmadd_ps(f[2], _mm256_loadu_ps(x + 16), s0);
  s1 = _mm256_fmadd_ps(f[3], _mm256_loadu_ps(x + 24), s1);
  return _mm256_add_ps(s0, s1);
}

// One group of kSteps·32 values: Σq·x in vector lanes, Σx from sum32.
template <int kBits, int kSteps>
inline __m256 group_qx(const uint8_t* q, const float* x, const float* sum32, float* xs) {
  constexpr int kStepBytes = 32 * kBits / 8;
  __m256 aq = step32<kBits>(q, x);
  float s = sum32[0];
  for (int j = 1; j < kSteps; ++j) {
    aq = _mm256_add_ps(aq, step32<kBits>(q + j * kStepBytes, x + 32 * j));
    s += sum32[j];
  }
  *xs = s;
  return aq;
}

// Per group: Σq·x times the scale, even and odd groups into two vector
// accumulators (two chains across the row); the bias times the group's Σx in
// a scalar. The group size is a template argument so the steps unroll.
template <int kBits, int kSteps>
float affine_dot_g(const AffineRow& w, const AffineX& ax, int64_t n) {
  constexpr int kGroup = 32 * kSteps, kGroupBytes = kGroup * kBits / 8;
  const uint8_t* q = w.q;
  const float* x = kBits == 4 ? ax.x4 : ax.x;
  const float* sum32 = ax.sum32;
  __m256 tot0 = _mm256_setzero_ps(), tot1 = _mm256_setzero_ps();
  float bias_sum = 0.0f, xs = 0.0f;
  const int64_t ng = n / kGroup;
  int64_t g = 0;
  for (; g + 2 <= ng; g += 2, q += 2 * kGroupBytes, x += 2 * kGroup, sum32 += 2 * kSteps) {
    const __m256 a0 = group_qx<kBits, kSteps>(q, x, sum32, &xs);
    tot0 = _mm256_fmadd_ps(_mm256_set1_ps(param(w.scales, w.type, g)), a0, tot0);
    bias_sum += param(w.biases, w.type, g) * xs;
    const __m256 a1 = group_qx<kBits, kSteps>(q + kGroupBytes, x + kGroup, sum32 + kSteps, &xs);
    tot1 = _mm256_fmadd_ps(_mm256_set1_ps(param(w.scales, w.type, g + 1)), a1, tot1);
    bias_sum += param(w.biases, w.type, g + 1) * xs;
  }
  if (g < ng) {
    const __m256 a0 = group_qx<kBits, kSteps>(q, x, sum32, &xs);
    tot0 = _mm256_fmadd_ps(_mm256_set1_ps(param(w.scales, w.type, g)), a0, tot0);
    bias_sum += param(w.biases, w.type, g) * xs;
  }
  return hsum(_mm256_add_ps(tot0, tot1)) + bias_sum;
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
    const __m256 s = _mm256_set1_ps(param(w.scales, w.type, g)), z = _mm256_set1_ps(param(w.biases, w.type, g));
    for (int j = 0; j < w.group; j += 32, q += kStepBytes, dst += 32) {
      __m256 f[4];
      unpack32<kBits>(q, f);
      for (int k = 0; k < 4; ++k) _mm256_storeu_ps(dst + 8 * k, _mm256_fmadd_ps(f[k], s, z));
    }
  }
}

template <int kBits>
void set_bits(KernelTable& t) {
  t.affine_dot[kBits] = &affine_dot<kBits>;
  t.affine_dequantize[kBits] = &affine_dequantize<kBits>;
}

}  // namespace

void fill_affine_avx2(KernelTable& t) {
  set_bits<2>(t);
  set_bits<3>(t);
  set_bits<4>(t);
  set_bits<5>(t);
  set_bits<6>(t);
  set_bits<8>(t);
}

}  // namespace laya::cpu
