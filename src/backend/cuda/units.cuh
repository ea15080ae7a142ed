// The decode kernel's units: what one lane of a warp reads (16-byte loads)
// and multiplies in one step, per weight type. Header-only so that a host
// build (LAYA_CUDA_HOST_CHECK, tests/cuda/units_host_check.cpp) can check the
// index arithmetic against the CPU reference without a GPU.
#pragma once

#include "backend/cuda/dequant.cuh"

namespace laya::cuda {

// Byte i of a 16-byte register value (no trip through local memory).
__device__ __forceinline__ uint32_t word_at(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }
__device__ __forceinline__ int byte_at(const uint4& v, int i) { return static_cast<int>((word_at(v, i >> 2) >> (8 * (i & 3))) & 0xff); }

// scale_min_k4 on a Q4_K / Q5_K block header held in registers (its scales at bytes 4..15).
__device__ __forceinline__ void scale_min_k4_reg(int j, const uint4& meta, int* sc, int* m) {
  auto q = [&](int i) { return byte_at(meta, 4 + i); };
  if (j < 4) {
    *sc = q(j) & 63;
    *m = q(j + 4) & 63;
  } else {
    *sc = (q(j + 4) & 0x0F) | ((q(j - 4) >> 6) << 4);
    *m = (q(j + 4) >> 4) | ((q(j) >> 6) << 4);
  }
}

// ---- the staged input vector ----------------------------------------------------------------
// The decode kernel stages x in shared memory with 4 floats of padding after
// every 32, so that the 8 lanes of a quarter-warp, each reading the x of its
// own unit (16 floats apart for Q8_0, 8 for F16 / BF16), hit 8 distinct groups
// of 4 banks. Unpadded, Q8_0's reads were 4-way bank conflicts and the kernel
// ran at 344 GB/s on an H200 (BF16: 2-way, 1,171 GB/s).
constexpr int64_t kXPadEvery = 32;
__device__ __forceinline__ int64_t xpad(int64_t i) { return i + 4 * (i / kXPadEvery); }
// Floats of shared memory for `cols` values staged.
#if defined(LAYA_CUDA_HOST_CHECK) || defined(LAYA_CUDA_EMULATE)
inline int64_t xpad_size(int64_t cols)
#else
__host__ __device__ inline int64_t xpad_size(int64_t cols)
#endif
 { return cols + 4 * ((cols + kXPadEvery - 1) / kXPadEvery); }
// Four staged values from logical index i (a multiple of 4). 32-bit index
// arithmetic: ncu found the decode kernel issue-bound at ~10 instructions per
// weight byte, much of it 64-bit address math.
__device__ __forceinline__ float4 x4(const float* xs, int i) {
  return *reinterpret_cast<const float4*>(xs + i + 4 * (i >> 5));
}

// ---- decode units: what one lane reads and multiplies in one step ----------------------------
// Each unit type gives: units(cols), Raw, Ref and row(m, r) (the row's bytes
// and scales, computed once per row), load(ref, u) and dot(raw, ref, u, xs),
// u the unit's index in the row (32-bit), xs the staged (padded) input vector.
struct RowRef {
  const uint8_t* data;
  const uint16_t* scales;
};
__device__ __forceinline__ RowRef row_of(const DevMat& m, int64_t r, int64_t scales_per_row) {
  return RowRef{m.data + static_cast<size_t>(r) * m.stride, m.scales ? m.scales + r * scales_per_row : nullptr};
}

struct UnitF32 {  // 4 values, one 16-byte load
  using Raw = float4;
  static __device__ int64_t units(int64_t cols) { return (cols + 3) / 4; }
  using Ref = RowRef;
  static __device__ RowRef row(const DevMat& m, int64_t r) { return row_of(m, r, 0); }
  static __device__ Raw load(const RowRef& rr, int u) { return __ldg(reinterpret_cast<const float4*>(rr.data) + u); }
  static __device__ float dot(const Raw& w, const RowRef&, int u, const float* xs) {
    const float4 x = x4(xs, 4 * u);
    return w.x * x.x + w.y * x.y + w.z * x.z + w.w * x.w;
  }
};

template <bool kBf16>
struct Unit16 {  // 8 fp16 / bf16 values, one 16-byte load
  using Raw = uint4;
  static __device__ int64_t units(int64_t cols) { return (cols + 7) / 8; }
  using Ref = RowRef;
  static __device__ RowRef row(const DevMat& m, int64_t r) { return row_of(m, r, 0); }
  static __device__ Raw load(const RowRef& rr, int u) { return __ldg(reinterpret_cast<const uint4*>(rr.data) + u); }
  static __device__ float dot(const Raw& w, const RowRef&, int u, const float* xs) {
    const float* p = xs + 8 * u + 4 * (u >> 2);  // x4(xs, 8u), the 8 values in one padded run
    const float4 x0 = *reinterpret_cast<const float4*>(p), x1 = *reinterpret_cast<const float4*>(p + 4);
    const uint32_t v[4] = {w.x, w.y, w.z, w.w};
    float f[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint16_t lo = static_cast<uint16_t>(v[i] & 0xffff), hi = static_cast<uint16_t>(v[i] >> 16);
      f[2 * i] = kBf16 ? bf2f(lo) : h2f(lo);
      f[2 * i + 1] = kBf16 ? bf2f(hi) : h2f(hi);
    }
    return f[0] * x0.x + f[1] * x0.y + f[2] * x0.z + f[3] * x0.w + f[4] * x1.x + f[5] * x1.y + f[6] * x1.z + f[7] * x1.w;
  }
};

struct UnitQ8 {  // 16 int8 values and their block's fp16 scale
  struct Raw {
    uint4 q;
    uint16_t d;
  };
  static __device__ int64_t units(int64_t cols) { return cols / 16; }
  using Ref = RowRef;
  static __device__ RowRef row(const DevMat& m, int64_t r) { return row_of(m, r, m.cols / 32); }
  static __device__ Raw load(const RowRef& rr, int u) {
    Raw w;
    w.q = __ldg(reinterpret_cast<const uint4*>(rr.data) + u);
    w.d = __ldg(rr.scales + (u >> 1));
    return w;
  }
  static __device__ float dot(const Raw& w, const RowRef&, int u, const float* xs) {
    // Byte b + 128 (the sign bit flipped) as the low bits of 2^23's mantissa,
    // minus 2^23 + 128: exactly float(b), in a byte permute and an add at
    // full rate, where the int-to-float conversion runs at a quarter (16 per
    // clock per SM on Hopper: 0.3 ms of a 1B Q8_0 decode step).
    const uint32_t v[4] = {w.q.x ^ 0x80808080u, w.q.y ^ 0x80808080u, w.q.z ^ 0x80808080u, w.q.w ^ 0x80808080u};
    constexpr float kBias = 8388608.f + 128.f;
    auto f = [](uint32_t word, uint32_t sel) { return __uint_as_float(__byte_perm(word, 0x4B00u, sel)) - kBias; };
    const float* p = xs + 16 * u + 4 * (u >> 1);  // x4(xs, 16u): the 16 values are one padded run
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float4 x = *reinterpret_cast<const float4*>(p + 4 * i);
      s += f(v[i], 0x5440u) * x.x + f(v[i], 0x5441u) * x.y + f(v[i], 0x5442u) * x.z + f(v[i], 0x5443u) * x.w;
    }
    return s * h2f(w.d);
  }
};

