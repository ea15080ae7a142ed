// Attention of one query token over the KV cache (float32 or fp16), for the
// query heads that share one KV head (GQA group): K/V rows are read once for
// the whole group. The scalar versions are the reference for the SIMD ones.
#pragma once

#include <cstdint>

namespace laya::cpu {

// q: (group, hd) query heads; k, v: n_kv rows with stride kv_stride floats
// (already offset to this KV head); scores: scratch of group * n_kv floats;
// out: (group, hd).
using AttendGroupFn = void (*)(const float* q, int group, int64_t hd, const float* k, const float* v, int64_t kv_stride,
                               int64_t n_kv, float scale, float* scores, float* out);

// The same over an fp16 cache (values widened exactly, arithmetic in float32).
using AttendGroupF16Fn = void (*)(const float* q, int group, int64_t hd, const uint16_t* k, const uint16_t* v,
                                  int64_t kv_stride, int64_t n_kv, float scale, float* scores, float* out);

void attend_group_scalar(const float* q, int group, int64_t hd, const float* k, const float* v, int64_t kv_stride,
                         int64_t n_kv, float scale, float* scores, float* out);
void attend_group_f16_scalar(const float* q, int group, int64_t hd, const uint16_t* k, const uint16_t* v,
                             int64_t kv_stride, int64_t n_kv, float scale, float* scores, float* out);
#if defined(LAYA_HAVE_X86)
// hd % 16 == 0, group <= 8.
void attend_group_avx512(const float* q, int group, int64_t hd, const float* k, const float* v, int64_t kv_stride,
                         int64_t n_kv, float scale, float* scores, float* out);
void attend_group_f16_avx512(const float* q, int group, int64_t hd, const uint16_t* k, const uint16_t* v,
                             int64_t kv_stride, int64_t n_kv, float scale, float* scores, float* out);
#endif

// The fastest for this CPU and shape, or the scalar one.
AttendGroupFn attend_group_for(int group, int64_t hd);
AttendGroupF16Fn attend_group_f16_for(int group, int64_t hd);

}  // namespace laya::cpu
