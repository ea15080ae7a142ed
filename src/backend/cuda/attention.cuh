// Attention over the block pool, RoPE and the KV-cache stores: the device
// bodies shared by ops.cu's kernels and the persistent decode kernel
// (persistent.cu), which runs them as instructions with virtual block
// indices. Layouts are the CPU backend's (cpu/attention.h).
#pragma once

#include "backend/cuda/dequant.cuh"

namespace laya::cuda {

constexpr int kKvBlock = 16;  // K is stored in blocks of 16 positions (cpu::kKvBlock)

// Rotates the pair of dims (ia, ib) of one head's vector v, pair i of
// position `pos`; writes the rotated values to v and returns them.
struct Rotated {
  int64_t ia, ib;
  float a, b;
};
__device__ __forceinline__ Rotated rotate_pair(float* v, int64_t i, int64_t hd, int64_t pos, const float* __restrict__ cs,
                                               const float* __restrict__ sn, int64_t half, bool interleaved) {
  const float c = cs[pos * half + i], s = sn[pos * half + i];
  const int64_t ia = interleaved ? 2 * i : i, ib = interleaved ? 2 * i + 1 : i + hd / 2;
  const float a = __ldcg(v + ia), b = __ldcg(v + ib);
  const float ra = a * c - b * s, rb = interleaved ? a * s + b * c : b * c + a * s;
  v[ia] = ra;
  v[ib] = rb;
  return Rotated{ia, ib, ra, rb};
}


// ---- KV cache ------------------------------------------------------------------------------------
__device__ __forceinline__ uint8_t* k_slice(const KvArgs& kv, int64_t pos, int64_t g) {
  return kv.pool + static_cast<size_t>(kv.ids[pos / kv.block_pos]) * kv.block_bytes + kv.k_off +
         static_cast<size_t>(g) * kv.head_bytes;
}
__device__ __forceinline__ uint8_t* v_slice(const KvArgs& kv, int64_t pos, int64_t g) {
  return kv.pool + static_cast<size_t>(kv.ids[pos / kv.block_pos]) * kv.block_bytes + kv.v_off +
         static_cast<size_t>(g) * kv.head_bytes;
}
__device__ __forceinline__ size_t q8_k_block_bytes(int64_t hd) { return static_cast<size_t>(hd * kKvBlock + hd / 32 * kKvBlock * 4); }
__device__ __forceinline__ size_t q8_v_row_bytes(int64_t hd) { return static_cast<size_t>(hd + hd / 32 * 4); }

// One value of k and of v at dim d of KV head g, position p, into an F32 / F16 cache.
__device__ __forceinline__ void store_kv_value(const KvArgs& kv, int64_t p, int64_t g, int64_t d, float kval, float vval) {
  const int64_t hd = kv.head_dim, slot = p % kv.block_pos;
  const int64_t ki = ((slot / kKvBlock) * hd + d) * kKvBlock + slot % kKvBlock;  // cpu::k_index
  if (kv.type == DType::F16) {
    reinterpret_cast<__half*>(k_slice(kv, p, g))[ki] = __float2half_rn(kval);
    reinterpret_cast<__half*>(v_slice(kv, p, g))[slot * hd + d] = __float2half_rn(vval);
  } else {
    reinterpret_cast<float*>(k_slice(kv, p, g))[ki] = kval;
    reinterpret_cast<float*>(v_slice(kv, p, g))[slot * hd + d] = vval;
  }
}


// K value (position slot of a block's slice, dim i) and V value, whatever the cache type.
__device__ __forceinline__ float k_at(const KvArgs& kv, const uint8_t* ks, int64_t slot, int64_t i) {
  const int64_t hd = kv.head_dim;
  if (kv.type == DType::Q8_0) {
    const uint8_t* blk = ks + static_cast<size_t>(slot / kKvBlock) * q8_k_block_bytes(hd);
    const int64_t lp = slot % kKvBlock;
    const float d = *reinterpret_cast<const float*>(blk + hd * kKvBlock + ((i / 32) * kKvBlock + lp) * 4);
    return static_cast<float>(static_cast<int8_t>(blk[i * kKvBlock + lp])) * d;
  }
  const int64_t ki = ((slot / kKvBlock) * hd + i) * kKvBlock + slot % kKvBlock;
  if (kv.type == DType::F16) return __half2float(reinterpret_cast<const __half*>(ks)[ki]);
  return reinterpret_cast<const float*>(ks)[ki];
}
__device__ __forceinline__ float v_at(const KvArgs& kv, const uint8_t* vs, int64_t slot, int64_t i) {
  const int64_t hd = kv.head_dim;
  if (kv.type == DType::Q8_0) {
    const uint8_t* row = vs + static_cast<size_t>(slot) * q8_v_row_bytes(hd);
    return static_cast<float>(static_cast<int8_t>(row[i])) * *reinterpret_cast<const float*>(row + hd + (i / 32) * 4);
  }
  if (kv.type == DType::F16) return __half2float(reinterpret_cast<const __half*>(vs)[slot * hd + i]);
  return reinterpret_cast<const float*>(vs)[slot * hd + i];
}

__device__ __forceinline__ int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }

constexpr int kAttnWarps = 8;  // a decode step has one block per KV head: its warps are the parallelism
constexpr int kMaxG = 8;  // query heads per block (a larger GQA group takes several blocks)

// How a query scores positions besides its own: the scale, soft-capping
// (cap · tanh(s / cap); 0: none) and a sliding window (positions kept; 0: all).
struct AttnScore {
  float scale, softcap;
  int64_t window;
};
// The same with the window resolved for one query: the first position it keeps.
struct AttnParams {
  float scale, softcap;
  int64_t first;
};

// One warp's online-softmax step over chunk c (16 positions) of KV head g for
// the nh query heads in qs: m, l, acc are the warp's running max, sum and
// output (lane l holds dims l, l + 32, ...). Positions before ap.first (the
// chunk a window starts in) and from n_kv on weigh 0.
template <int ND>
__device__ __forceinline__ void attend_chunk(const KvArgs& kv, const float* qs, int nh, int64_t g, int64_t c,
                                             int64_t n_kv, const AttnParams& ap, int lane, float* m, float* l,
                                             float (*acc)[ND]) {
  constexpr int HD = ND * 32;
  const int p = lane & 15, dh = (lane >> 4) * (HD / 2);
  const int64_t pos = c * kKvBlock, slot0 = pos % kv.block_pos;
  const uint8_t* ks = k_slice(kv, pos, g);
  const uint8_t* vs = v_slice(kv, pos, g);
  const int valid = static_cast<int>((n_kv - pos < kKvBlock ? n_kv - pos : kKvBlock));
  const int lead = static_cast<int>(ap.first > pos ? ap.first - pos : 0);  // < 16: the chunk holds first
  float sc[kMaxG];
#pragma unroll
  for (int h = 0; h < kMaxG; ++h) sc[h] = 0.f;
  // Unrolled so that 16 positions' keys are in flight at once: a decode step's
  // attention is latency, not bandwidth (~1 MB of cache per layer).
#pragma unroll 16
  for (int i = 0; i < HD / 2; ++i) {
    const float kval = k_at(kv, ks, slot0 + p, dh + i);
#pragma unroll
    for (int h = 0; h < kMaxG; ++h)
      if (h < nh) sc[h] += qs[h * HD + dh + i] * kval;
  }
  float e[kMaxG];
#pragma unroll
  for (int h = 0; h < kMaxG; ++h) {
    if (h >= nh) continue;
    float s = (sc[h] + __shfl_xor_sync(0xffffffffu, sc[h], 16)) * ap.scale;
    if (ap.softcap > 0.f) s = ap.softcap * tanhf(s / ap.softcap);
    const bool in = p >= lead && p < valid;
    if (!in) s = -INFINITY;  // past n_kv never stored: selected away, not multiplied (the bytes may be NaN)
    float cm = s;
    for (int o = 8; o > 0; o >>= 1) cm = fmaxf(cm, __shfl_xor_sync(0xffffffffu, cm, o));
    const float mn = fmaxf(m[h], cm);
    const float corr = m[h] == -INFINITY ? 0.f : expf(m[h] - mn);
    e[h] = in ? expf(s - mn) : 0.f;
    float es = e[h];
    for (int o = 8; o > 0; o >>= 1) es += __shfl_xor_sync(0xffffffffu, es, o);
    l[h] = l[h] * corr + es;
    m[h] = mn;
#pragma unroll
    for (int d = 0; d < ND; ++d) acc[h][d] *= corr;
  }
  // All 16 positions unrolled, values outside [lead, valid) read as zeros
  // (never loaded: their bytes may be NaN), so the loads issue together.
#pragma unroll
  for (int j = 0; j < kKvBlock; ++j) {
    float vv[ND];
#pragma unroll
    for (int d = 0; d < ND; ++d) vv[d] = j >= lead && j < valid ? v_at(kv, vs, slot0 + j, lane + 32 * d) : 0.f;
#pragma unroll
    for (int h = 0; h < kMaxG; ++h) {
      if (h >= nh) continue;
      const float pj = __shfl_sync(0xffffffffu, e[h], j);
#pragma unroll
      for (int d = 0; d < ND; ++d) acc[h][d] += pj * vv[d];
    }
  }
}

