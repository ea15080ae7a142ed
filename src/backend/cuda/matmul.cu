// Weight products: the decode matrix-vector kernel (one warp per row, 16-byte
// loads, four loads in flight per lane), a tiled float32 kernel for several
// tokens, and get_rows. Both products read the weights in their stored form
// and multiply in float32 (as the CPU reference does).
#include <algorithm>

#include "backend/cuda/dequant.cuh"

namespace laya::cuda {

namespace {

constexpr int kWarps = 8;  // warps per block of the decode kernel
constexpr int64_t kPadCols = 256;  // x is staged in shared memory padded to a multiple of this (zeros)

__device__ __forceinline__ float warp_sum(float s) {
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  return s;
}

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

// ---- decode units: what one lane reads and multiplies in one step ----------------------------
// Each unit type gives: units(cols), Raw, load(m, r, u), dot(raw, m, r, u, xs).

struct UnitF32 {  // 4 values, one 16-byte load
  using Raw = float4;
  static __device__ int64_t units(int64_t cols) { return (cols + 3) / 4; }
  static __device__ Raw load(const DevMat& m, int64_t r, int64_t u) {
    return __ldg(reinterpret_cast<const float4*>(m.data + static_cast<size_t>(r) * m.stride) + u);
  }
  static __device__ float dot(const Raw& w, const DevMat&, int64_t, int64_t u, const float* xs) {
    const float4 x = reinterpret_cast<const float4*>(xs)[u];
    return w.x * x.x + w.y * x.y + w.z * x.z + w.w * x.w;
  }
};

template <bool kBf16>
struct Unit16 {  // 8 fp16 / bf16 values, one 16-byte load
  using Raw = uint4;
  static __device__ int64_t units(int64_t cols) { return (cols + 7) / 8; }
  static __device__ Raw load(const DevMat& m, int64_t r, int64_t u) {
    return __ldg(reinterpret_cast<const uint4*>(m.data + static_cast<size_t>(r) * m.stride) + u);
  }
  static __device__ float dot(const Raw& w, const DevMat&, int64_t, int64_t u, const float* xs) {
    const float4 x0 = reinterpret_cast<const float4*>(xs)[2 * u], x1 = reinterpret_cast<const float4*>(xs)[2 * u + 1];
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
  static __device__ Raw load(const DevMat& m, int64_t r, int64_t u) {
    Raw w;
    w.q = __ldg(reinterpret_cast<const uint4*>(m.data + static_cast<size_t>(r) * m.stride) + u);
    w.d = __ldg(m.scales + static_cast<size_t>(r) * static_cast<size_t>(m.cols / 32) + u / 2);
    return w;
  }
  static __device__ float dot(const Raw& w, const DevMat&, int64_t, int64_t u, const float* xs) {
    const float* x = xs + u * 16;
    const uint32_t v[4] = {w.q.x, w.q.y, w.q.z, w.q.w};
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int b = 0; b < 4; ++b) s += static_cast<float>(static_cast<int8_t>(v[i] >> (8 * b))) * x[4 * i + b];
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
  static __device__ Raw load(const DevMat& m, int64_t r, int64_t u) {
    const uint8_t* b = m.data + static_cast<size_t>(r) * m.stride + (u / 8) * kBlock;
    const int k = static_cast<int>(u % 8);  // 64-value group k / 2, first or second 16 bytes of its 32
    Raw w;
    w.meta = __ldg(reinterpret_cast<const uint4*>(b));
    w.q = __ldg(reinterpret_cast<const uint4*>(b + (kQ5 ? 48 : 16) + 16 * k));
    if (kQ5) w.h = __ldg(reinterpret_cast<const uint4*>(b + 16 + 16 * (k % 2)));
    return w;
  }
  static __device__ float dot(const Raw& w, const DevMat&, int64_t, int64_t u, const float* xs) {
    const int k = static_cast<int>(u % 8), grp = k / 2, half = k % 2;
    int sc0, m0, sc1, m1;
    scale_min_k4_reg(2 * grp, w.meta, &sc0, &m0);
    scale_min_k4_reg(2 * grp + 1, w.meta, &sc1, &m1);
    const float d = h2f(static_cast<uint16_t>(w.meta.x & 0xffff)), dmin = h2f(static_cast<uint16_t>(w.meta.x >> 16));
    const float d0 = d * static_cast<float>(sc0), mm0 = dmin * static_cast<float>(m0);
    const float d1 = d * static_cast<float>(sc1), mm1 = dmin * static_cast<float>(m1);
    const float* x0 = xs + (u / 8) * 256 + 64 * grp + 16 * half;  // low nibbles: sub-block 2 grp
    const float* x1 = x0 + 32;                                     // high nibbles: sub-block 2 grp + 1
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int qb = byte_at(w.q, i);
      int lo = qb & 0x0F, hi = qb >> 4;
      if (kQ5) {
        const int hb = byte_at(w.h, i);
        lo += (hb >> (2 * grp)) & 1 ? 16 : 0;
        hi += (hb >> (2 * grp + 1)) & 1 ? 16 : 0;
      }
      s += (d0 * static_cast<float>(lo) - mm0) * x0[i] + (d1 * static_cast<float>(hi) - mm1) * x1[i];
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
  static __device__ Raw load(const DevMat& m, int64_t r, int64_t u) {
    const int g = static_cast<int>(u % 8), n = g / 4, qd = g % 4;
    const uint8_t* b = m.data + static_cast<size_t>(r) * m.stride + (u / 8) * 208;
    const uint4* ql = reinterpret_cast<const uint4*>(b + 64 * n + 32 * (qd & 1));
    const uint4* qh = reinterpret_cast<const uint4*>(b + 128 + 32 * n);
    Raw w;
    w.l0 = __ldg(ql);
    w.l1 = __ldg(ql + 1);
    w.h0 = __ldg(qh);
    w.h1 = __ldg(qh + 1);
    w.sc = __ldg(reinterpret_cast<const uint16_t*>(b + 192 + 8 * n + 2 * qd));
    w.d = __ldg(m.scales + static_cast<size_t>(r) * static_cast<size_t>(m.cols / 256) + u / 8);
    return w;
  }
  static __device__ float dot(const Raw& w, const DevMat&, int64_t, int64_t u, const float* xs) {
    const int g = static_cast<int>(u % 8), n = g / 4, qd = g % 4, shift = qd >= 2 ? 4 : 0;
    const float d = h2f(w.d);
    const float s0 = d * static_cast<float>(static_cast<int8_t>(w.sc & 0xff));
    const float s1 = d * static_cast<float>(static_cast<int8_t>(w.sc >> 8));
    const float* x = xs + (u / 8) * 256 + 128 * n + 32 * qd;
    float s = 0.f;
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      const int lb = byte_at(l < 16 ? w.l0 : w.l1, l & 15), hb = byte_at(l < 16 ? w.h0 : w.h1, l & 15);
      const int q = (((lb >> shift) & 0x0F) | (((hb >> (2 * qd)) & 3) << 4)) - 32;
      s += (l < 16 ? s0 : s1) * static_cast<float>(q) * x[l];
    }
    return s;
  }
};

struct UnitGeneric {  // 32 values through deq32 (byte loads): Q4_0, Q4_1, Q5_0, Q5_1
  using Raw = int;
  static __device__ int64_t units(int64_t cols) { return (cols + 31) / 32; }
  static __device__ Raw load(const DevMat&, int64_t, int64_t) { return 0; }
  static __device__ float dot(const Raw&, const DevMat& m, int64_t r, int64_t u, const float* xs) {
    float w[32];
    deq32(m, r, u, w);
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 32; ++j) s += w[j] * xs[u * 32 + j];
    return s;
  }
};

// Row r of m times xs (in shared memory), summed over the warp. Four units
// per lane are loaded before any is used: bytes in flight hide the latency.
template <class U>
__device__ float row_dot(const DevMat& m, int64_t r, const float* xs, int lane) {
  const int64_t n = U::units(m.cols);
  float s = 0.f;
  int64_t u = lane;
  for (; u + 96 < n; u += 128) {
    const typename U::Raw a = U::load(m, r, u), b = U::load(m, r, u + 32), c = U::load(m, r, u + 64),
                          d = U::load(m, r, u + 96);
    s += U::dot(a, m, r, u, xs) + U::dot(b, m, r, u + 32, xs) + U::dot(c, m, r, u + 64, xs) +
         U::dot(d, m, r, u + 96, xs);
  }
  for (; u < n; u += 32) s += U::dot(U::load(m, r, u), m, r, u, xs);
  return warp_sum(s);
}

__device__ float row_dot_any(const DevMat& m, int64_t r, const float* xs, int lane) {
  switch (m.type) {
    case DType::F32: return row_dot<UnitF32>(m, r, xs, lane);
    case DType::F16: return row_dot<Unit16<false>>(m, r, xs, lane);
    case DType::BF16: return row_dot<Unit16<true>>(m, r, xs, lane);
    case DType::Q8_0: return row_dot<UnitQ8>(m, r, xs, lane);
    case DType::Q4_K: return row_dot<UnitK<false>>(m, r, xs, lane);
    case DType::Q5_K: return row_dot<UnitK<true>>(m, r, xs, lane);
    case DType::Q6_K: return row_dot<UnitQ6>(m, r, xs, lane);
    default: return row_dot<UnitGeneric>(m, r, xs, lane);
  }
}

struct DotAny {
  static __device__ float dot(const DevMat& m, int64_t r, const float* xs, int lane) { return row_dot_any(m, r, xs, lane); }
};
template <class U>
struct DotOf {
  static __device__ float dot(const DevMat& m, int64_t r, const float* xs, int lane) { return row_dot<U>(m, r, xs, lane); }
};

// Grid: blocks of kWarps warps, each warp `rpw` consecutive rows of the
// matrices laid end to end. D: the row product, one type's (the job's
// matrices all of that type: small, fully inlined code) or any type's.
// n_tok > 1 (a keystroke's few new tokens): every token's x is staged, and a
// warp multiplies its row with each in turn; the row's bytes come from
// device memory once and from L1 after.
template <class D>
__global__ void __launch_bounds__(kWarps * 32) matvec_kernel(const MatvecJob job, const float* __restrict__ x,
                                                             int64_t cols, int64_t padded, int64_t total, int rpw,
                                                             int n_tok) {
  extern __shared__ float xs[];
  for (int t = 0; t < n_tok; ++t)
    for (int64_t i = threadIdx.x; i < padded; i += blockDim.x) xs[t * padded + i] = i < cols ? x[t * cols + i] : 0.f;
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * rpw;
  for (int64_t R = first; R < first + rpw && R < total; ++R) {
    if (job.swiglu) {
      for (int t = 0; t < n_tok; ++t) {
        const float g = D::dot(job.m[0], R, xs + t * padded, lane), u = D::dot(job.m[1], R, xs + t * padded, lane);
        if (lane == 0) {
          job.y[0][t * total + R] = g;
          job.y[1][t * total + R] = g / (1.0f + expf(-g)) * u;
        }
      }
      continue;
    }
    int i = 0;
    int64_t r = R;
    while (i + 1 < job.n && r >= job.m[i].rows) r -= job.m[i++].rows;
    for (int t = 0; t < n_tok; ++t) {
      const float s = D::dot(job.m[i], r, xs + t * padded, lane);
      if (lane == 0) job.y[i][t * job.m[i].rows + r] = s;
    }
  }
}

using MatvecFn = void (*)(const MatvecJob, const float*, int64_t, int64_t, int64_t, int, int);

// The kernel for a job: one type's when every matrix has it, else the general one.
MatvecFn matvec_for(const MatvecJob& job) {
  const int n = job.swiglu ? 2 : job.n;
  for (int i = 1; i < n; ++i)
    if (job.m[i].type != job.m[0].type) return matvec_kernel<DotAny>;
  switch (job.m[0].type) {
    case DType::F32: return matvec_kernel<DotOf<UnitF32>>;
    case DType::F16: return matvec_kernel<DotOf<Unit16<false>>>;
    case DType::BF16: return matvec_kernel<DotOf<Unit16<true>>>;
    case DType::Q8_0: return matvec_kernel<DotOf<UnitQ8>>;
    case DType::Q4_K: return matvec_kernel<DotOf<UnitK<false>>>;
    case DType::Q5_K: return matvec_kernel<DotOf<UnitK<true>>>;
    case DType::Q6_K: return matvec_kernel<DotOf<UnitQ6>>;
    default: return matvec_kernel<DotOf<UnitGeneric>>;
  }
}

// ---- several tokens: 64 rows x 32 tokens per block, 64 columns at a time ---------------------
constexpr int kTR = 64, kTT = 32, kTK = 64;

__global__ void __launch_bounds__(256) gemm_kernel(const DevMat m, const float* __restrict__ x, int64_t n_tok,
                                                   float* __restrict__ y) {
  __shared__ float ws[kTR][kTK + 1];
  __shared__ float xt[kTT][kTK + 1];
  const int tid = threadIdx.x;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kTR, t0 = static_cast<int64_t>(blockIdx.y) * kTT;
  float acc[4][2] = {};
  for (int64_t k0 = 0; k0 < m.cols; k0 += kTK) {
    if (tid < 2 * kTR) {  // each of these threads dequantizes one 32-value group
      const int i = tid / 2, half = tid % 2;
      float w[32];
      const int64_t r = r0 + i, g = k0 / 32 + half;
      if (r < m.rows && g * 32 < m.cols) {
        deq32(m, r, g, w);
      } else {
#pragma unroll
        for (int j = 0; j < 32; ++j) w[j] = 0.f;
      }
#pragma unroll
      for (int j = 0; j < 32; ++j) ws[i][32 * half + j] = w[j];
    }
    for (int idx = tid; idx < kTT * kTK; idx += 256) {
      const int t = idx / kTK, c = idx % kTK;
      xt[t][c] = (t0 + t < n_tok && k0 + c < m.cols) ? x[(t0 + t) * m.cols + k0 + c] : 0.f;
    }
    __syncthreads();
    const int rr = tid % 16, tt = (tid / 16) * 2;
#pragma unroll 8
    for (int k = 0; k < kTK; ++k) {
      const float x0 = xt[tt][k], x1 = xt[tt + 1][k];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float w = ws[rr + 16 * q][k];
        acc[q][0] += w * x0;
        acc[q][1] += w * x1;
      }
    }
    __syncthreads();
  }
  const int rr = tid % 16, tt = (tid / 16) * 2;
#pragma unroll
  for (int q = 0; q < 4; ++q)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int64_t r = r0 + rr + 16 * q, t = t0 + tt + j;
      if (r < m.rows && t < n_tok) y[t * m.rows + r] = acc[q][j];
    }
}

