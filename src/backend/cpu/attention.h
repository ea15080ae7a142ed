// Attention of one query token over the KV cache (float32 or fp16), for the
// query heads that share one KV head (GQA group): K/V rows are read once for
// the whole group. The scalar versions are the reference for the SIMD ones.
//
// Layout of one KV head in a block (see KvLayout): K in blocks of kKvBlock positions,
// each block (head_dim, kKvBlock) — element (position p, dim i) at
// k_index(p, i, hd) — so 16 positions' scores are the 16 lanes of one vector,
// without horizontal sums; V as (position, head_dim) rows.
//
// The Q8_0 cache (int8 values, a float32 scale per 32 values of a position,
// Q8_0's grouping) keeps the same shapes:
//   K block of 16 positions: int8 [hd][16], then float32 scales [hd/32][16]
//   V row of one position:   int8 [hd], then float32 scales [hd/32]
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/kernels.h"
#include "core/dtype.h"

namespace laya::cpu {

constexpr int64_t kKvBlock = 16;
constexpr int64_t k_index(int64_t p, int64_t i, int64_t hd) { return ((p / kKvBlock) * hd + i) * kKvBlock + p % kKvBlock; }
// Floats of score scratch one head needs for n_kv positions (whole blocks).
constexpr int64_t scores_stride(int64_t n_kv) { return (n_kv + kKvBlock - 1) / kKvBlock * kKvBlock; }
constexpr size_t q8_k_block_bytes(int64_t hd) { return static_cast<size_t>(hd * kKvBlock + hd / 32 * kKvBlock * 4); }
constexpr size_t q8_v_row_bytes(int64_t hd) { return static_cast<size_t>(hd + hd / 32 * 4); }
// Quantize position p's hd values (hd % 32 == 0) into a head's K / V slice.
void q8_store_k(uint8_t* k_slice, int64_t p, const float* x, int64_t hd);
void q8_store_v(uint8_t* v_slice, int64_t p, const float* x, int64_t hd);

// One KV head of one layer, spread over the pool's blocks: block b of the
// sequence holds positions [b * block_pos, (b + 1) * block_pos), its K slice
// at k(b) (blocked as above) and its V rows at v(b). Walking the blocks keeps
// every kernel's arithmetic and order the same as over one contiguous slice.
struct KvHeadBlocks {
  const uint8_t* k_base = nullptr;  // K of block id 0 for this (layer, head)
  const uint8_t* v_base = nullptr;
  const int32_t* ids = nullptr;     // the sequence's block table
  size_t block_bytes = 0;           // distance between consecutive block ids
  int64_t block_pos = 0;            // positions per block, a multiple of kKvBlock

  const uint8_t* k(int64_t b) const { return k_base + static_cast<size_t>(ids[b]) * block_bytes; }
  const uint8_t* v(int64_t b) const { return v_base + static_cast<size_t>(ids[b]) * block_bytes; }
  // One contiguous K slice and V rows as a single block (tests, benchmarks).
  static KvHeadBlocks contiguous(const void* k, const void* v) {
    static const int32_t kZero = 0;
    return {static_cast<const uint8_t*>(k), static_cast<const uint8_t*>(v), &kZero, 0, int64_t{1} << 40};
  }
};

// How a group attends besides its query: the score scale, the soft-cap
// (scores become softcap * tanh(score / softcap) before the softmax; 0: none)
// and the first position read (a sliding window: positions [first, n_kv);
// the cache before it is not read at all, except by a SIMD kernel for the
// rest of first's 16-position K block, whose weights it sets to 0).
struct AttendParams {
  float scale;
  float softcap = 0;
  int64_t first = 0;
};

// q: (group, hd) query heads; kv: this KV head's blocks, of the cache type the
// function is for (float32, fp16 or Q8_0); scores: scratch of
// group * scores_stride(n_kv) floats; out: (group, hd). 0 <= first < n_kv.
using AttendGroupFn = void (*)(const float* q, int group, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv,
                               const AttendParams& p, float* scores, float* out);

// Scalar references, one per cache type (fp16 values are widened exactly,
// arithmetic in float32).
void attend_group_scalar(const float* q, int group, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv,
                         const AttendParams& p, float* scores, float* out);
void attend_group_f16_scalar(const float* q, int group, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv,
                             const AttendParams& p, float* scores, float* out);
void attend_group_q8_scalar(const float* q, int group, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv,
                            const AttendParams& p, float* scores, float* out);
#if defined(LAYA_HAVE_X86)
// hd in {16, 32, 64, 128, 256} (Q8_0: {32, 64, 128, 256}), group <= 8.
void attend_group_avx2(const float* q, int group, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv,
                       const AttendParams& p, float* scores, float* out);
void attend_group_f16_avx2(const float* q, int group, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv,
                           const AttendParams& p, float* scores, float* out);
void attend_group_q8_avx2(const float* q, int group, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv,
                          const AttendParams& p, float* scores, float* out);
void attend_group_avx512(const float* q, int group, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv,
                         const AttendParams& p, float* scores, float* out);
void attend_group_f16_avx512(const float* q, int group, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv,
                             const AttendParams& p, float* scores, float* out);
void attend_group_q8_avx512(const float* q, int group, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv,
                            const AttendParams& p, float* scores, float* out);
#endif

// The fastest for this CPU, cache type (F32, F16, Q8_0) and shape, or the scalar one.
AttendGroupFn attend_group_for(DType type, int group, int64_t hd, Isa isa = active_isa());
// The scalar reference for a cache type.
AttendGroupFn attend_group_scalar_for(DType type);

}  // namespace laya::cpu