// The last block of a split head group merges the splits' partials (read
// past L1: other blocks wrote them) into out.
template <int ND>
__device__ __forceinline__ void merge_splits(const AttnSplit& split, int nh, int64_t first_head, float* out) {
  constexpr int HD = ND * 32;
  for (int idx = threadIdx.x; idx < nh * HD; idx += blockDim.x) {
    const int h = idx / HD, i = idx % HD;
    const float* ps = split.scratch + (first_head + h) * split.n * (HD + 2);
    float M = -INFINITY;
    for (int k = 0; k < split.n; ++k) M = fmaxf(M, __ldcg(ps + k * (HD + 2)));
    float num = 0.f, den = 0.f;
    for (int k = 0; k < split.n; ++k) {
      const float mk = __ldcg(ps + k * (HD + 2));
      if (mk == -INFINITY) continue;  // a split with no positions
      const float f = __ldcg(ps + k * (HD + 2) + 1) * expf(mk - M);
      num += __ldcg(ps + k * (HD + 2) + 2 + i) * f;
      den += f;
    }
    out[(first_head + h) * HD + i] = num / den;
  }
}

// One block per (token, KV head, up to 8 query heads of its group). Each warp
// takes every 8th chunk of 16 positions with an online softmax: lanes 0-15 and
// 16-31 hold the two halves of the dims of the chunk's 16 positions for the
// scores; for the values, lane l holds dims l, l + 32, ... (ND = head_dim / 32).
// The warps' partial results are merged through shared memory at the end.
//
// A decode step (split.n > 1) also splits the positions across split.n
// blocks per head group (a KV head alone keeps few SMs busy): each writes
// its normalised partial output with its max and sum to split.scratch, and
// the last block of the group to finish (a counter) merges them; it resets
// the counter for the next launch (a replayed graph).
//
// Block (bx, by, bz) of a grid whose z extent is gz (the kernel's own
// blockIdx / gridDim, or the persistent kernel's virtual blocks); sm: the
// dynamic shared memory (attention_smem), last: an int of shared memory.
// q is read through L2: the persistent kernel wrote it in the same launch.
template <int ND>
__device__ __forceinline__ void attention_block(const KvArgs& kv, const float* q, int64_t pos0, int64_t n_head,
                                                int64_t group, const AttnScore& score, float* out, const AttnSplit& split,
                                                int64_t bx, int64_t by, int64_t bz, int64_t gz, float* sm, int* last) {
  constexpr int HD = ND * 32;
  float* qs = sm;                             // [kMaxG][HD]
  float* part = qs + kMaxG * HD;              // [kAttnWarps][kMaxG][HD]
  float* ml = part + kAttnWarps * kMaxG * HD;  // [kAttnWarps][kMaxG][2]
  const int sp = static_cast<int>(bz) % split.n, hc = static_cast<int>(bz) / split.n;
  const int64_t t = bx, g = by, h0 = static_cast<int64_t>(hc) * kMaxG;
  const int nh = static_cast<int>((group - h0 < kMaxG ? group - h0 : kMaxG));
  const int64_t first_head = t * n_head + g * group + h0;
  for (int i = threadIdx.x; i < nh * HD; i += blockDim.x) qs[i] = __ldcg(q + first_head * HD + i);
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t n_kv = pos0 + t + 1, n_chunks = (n_kv + kKvBlock - 1) / kKvBlock;
  // A sliding window reads chunks from the one its first position is in (the cache keeps them all).
  const AttnParams ap{score.scale, score.softcap, score.window > 0 && n_kv > score.window ? n_kv - score.window : 0};
  const int64_t c0 = ap.first / kKvBlock;
  float m[kMaxG], l[kMaxG], acc[kMaxG][ND];
#pragma unroll
  for (int h = 0; h < kMaxG; ++h) {
    m[h] = -INFINITY;
    l[h] = 0.f;
#pragma unroll
    for (int d = 0; d < ND; ++d) acc[h][d] = 0.f;
  }
  // This split's chunks (all of them without a split).
  const int64_t per = (n_chunks - c0 + split.n - 1) / split.n, c_end = min_i64(n_chunks, c0 + (sp + 1) * per);
  for (int64_t c = c0 + sp * per + warp; c < c_end; c += kAttnWarps) {
    attend_chunk<ND>(kv, qs, nh, g, c, n_kv, ap, lane, m, l, acc);
  }
#pragma unroll
  for (int h = 0; h < kMaxG; ++h) {
    if (h >= nh) continue;
#pragma unroll
    for (int d = 0; d < ND; ++d) part[(warp * kMaxG + h) * HD + lane + 32 * d] = acc[h][d];
    if (lane == 0) {
      ml[(warp * kMaxG + h) * 2] = m[h];
      ml[(warp * kMaxG + h) * 2 + 1] = l[h];
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < nh * HD; idx += blockDim.x) {
    const int h = idx / HD, i = idx % HD;
    float M = -INFINITY;
    for (int w = 0; w < kAttnWarps; ++w) M = fmaxf(M, ml[(w * kMaxG + h) * 2]);
    float num = 0.f, den = 0.f;
    for (int w = 0; w < kAttnWarps; ++w) {
      const float mw = ml[(w * kMaxG + h) * 2];
      if (mw == -INFINITY) continue;  // a warp that had no chunk
      const float f = expf(mw - M);
      num += part[(w * kMaxG + h) * HD + i] * f;
      den += ml[(w * kMaxG + h) * 2 + 1] * f;
    }
    if (split.n == 1) {
      out[(first_head + h) * HD + i] = num / den;
      continue;
    }
    // [head][split]: max, sum, then the output normalised by this split's sum.
    float* ps = split.scratch + ((first_head + h) * split.n + sp) * (HD + 2);
    ps[2 + i] = den > 0.f ? num / den : 0.f;
    if (i == 0) {
      ps[0] = M;
      ps[1] = den;
    }
  }
  if (split.n == 1) return;
  __threadfence();  // this block's partials are visible before its count
  __syncthreads();
  int* counter = split.counters + (g * gz / split.n + hc);
  if (threadIdx.x == 0) *last = atomicAdd(counter, 1) == split.n - 1;
  __syncthreads();
  if (!*last) return;
  __threadfence();
  merge_splits<ND>(split, nh, first_head, out);
  if (threadIdx.x == 0) *counter = 0;
}



// rope of q and k, one rotated pair per index idx (of n_tok * (n_head +
// n_head_kv) * head_dim / 2); with `store` (an F32 / F16 cache) the rotated k
// pair and the v values at the same two dims go to the cache as
// kv_store_kernel writes them.
__device__ __forceinline__ void rope_store_at(int64_t idx, float* q, float* k, const float* v, const KvArgs& kv,
                                              bool store, int64_t n_tok, int64_t n_head, int64_t pos0,
                                              const float* __restrict__ cs, const float* __restrict__ sn, int64_t half,
                                              bool interleaved) {
  const int64_t n_head_kv = kv.n_head_kv, hd = kv.head_dim;
  const int64_t hh = hd / 2, heads = n_head + n_head_kv;
  if (idx >= n_tok * heads * hh) return;
  const int64_t i = idx % hh, th = idx / hh, t = th / heads, h = th % heads;
  const bool is_k = h >= n_head;
  const int64_t g = h - n_head;  // KV head (is_k)
  float* x = is_k ? k + (t * n_head_kv + g) * hd : q + (t * n_head + h) * hd;
  const Rotated r = rotate_pair(x, i, hd, pos0 + t, cs, sn, half, interleaved);
  if (!is_k || !store) return;
  const float* vr = v + (t * n_head_kv + g) * hd;
  store_kv_value(kv, pos0 + t, g, r.ia, r.a, __ldcg(vr + r.ia));
  store_kv_value(kv, pos0 + t, g, r.ib, r.b, __ldcg(vr + r.ib));
}

// Q8_0: warp w (of n_tok * n_head_kv * head_dim / 32) quantizes one 32-value
// group of k and of v: d = max|x| / 127, q = round(x / d).
__device__ __forceinline__ void kv_store_q8_warp(int64_t w, int lane, const KvArgs& kv, const float* k, const float* v,
                                                 int64_t n_tok, int64_t pos0) {
  const int64_t hd = kv.head_dim, groups = hd / 32, kvd = kv.n_head_kv * hd;
  if (w >= n_tok * kv.n_head_kv * groups) return;  // whole warps leave together
  const int64_t t = w / (kv.n_head_kv * groups), g = (w / groups) % kv.n_head_kv, grp = w % groups;
  const int64_t p = pos0 + t, slot = p % kv.block_pos;
  for (int which = 0; which < 2; ++which) {
    const float x = __ldcg((which == 0 ? k : v) + t * kvd + g * hd + grp * 32 + lane);
    float amax = fabsf(x);
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
    const int8_t qv = static_cast<int8_t>(roundf(x * id));
    if (which == 0) {
      uint8_t* blk = k_slice(kv, p, g) + static_cast<size_t>(slot / kKvBlock) * q8_k_block_bytes(hd);
      const int64_t lanepos = slot % kKvBlock;
      blk[(grp * 32 + lane) * kKvBlock + lanepos] = static_cast<uint8_t>(qv);
      if (lane == 0) *reinterpret_cast<float*>(blk + hd * kKvBlock + (grp * kKvBlock + lanepos) * 4) = d;
    } else {
      uint8_t* row = v_slice(kv, p, g) + static_cast<size_t>(slot) * q8_v_row_bytes(hd);
      row[grp * 32 + lane] = static_cast<uint8_t>(qv);
      if (lane == 0) *reinterpret_cast<float*>(row + hd + grp * 4) = d;
    }
  }
}

// RMSNorm of row `row` of x (n values) by the block, the mean square in
// double as the CPU reference; part: 32 doubles of shared memory. In place is
// safe: each thread rereads only the values it summed.
__device__ __forceinline__ void rms_norm_row(int64_t row, const float* x, const float* __restrict__ w, int64_t n,
                                             float eps, float* out, double* part) {
  const float* xr = x + row * n;
  float* o = out + row * n;
  double ss = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = __ldcg(xr + i);
    ss += static_cast<double>(v) * v;
  }
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
  __syncthreads();
  if (threadIdx.x < 32) {
    double v = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.0;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (threadIdx.x == 0) part[0] = v;
  }
  __syncthreads();
  const float inv = static_cast<float>(1.0 / sqrt(part[0] / static_cast<double>(n) + eps));
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) o[i] = w[i] * (__ldcg(xr + i) * inv);
  __syncthreads();  // part is reused by the next row
}

template <int ND>
constexpr size_t attention_smem() {
  return (kMaxG * ND * 32 * (1 + kAttnWarps) + kAttnWarps * kMaxG * 2) * sizeof(float);
}

}  // namespace laya::cuda