// ---- get_rows: ids by value, 64 per launch -------------------------------------------------------
struct Ids64 {
  int32_t v[64];
};

__global__ void get_rows_kernel(const DevMat m, const Ids64 ids, float* __restrict__ out, const int64_t* dyn) {
  const int64_t row = dyn ? dyn[0] : ids.v[blockIdx.x];
  float* o = out + static_cast<int64_t>(blockIdx.x) * m.cols;
  for (int64_t g = threadIdx.x; g * 32 < m.cols; g += blockDim.x) {
    float w[32];
    deq32(m, row, g, w);
    for (int j = 0; j < 32 && g * 32 + j < m.cols; ++j) o[g * 32 + j] = w[j];
  }
}

int64_t padded_cols(int64_t cols) { return (cols + kPadCols - 1) / kPadCols * kPadCols; }

size_t g_smem_optin = 48 * 1024;  // the device's opt-in shared memory per block (configure())

}  // namespace

bool dev_supported(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::Q8_0: case DType::Q4_0: case DType::Q4_1:
    case DType::Q5_0: case DType::Q5_1: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: return true;
    default: return false;
  }
}

size_t dev_stride(DType t, int64_t cols) {
  if (t == DType::Q8_0) return static_cast<size_t>(cols);
  if (t == DType::Q6_K) return static_cast<size_t>(cols / 256) * 208;
  const size_t rb = row_bytes(t, cols);
  if (t == DType::F32 || t == DType::F16 || t == DType::BF16) return (rb + 15) / 16 * 16;
  return rb;
}

