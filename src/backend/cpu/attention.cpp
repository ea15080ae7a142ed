#include "backend/cpu/attention.h"

#include <cmath>
#include <cstring>

#include "backend/cpu/kernels.h"
#include "core/fp16.h"

namespace laya::cpu {

namespace {

inline float widen(float x) { return x; }
inline float widen(uint16_t x) { return fp16_to_f32(x); }

template <typename T>
void attend_group_ref(const float* q, int group, int64_t hd, const T* k, const T* v, int64_t n_kv, float scale,
                      float* scores, float* out) {
  const int64_t ss = scores_stride(n_kv);
  for (int h = 0; h < group; ++h) {
    float* sc = scores + h * ss;
    float mx = -INFINITY;
    for (int64_t j = 0; j < n_kv; ++j) {
      float d = 0;
      for (int64_t i = 0; i < hd; ++i) d += widen(k[k_index(j, i, hd)]) * q[h * hd + i];
      sc[j] = d * scale;
      mx = sc[j] > mx ? sc[j] : mx;
    }
    double sum = 0;
    for (int64_t j = 0; j < n_kv; ++j) {
      sc[j] = std::exp(sc[j] - mx);
      sum += sc[j];
    }
    const float inv = static_cast<float>(1.0 / sum);
    float* o = out + h * hd;
    std::memset(o, 0, static_cast<size_t>(hd) * sizeof(float));
    for (int64_t j = 0; j < n_kv; ++j) {
      const float p = sc[j] * inv;
      for (int64_t i = 0; i < hd; ++i) o[i] += p * widen(v[j * hd + i]);
    }
  }
}

bool simd_shape(int group, int64_t hd) {
  return group >= 1 && group <= 8 && (hd == 16 || hd == 32 || hd == 64 || hd == 128 || hd == 256);
}

}  // namespace

void attend_group_scalar(const float* q, int group, int64_t hd, const float* k, const float* v, int64_t n_kv, float scale,
                         float* scores, float* out) {
  attend_group_ref(q, group, hd, k, v, n_kv, scale, scores, out);
}

void attend_group_f16_scalar(const float* q, int group, int64_t hd, const uint16_t* k, const uint16_t* v, int64_t n_kv,
                             float scale, float* scores, float* out) {
  attend_group_ref(q, group, hd, k, v, n_kv, scale, scores, out);
}

AttendGroupFn attend_group_for(int group, int64_t hd) {
#if defined(LAYA_HAVE_X86)
  if (active_isa() == Isa::kAvx512 && simd_shape(group, hd)) return attend_group_avx512;
#endif
  (void)simd_shape;
  (void)group;
  (void)hd;
  return attend_group_scalar;
}

AttendGroupF16Fn attend_group_f16_for(int group, int64_t hd) {
#if defined(LAYA_HAVE_X86)
  if (active_isa() == Isa::kAvx512 && simd_shape(group, hd)) return attend_group_f16_avx512;
#endif
  (void)group;
  (void)hd;
  return attend_group_f16_scalar;
}

}  // namespace laya::cpu