// Q4_K / Q5_K: 16 bytes of a block's 4-bit values (32 values of two
// sub-blocks), its 16-byte header (d, dmin, scales) and, for Q5_K, the 16
// bytes of high bits for those positions.
template <bool kQ5>
struct UnitK {
  struct Raw {
    uint4 q, meta, h;
  };
  static constexpr int kBlock = kQ5 ? 176 : 144;
  static __device__ int64_t units(int64_t cols) { return cols / 32; }
  using Ref = RowRef;
  static __device__ RowRef row(const DevMat& m, int64_t r) { return row_of(m, r, 0); }
  static __device__ Raw load(const RowRef& rr, int u) {
    const uint8_t* b = rr.data + (u / 8) * kBlock;
    const int k = u % 8;  // 64-value group k / 2, first or second 16 bytes of its 32
    Raw w;
    w.meta = __ldg(reinterpret_cast<const uint4*>(b));
    w.q = __ldg(reinterpret_cast<const uint4*>(b + (kQ5 ? 48 : 16) + 16 * k));
    if (kQ5) w.h = __ldg(reinterpret_cast<const uint4*>(b + 16 + 16 * (k % 2)));
    return w;
  }
  static __device__ float dot(const Raw& w, const RowRef&, int u, const float* xs) {
    const int k = u % 8, grp = k / 2, half = k % 2;
    int sc0, m0, sc1, m1;
    scale_min_k4_reg(2 * grp, w.meta, &sc0, &m0);
    scale_min_k4_reg(2 * grp + 1, w.meta, &sc1, &m1);
    const float d = h2f(static_cast<uint16_t>(w.meta.x & 0xffff)), dmin = h2f(static_cast<uint16_t>(w.meta.x >> 16));
    const float d0 = d * static_cast<float>(sc0), mm0 = dmin * static_cast<float>(m0);
    const float d1 = d * static_cast<float>(sc1), mm1 = dmin * static_cast<float>(m1);
    const int i0 = (u / 8) * 256 + 64 * grp + 16 * half;  // low nibbles: sub-block 2 grp; high: 32 further
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float4 a = x4(xs, i0 + 4 * j), b = x4(xs, i0 + 32 + 4 * j);
      const float xa[4] = {a.x, a.y, a.z, a.w}, xb[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 4 * j + e;
        const int qb = byte_at(w.q, i);
        int lo = qb & 0x0F, hi = qb >> 4;
        if (kQ5) {
          const int hb = byte_at(w.h, i);
          lo += (hb >> (2 * grp)) & 1 ? 16 : 0;
          hi += (hb >> (2 * grp + 1)) & 1 ? 16 : 0;
        }
        s += (d0 * static_cast<float>(lo) - mm0) * xa[e] + (d1 * static_cast<float>(hi) - mm1) * xb[e];
      }
    }
    return s;
  }
};

