#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/kernels.h"
#include "core/fp16.h"

namespace laya::cpu {

namespace {

inline float widen(float x) { return x; }
inline float widen(uint16_t x) { return fp16_to_f32(x); }

// Softmax attention of the group's heads over positions [p.first, n_kv);
// kat(j, i) / vat(j, i) give the cached K / V value of position j, dimension
// i, whatever the layout.
template <typename KAt, typename VAt>
void attend_group_ref(const float* q, int group, int64_t hd, int64_t n_kv, const AttendParams& p, float* scores,
                      float* out, KAt kat, VAt vat) {
  const int64_t ss = scores_stride(n_kv);
  for (int h = 0; h < group; ++h) {
    float* sc = scores + h * ss;
    float mx = -INFINITY;
    for (int64_t j = p.first; j < n_kv; ++j) {
      float d = 0;
      for (int64_t i = 0; i < hd; ++i) d += kat(j, i) * q[h * hd + i];
      sc[j] = d * p.scale;
      if (p.softcap > 0) sc[j] = p.softcap * std::tanh(sc[j] / p.softcap);
      mx = sc[j] > mx ? sc[j] : mx;
    }
    double sum = 0;
    for (int64_t j = p.first; j < n_kv; ++j) {
      sc[j] = std::exp(sc[j] - mx);
      sum += sc[j];
    }
    const float inv = static_cast<float>(1.0 / sum);
    float* o = out + h * hd;
    std::memset(o, 0, static_cast<size_t>(hd) * sizeof(float));
    for (int64_t j = p.first; j < n_kv; ++j) {
      const float w = sc[j] * inv;
      for (int64_t i = 0; i < hd; ++i) o[i] += w * vat(j, i);
    }
  }
}

// The float32 / fp16 layouts: K blocked, V rows, in blocks of kv.block_pos positions.
template <typename T>
void attend_group_ref(const float* q, int group, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv,
                      const AttendParams& p, float* scores, float* out) {
  const int64_t bp = kv.block_pos;
  attend_group_ref(
      q, group, hd, n_kv, p, scores, out,
      [&](int64_t j, int64_t i) { return widen(reinterpret_cast<const T*>(kv.k(j / bp))[k_index(j % bp, i, hd)]); },
      [&](int64_t j, int64_t i) { return widen(reinterpret_cast<const T*>(kv.v(j / bp))[(j % bp) * hd + i]); });
}

// Element (position j, dim i) of a Q8_0 K slice / V slice, dequantized.
inline float q8_k_at(const uint8_t* k, int64_t j, int64_t i, int64_t hd) {
  const uint8_t* blk = k + static_cast<size_t>(j / kKvBlock) * q8_k_block_bytes(hd);
  const int64_t lane = j % kKvBlock;
  float d;
  std::memcpy(&d, blk + hd * kKvBlock + ((i / 32) * kKvBlock + lane) * 4, 4);
  return static_cast<float>(static_cast<int8_t>(blk[i * kKvBlock + lane])) * d;
}
inline float q8_v_at(const uint8_t* v, int64_t j, int64_t i, int64_t hd) {
  const uint8_t* row = v + static_cast<size_t>(j) * q8_v_row_bytes(hd);
  float d;
  std::memcpy(&d, row + hd + (i / 32) * 4, 4);
  return static_cast<float>(static_cast<int8_t>(row[i])) * d;
}

// Q8_0's rule: d = max|x| / 127, q = round(x / d).
inline void q8_quantize32(const float* x, int8_t* q, float* d) {
  float amax = 0;
  for (int k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(x[k]));
  *d = amax / 127.0f;
  const float id = *d > 0 ? 1.0f / *d : 0.0f;
  for (int k = 0; k < 32; ++k) q[k] = static_cast<int8_t>(std::roundf(x[k] * id));
}

bool simd_shape(int group, int64_t hd) {
  return group >= 1 && group <= 8 && (hd == 16 || hd == 32 || hd == 64 || hd == 128 || hd == 256);
}

}  // namespace

void attend_group_scalar(const float* q, int group, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv,
                         const AttendParams& p, float* scores, float* out) {
  attend_group_ref<float>(q, group, hd, kv, n_kv, p, scores, out);
}

void attend_group_f16_scalar(const float* q, int group, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv,
                             const AttendParams& p, float* scores, float* out) {
  attend_group_ref<uint16_t>(q, group, hd, kv, n_kv, p, scores, out);
}

void attend_group_q8_scalar(const float* q, int group, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv,
                            const AttendParams& p, float* scores, float* out) {
  const int64_t bp = kv.block_pos;
  attend_group_ref(
      q, group, hd, n_kv, p, scores, out,
      [&](int64_t j, int64_t i) { return q8_k_at(kv.k(j / bp), j % bp, i, hd); },
      [&](int64_t j, int64_t i) { return q8_v_at(kv.v(j / bp), j % bp, i, hd); });
}

void q8_store_k(uint8_t* k_slice, int64_t p, const float* x, int64_t hd) {
  uint8_t* blk = k_slice + static_cast<size_t>(p / kKvBlock) * q8_k_block_bytes(hd);
  const int64_t lane = p % kKvBlock;
  for (int64_t g = 0; g < hd / 32; ++g) {
    int8_t qs[32];
    float d;
    q8_quantize32(x + g * 32, qs, &d);
    for (int k = 0; k < 32; ++k) blk[(g * 32 + k) * kKvBlock + lane] = static_cast<uint8_t>(qs[k]);
    std::memcpy(blk + hd * kKvBlock + (g * kKvBlock + lane) * 4, &d, 4);
  }
}

void q8_store_v(uint8_t* v_slice, int64_t p, const float* x, int64_t hd) {
  uint8_t* row = v_slice + static_cast<size_t>(p) * q8_v_row_bytes(hd);
  for (int64_t g = 0; g < hd / 32; ++g) {
    float d;
    q8_quantize32(x + g * 32, reinterpret_cast<int8_t*>(row + g * 32), &d);
    std::memcpy(row + hd + g * 4, &d, 4);
  }
}

AttendGroupFn attend_group_scalar_for(DType type) {
  switch (type) {
    case DType::F16: return attend_group_f16_scalar;
    case DType::Q8_0: return attend_group_q8_scalar;
    default: return attend_group_scalar;
  }
}

AttendGroupFn attend_group_for(DType type, int group, int64_t hd, Isa isa) {
#if defined(LAYA_HAVE_X86)
  if (isa == Isa::kAvx512 && simd_shape(group, hd)) {
    switch (type) {
      case DType::F16: return attend_group_f16_avx512;
      case DType::Q8_0: if (hd % 32 == 0) return attend_group_q8_avx512; break;
      default: return attend_group_avx512;
    }
  }
  if (isa == Isa::kAvx2 && simd_shape(group, hd)) {
    switch (type) {
      case DType::F16: return attend_group_f16_avx2;
      case DType::Q8_0: if (hd % 32 == 0) return attend_group_q8_avx2; break;
      default: return attend_group_avx2;
    }
  }
#endif
  (void)simd_shape;
  (void)isa;
  (void)group;
  (void)hd;
  return attend_group_scalar_for(type);
}

}  // namespace laya::cpu
