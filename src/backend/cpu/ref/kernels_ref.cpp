// Scalar reference kernels: the truth every SIMD table is tested against.
//
// dequantize_row follows ggml's block layouts bit-exactly (same operations in
// the same order, so the same float results). dot_row dequantizes one block
// at a time and accumulates w*x in double, which is more accurate than any
// float accumulation order a SIMD kernel can use.
#include <cmath>
#include <cstring>

#include "backend/cpu/kernels.h"
#include "core/dtype.h"
#include "core/fp16.h"

namespace laya::cpu {
namespace {

// ---- dequantization ------------------------------------------------------------

void deq_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void deq_f16(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(s[i]);
}

void deq_bf16(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
}

void deq_block_q8_0(const BlockQ8_0& b, float* y) {
  const float d = fp16_to_f32(b.d);
  for (int j = 0; j < kQK8_0; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
}

void deq_block_q4_0(const BlockQ4_0& b, float* y) {
  const float d = fp16_to_f32(b.d);
  for (int j = 0; j < kQK4_0 / 2; ++j) {
    const int x0 = (b.qs[j] & 0x0F) - 8;
    const int x1 = (b.qs[j] >> 4) - 8;
    y[j] = static_cast<float>(x0) * d;
    y[j + kQK4_0 / 2] = static_cast<float>(x1) * d;
  }
}

void deq_block_q4_1(const BlockQ4_1& b, float* y) {
  const float d = fp16_to_f32(b.d);
  const float m = fp16_to_f32(b.m);
  for (int j = 0; j < kQK4_0 / 2; ++j) {
    const int x0 = b.qs[j] & 0x0F;
    const int x1 = b.qs[j] >> 4;
    y[j] = static_cast<float>(x0) * d + m;
    y[j + kQK4_0 / 2] = static_cast<float>(x1) * d + m;
  }
}

void deq_block_q5_0(const BlockQ5_0& b, float* y) {
  const float d = fp16_to_f32(b.d);
  uint32_t qh;
  std::memcpy(&qh, b.qh, sizeof(qh));
  for (int j = 0; j < kQK5_0 / 2; ++j) {
    const uint32_t xh0 = ((qh >> j) << 4) & 0x10;         // bit j      -> element j
    const uint32_t xh1 = (qh >> (j + 12)) & 0x10;         // bit j + 16 -> element j + 16
    const int x0 = static_cast<int>((b.qs[j] & 0x0F) | xh0) - 16;
    const int x1 = static_cast<int>((b.qs[j] >> 4) | xh1) - 16;
    y[j] = static_cast<float>(x0) * d;
    y[j + kQK5_0 / 2] = static_cast<float>(x1) * d;
  }
}

void deq_block_q5_1(const BlockQ5_1& b, float* y) {
  const float d = fp16_to_f32(b.d);
  const float m = fp16_to_f32(b.m);
  uint32_t qh;
  std::memcpy(&qh, b.qh, sizeof(qh));
  for (int j = 0; j < kQK5_0 / 2; ++j) {
    const uint32_t xh0 = ((qh >> j) << 4) & 0x10;
    const uint32_t xh1 = (qh >> (j + 12)) & 0x10;
    const int x0 = static_cast<int>((b.qs[j] & 0x0F) | xh0);
    const int x1 = static_cast<int>((b.qs[j] >> 4) | xh1);
    y[j] = static_cast<float>(x0) * d + m;
    y[j + kQK5_0 / 2] = static_cast<float>(x1) * d + m;
  }
}

// 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes.
inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void deq_block_q4_k(const BlockQ4_K& b, float* y) {
  const float d = fp16_to_f32(b.d);
  const float dmin = fp16_to_f32(b.dmin);
  const uint8_t* q = b.qs;
  int is = 0;
  for (int j = 0; j < kQK_K; j += 64) {
    uint8_t sc, m;
    get_scale_min_k4(is + 0, b.scales, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    get_scale_min_k4(is + 1, b.scales, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) y[l] = d1 * static_cast<float>(q[l] & 0x0F) - m1;
    for (int l = 0; l < 32; ++l) y[32 + l] = d2 * static_cast<float>(q[l] >> 4) - m2;
    q += 32;
    is += 2;
    y += 64;
  }
}

void deq_block_q5_k(const BlockQ5_K& b, float* y) {
  const float d = fp16_to_f32(b.d);
  const float dmin = fp16_to_f32(b.dmin);
  const uint8_t* ql = b.qs;
  const uint8_t* qh = b.qh;
  int is = 0;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0; j < kQK_K; j += 64) {
    uint8_t sc, m;
    get_scale_min_k4(is + 0, b.scales, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    get_scale_min_k4(is + 1, b.scales, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) {
      const int q = (ql[l] & 0x0F) + ((qh[l] & u1) ? 16 : 0);
      y[l] = d1 * static_cast<float>(q) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      const int q = (ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0);
      y[32 + l] = d2 * static_cast<float>(q) - m2;
    }
    ql += 32;
    is += 2;
    u1 = static_cast<uint8_t>(u1 << 2);
    u2 = static_cast<uint8_t>(u2 << 2);
    y += 64;
  }
}

void deq_block_q6_k(const BlockQ6_K& b, float* y) {
  const float d = fp16_to_f32(b.d);
  const uint8_t* ql = b.ql;
  const uint8_t* qh = b.qh;
  const int8_t* sc = b.scales;
  for (int n = 0; n < kQK_K; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = static_cast<int>((ql[l + 0] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = static_cast<int>((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = static_cast<int>((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = static_cast<int>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l + 0] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

template <typename Block, int QK, void (*kDeqBlock)(const Block&, float*)>
void deq_blocks(const void* src, float* dst, int64_t n) {
  const Block* b = static_cast<const Block*>(src);
  const int64_t nb = n / QK;
  for (int64_t i = 0; i < nb; ++i) kDeqBlock(b[i], dst + i * QK);
}

// ---- dot products ----------------------------------------------------------------

float dot_f32_ref(const float* a, const float* b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return static_cast<float>(s);
}

void axpy_f32_ref(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

float dot_row_f32(const void* w, const float* x, int64_t n) {
  return dot_f32_ref(static_cast<const float*>(w), x, n);
}

float dot_row_f16(const void* w, const float* x, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(w);
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(fp16_to_f32(s[i])) * x[i];
  return static_cast<float>(acc);
}

float dot_row_bf16(const void* w, const float* x, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(w);
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(bf16_to_f32(s[i])) * x[i];
  return static_cast<float>(acc);
}

template <typename Block, int QK, void (*kDeqBlock)(const Block&, float*)>
float dot_blocks(const void* w, const float* x, int64_t n) {
  const Block* b = static_cast<const Block*>(w);
  const int64_t nb = n / QK;
  float tmp[QK];
  double acc = 0.0;
  for (int64_t i = 0; i < nb; ++i) {
    kDeqBlock(b[i], tmp);
    const float* xb = x + i * QK;
    for (int j = 0; j < QK; ++j) acc += static_cast<double>(tmp[j]) * static_cast<double>(xb[j]);
  }
  return static_cast<float>(acc);
}

// ---- the model families' elementwise ops and LayerNorm --------------------------------------

void scale_ref(float* x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void mul_ref(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= x[i];
}

// In float32 with std::tanh, as transformers computes it (gelu_pytorch_tanh).
// The SIMD kernels use the equivalent x / (1 + e^(-2u)) (cpu/vec_ops.h), which
// is more accurate where u is very negative.
void gelu_ref(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + std::tanh(kGeluSqrt2OverPi * (v + kGeluCubic * v * v * v)));
  }
}

// Logit soft-capping in float32 with std::tanh (x times 1/cap, as the SIMD
// kernels round it; their tanh is vec_ops.h's rational function).
void softcap_ref(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] * inv);
}

// Mean, then the variance about it (two passes, in double as rms_norm's mean
// square), then one float row.
void layer_norm_ref(const float* x, const float* w, const float* b, int64_t n, float eps, float* out) {
  double sum = 0, ss = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) ss += (x[i] - mean) * (x[i] - mean);
  const float m = static_cast<float>(mean);
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] - m) * inv * w[i] + b[i];
}

template <typename Block, int QK, void (*kDeqBlock)(const Block&, float*)>
void set(KernelTable& t, DType type) {
  t.dequantize_row[static_cast<uint32_t>(type)] = &deq_blocks<Block, QK, kDeqBlock>;
  t.dot_row[static_cast<uint32_t>(type)] = &dot_blocks<Block, QK, kDeqBlock>;
}

}  // namespace

void fill_scalar_table(KernelTable& t) {
  t.isa = Isa::kScalar;
  for (int i = 0; i < 32; ++i) {
    t.dequantize_row[i] = nullptr;
    t.dot_row[i] = nullptr;
  }
  t.dequantize_row[static_cast<uint32_t>(DType::F32)] = &deq_f32;
  t.dot_row[static_cast<uint32_t>(DType::F32)] = &dot_row_f32;
  t.dequantize_row[static_cast<uint32_t>(DType::F16)] = &deq_f16;
  t.dot_row[static_cast<uint32_t>(DType::F16)] = &dot_row_f16;
  t.dequantize_row[static_cast<uint32_t>(DType::BF16)] = &deq_bf16;
  t.dot_row[static_cast<uint32_t>(DType::BF16)] = &dot_row_bf16;
  set<BlockQ8_0, kQK8_0, deq_block_q8_0>(t, DType::Q8_0);
  set<BlockQ4_0, kQK4_0, deq_block_q4_0>(t, DType::Q4_0);
  set<BlockQ4_1, kQK4_0, deq_block_q4_1>(t, DType::Q4_1);
  set<BlockQ5_0, kQK5_0, deq_block_q5_0>(t, DType::Q5_0);
  set<BlockQ5_1, kQK5_0, deq_block_q5_1>(t, DType::Q5_1);
  set<BlockQ4_K, kQK_K, deq_block_q4_k>(t, DType::Q4_K);
  set<BlockQ5_K, kQK_K, deq_block_q5_k>(t, DType::Q5_K);
  set<BlockQ6_K, kQK_K, deq_block_q6_k>(t, DType::Q6_K);
  fill_affine_scalar(t);
  t.dot_f32 = &dot_f32_ref;
  t.axpy_f32 = &axpy_f32_ref;
  t.scale_f32 = &scale_ref;
  t.mul_f32 = &mul_ref;
  t.gelu_f32 = &gelu_ref;
  t.softcap_f32 = &softcap_ref;
  t.layer_norm_f32 = &layer_norm_ref;
}

}  // namespace laya::cpu