// Q6_K (split on the device): one 32-value group of a block, n = half, qd =
// quarter: 32 bytes of low bits, 32 of high bits, two int8 scales, the fp16 d.
struct UnitQ6 {
  struct Raw {
    uint4 l0, l1, h0, h1;
    uint16_t sc, d;
  };
  static __device__ int64_t units(int64_t cols) { return cols / 32; }
  using Ref = RowRef;
  static __device__ RowRef row(const DevMat& m, int64_t r) { return row_of(m, r, m.cols / 256); }
  static __device__ Raw load(const RowRef& rr, int u) {
    const int g = u % 8, n = g / 4, qd = g % 4;
    const uint8_t* b = rr.data + (u / 8) * 208;
    const uint4* ql = reinterpret_cast<const uint4*>(b + 64 * n + 32 * (qd & 1));
    const uint4* qh = reinterpret_cast<const uint4*>(b + 128 + 32 * n);
    Raw w;
    w.l0 = __ldg(ql);
    w.l1 = __ldg(ql + 1);
    w.h0 = __ldg(qh);
    w.h1 = __ldg(qh + 1);
    w.sc = __ldg(reinterpret_cast<const uint16_t*>(b + 192 + 8 * n + 2 * qd));
    w.d = __ldg(rr.scales + u / 8);
    return w;
  }
  static __device__ float dot(const Raw& w, const RowRef&, int u, const float* xs) {
    const int g = u % 8, n = g / 4, qd = g % 4, shift = qd >= 2 ? 4 : 0;
    const float d = h2f(w.d);
    const float s0 = d * static_cast<float>(static_cast<int8_t>(w.sc & 0xff));
    const float s1 = d * static_cast<float>(static_cast<int8_t>(w.sc >> 8));
    const int i0 = (u / 8) * 256 + 128 * n + 32 * qd;
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float4 x = x4(xs, i0 + 4 * j);
      const float xv[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int l = 4 * j + e;
        const int lb = byte_at(l < 16 ? w.l0 : w.l1, l & 15), hb = byte_at(l < 16 ? w.h0 : w.h1, l & 15);
        const int q = (((lb >> shift) & 0x0F) | (((hb >> (2 * qd)) & 3) << 4)) - 32;
        s += (l < 16 ? s0 : s1) * static_cast<float>(q) * xv[e];
      }
    }
    return s;
  }
};

// ---- MLX affine units (DType::MLX_Q4 / MLX_Q8 with F16 / BF16 scales) ---------------------------
// A unit is 32 values (16 / 32 bytes), inside one group (groups are 32, 64 or
// 128 values), and the group's (scale, bias) word. The products are of q
// alone; the bias is added once a unit: Σ w·x = s·Σ q·x + z·Σ x, as the CPU's
// AVX2 kernel does (affine_prepare), with Σ x of the unit's 32 values made
// once per block after x is staged (x_sum32, into the padding after them).