size_t dev_bytes(DType t, int64_t rows, int64_t cols) {
  const size_t body = dev_stride(t, cols) * static_cast<size_t>(rows);
  if (t == DType::Q8_0) return body + static_cast<size_t>(rows) * static_cast<size_t>(cols / 32) * 2;
  if (t == DType::Q6_K) return body + static_cast<size_t>(rows) * static_cast<size_t>(cols / 256) * 2;
  return body;
}

cudaError_t configure(int64_t max_cols) {
  (void)max_cols;
  // The whole opt-in shared memory: x of up to kMaxVecTok tokens (matvec_tokens()).
  int dev = 0, optin = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  if (cudaError_t e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev); e != cudaSuccess) return e;
  g_smem_optin = static_cast<size_t>(optin);
  const size_t bytes = g_smem_optin;
  const MatvecFn all[] = {matvec_kernel<DotAny>,
                          matvec_kernel<DotOf<UnitF32>>,
                          matvec_kernel<DotOf<Unit16<false>>>,
                          matvec_kernel<DotOf<Unit16<true>>>,
                          matvec_kernel<DotOf<UnitQ8>>,
                          matvec_kernel<DotOf<UnitK<false>>>,
                          matvec_kernel<DotOf<UnitK<true>>>,
                          matvec_kernel<DotOf<UnitQ6>>,
                          matvec_kernel<DotOf<UnitGeneric>>};
  for (MatvecFn f : all) {
    const cudaError_t e =
        cudaFuncSetAttribute(reinterpret_cast<const void*>(f), cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

bool matvec_tokens(int64_t n_tok, int64_t cols) {
  return n_tok >= 1 && n_tok <= kMaxVecTok &&
         static_cast<size_t>(n_tok * padded_cols(cols)) * sizeof(float) <= std::min<size_t>(g_smem_optin, 128 * 1024);
}

cudaError_t matvec(const MatvecJob& job, const float* x, int64_t n_tok, cudaStream_t s) {
  const int64_t cols = job.m[0].cols, padded = padded_cols(cols);
  int64_t total = 0;
  if (job.swiglu) {
    total = job.m[0].rows;
  } else {
    for (int i = 0; i < job.n; ++i) total += job.m[i].rows;
  }
  // Rows per warp: up to 4 where there are rows enough to fill the GPU twice
  // over (x is staged once per block), 1 for small matrices.
  const int64_t warps_wanted = 132 * 64 * 2;
  const int rpw = static_cast<int>(std::clamp<int64_t>(total / warps_wanted, 1, 4));
  const int64_t blocks = (total + kWarps * rpw - 1) / (kWarps * rpw);
  matvec_for(job)<<<static_cast<unsigned>(blocks), kWarps * 32, static_cast<size_t>(n_tok * padded) * sizeof(float), s>>>(
      job, x, cols, padded, total, rpw, static_cast<int>(n_tok));
  return cudaGetLastError();
}

cudaError_t gemm(const DevMat& m, const float* x, int64_t n_tok, float* y, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>((m.rows + kTR - 1) / kTR), static_cast<unsigned>((n_tok + kTT - 1) / kTT));
  gemm_kernel<<<grid, 256, 0, s>>>(m, x, n_tok, y);
  return cudaGetLastError();
}

cudaError_t get_rows(const DevMat& m, const int32_t* ids, int64_t n, float* out, const int64_t* dyn, cudaStream_t s) {
  for (int64_t i = 0; i < n; i += 64) {
    Ids64 chunk{};
    const int64_t k = std::min<int64_t>(64, n - i);
    for (int64_t j = 0; j < k; ++j) chunk.v[j] = ids[i + j];
    get_rows_kernel<<<static_cast<unsigned>(k), 128, 0, s>>>(m, chunk, out + i * m.cols, dyn);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace laya::cuda
