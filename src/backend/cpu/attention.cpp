#include "backend/cpu/attention.h"

#include <cmath>
#include <cstring>

#include "backend/cpu/kernels.h"

namespace laya::cpu {

void attend_group_scalar(const float* q, int group, int64_t hd, const float* k, const float* v, int64_t kv_stride,
                         int64_t n_kv, float scale, float* scores, float* out) {
  for (int h = 0; h < group; ++h) {
    float* sc = scores + h * n_kv;
    float mx = -INFINITY;
    for (int64_t j = 0; j < n_kv; ++j) {
      float d = 0;
      for (int64_t i = 0; i < hd; ++i) d += k[j * kv_stride + i] * q[h * hd + i];
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
      for (int64_t i = 0; i < hd; ++i) o[i] += p * v[j * kv_stride + i];
    }
  }
}

AttendGroupFn attend_group_for(int group, int64_t hd) {
#if defined(LAYA_HAVE_X86)
  if (active_isa() == Isa::kAvx512 && hd % 16 == 0 && hd <= 256 && group <= 8) return attend_group_avx512;
#endif
  (void)group;
  (void)hd;
  return attend_group_scalar;
}

}  // namespace laya::cpu