// The sum of the 32 staged values at p into p[32], the first float of the 4
// of padding after them (xpad: nothing else reads those).
__device__ __forceinline__ void x_sum32(float* p) {
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 32; i += 4) {
    const float4 v = *reinterpret_cast<const float4*>(p + i);
    s += (v.x + v.y) + (v.z + v.w);
  }
  p[32] = s;
}

struct MlxRef {
  const uint8_t* data;    // the row's packed values
  const uint32_t* pairs;  // its groups' (scale, bias) words
  int gshift;             // unit u is in group u >> gshift
  bool bf16;              // BF16 scales, else F16
};

template <int kBits>
struct UnitMlx {
  static_assert(kBits == 4 || kBits == 8, "other widths take UnitGeneric");
  static constexpr bool kXSums = true;  // dot() reads x_sum32's sums
  struct Raw {
    uint4 q[kBits / 4];
    uint32_t p;
  };
  static __device__ int64_t units(int64_t cols) { return cols / 32; }
  using Ref = MlxRef;
  static __device__ Ref row(const DevMat& m, int64_t r) {
    return MlxRef{m.data + static_cast<size_t>(r) * m.stride,
                  reinterpret_cast<const uint32_t*>(m.scales) + r * (m.cols / m.group),
                  m.group == 32 ? 0 : m.group == 64 ? 1 : 2, m.group_type == DType::BF16};
  }
  static __device__ Raw load(const Ref& rr, int u) {
    Raw w;
#pragma unroll
    for (int i = 0; i < kBits / 4; ++i) w.q[i] = __ldg(reinterpret_cast<const uint4*>(rr.data) + (kBits / 4) * u + i);
    w.p = __ldg(rr.pairs + (u >> rr.gshift));
    return w;
  }
  // Byte k of v (an unsigned value) as a float: the low byte of 2^23's
  // mantissa, minus 2^23, as UnitQ8 does (exact, full rate: no int-to-float
  // conversion).
  static __device__ __forceinline__ float q_of(uint32_t v, int k) {
    return __uint_as_float(__byte_perm(v, 0x4B00u, 0x5440u + static_cast<uint32_t>(k))) - 8388608.f;
  }
  static __device__ float dot(const Raw& w, const Ref& rr, int u, const float* xs) {
    const float* p = xs + 36 * u;  // x4(xs, 32u): the unit's values are one padded run, their sum at p[32]
    const MlxParams g = mlx_pair16(w.p, rr.bf16);
    float s = 0.f;
    if constexpr (kBits == 4) {
      // Even values sit in the low nibbles, odd in the high: a mask (and a
      // shift) for 4 values, then each byte as UnitQ8's are made floats.
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint32_t v = word_at(w.q[0], i), lo = v & 0x0F0F0F0Fu, hi = (v >> 4) & 0x0F0F0F0Fu;
        const float4 a = *reinterpret_cast<const float4*>(p + 8 * i), b = *reinterpret_cast<const float4*>(p + 8 * i + 4);
        s += q_of(lo, 0) * a.x + q_of(hi, 0) * a.y + q_of(lo, 1) * a.z + q_of(hi, 1) * a.w + q_of(lo, 2) * b.x +
             q_of(hi, 2) * b.y + q_of(lo, 3) * b.z + q_of(hi, 3) * b.w;
      }
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const uint32_t v = word_at(w.q[i >> 2], i & 3);
        const float4 x = *reinterpret_cast<const float4*>(p + 4 * i);
        s += q_of(v, 0) * x.x + q_of(v, 1) * x.y + q_of(v, 2) * x.z + q_of(v, 3) * x.w;
      }
    }
    return g.s * s + g.z * p[32];
  }
};

struct UnitGeneric {  // 32 values through deq32 (byte loads): Q4_0, Q4_1, Q5_0, Q5_1; MLX but UnitMlx's
  using Raw = int;
  struct Ref {
    const DevMat* m;
    int64_t r;
  };
  static __device__ int64_t units(int64_t cols) { return (cols + 31) / 32; }
  static __device__ Ref row(const DevMat& m, int64_t r) { return Ref{&m, r}; }
  static __device__ Raw load(const Ref&, int) { return 0; }
  static __device__ float dot(const Raw&, const Ref& ref, int u, const float* xs) {
    float w[32];
    deq32(*ref.m, ref.r, u, w);
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 32; j += 4) {
      const float4 x = x4(xs, u * 32 + j);
      s += w[j] * x.x + w[j + 1] * x.y + w[j + 2] * x.z + w[j + 3] * x.w;
    }
    return s;
  }
};

}  // namespace laya::cuda
