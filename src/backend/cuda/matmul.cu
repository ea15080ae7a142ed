// Weight products: the decode matrix-vector kernel (one warp per row, 16-byte
// loads, four loads in flight per lane), a tiled float32 kernel for several
// tokens, and get_rows. Both products read the weights in their stored form
// and multiply in float32 (as the CPU reference does).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/launch.cuh"
#include "backend/cuda/units.cuh"

namespace laya::cuda {

namespace {

constexpr int kWarps = 8;  // warps per block of the decode kernel
constexpr int64_t kPadCols = 256;  // x is staged in shared memory padded to a multiple of this (zeros)

__device__ __forceinline__ float warp_sum(float s) {
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  return s;
}

// Row r of m times xs (staged, padded), summed over the warp. Eight (then
// four) units per lane are loaded before any is used: bytes in flight hide
// the latency of device memory.
// B units of this lane (u, u + 32, ...), all loaded before the first is used.
template <int B, class U>
__device__ __forceinline__ float units_dot(const DevMat& m, int64_t r, int64_t u, const float* xs) {
  typename U::Raw w[B];
#pragma unroll
  for (int j = 0; j < B; ++j) w[j] = U::load(m, r, u + 32 * j);
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < B; ++j) s += U::dot(w[j], m, r, u + 32 * j, xs);
  return s;
}

template <class U>
__device__ float row_dot(const DevMat& m, int64_t r, const float* xs, int lane) {
  const int64_t n = U::units(m.cols);
  float s = 0.f;
  int64_t u = lane;
  for (; u + 224 < n; u += 256) s += units_dot<8, U>(m, r, u, xs);
  for (; u + 96 < n; u += 128) s += units_dot<4, U>(m, r, u, xs);
  for (; u < n; u += 32) s += units_dot<1, U>(m, r, u, xs);
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

// Stages x (n_tok rows of cols) in shared memory, padded (units.cuh), zeros
// past cols; with job.norm_w, RMS-normalised first (job.norm_out gets the
// normalised rows from block 0: what rms_norm would have written).
__device__ void stage_x(const MatvecJob& job, const float* __restrict__ x, int64_t cols, int64_t padded, int n_tok,
                        float* xs) {
  const int64_t stride = xpad_size(padded);
  if ((cols & 3) == 0) {  // 16-byte loads, four in flight per thread
    const int64_t n4 = padded / 4;
    for (int t = 0; t < n_tok; ++t) {
      const float4* x4g = reinterpret_cast<const float4*>(x + t * cols);
      for (int64_t i = threadIdx.x; i < n4; i += 4 * blockDim.x) {
        float4 v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int64_t k = i + j * blockDim.x;
          v[j] = k * 4 < cols ? __ldg(x4g + k) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int64_t k = i + j * blockDim.x;
          if (k < n4) *reinterpret_cast<float4*>(xs + t * stride + xpad(4 * k)) = v[j];
        }
      }
    }
  } else {
    for (int t = 0; t < n_tok; ++t)
      for (int64_t i = threadIdx.x; i < padded; i += blockDim.x) xs[t * stride + xpad(i)] = i < cols ? x[t * cols + i] : 0.f;
  }
  __syncthreads();
  if (!job.norm_w) return;
  // RMSNorm per token: the mean square in double, as rms_norm (and the CPU reference) computes it.
  __shared__ double part[kWarps];
  __shared__ float inv[kMaxVecTok];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int t = 0; t < n_tok; ++t) {
    double ss = 0;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
      const double v = xs[t * stride + xpad(i)];
      ss += v * v;
    }
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    if (lane == 0) part[warp] = ss;
    __syncthreads();
    if (threadIdx.x == 0) {
      double tot = 0;
      for (int w = 0; w < kWarps; ++w) tot += part[w];
      inv[t] = static_cast<float>(1.0 / sqrt(tot / static_cast<double>(cols) + job.norm_eps));
    }
    __syncthreads();
  }
  for (int t = 0; t < n_tok; ++t)
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
      float* p = xs + t * stride + xpad(i);
      const float v = job.norm_w[i] * (*p * inv[t]);
      *p = v;
      if (blockIdx.x == 0 && job.norm_out) job.norm_out[t * cols + i] = v;
    }
  __syncthreads();
}

// Row R of the job's matrices laid end to end: which matrix (returned) and
// its row there (*r, given R).
__device__ __forceinline__ int job_row(const MatvecJob& job, int64_t* r) {
  int i = 0;
  while (i + 1 < job.n && *r >= job.m[i].rows) *r -= job.m[i++].rows;
  return i;
}

// The rows a warp will multiply, into L2: one prefetch per 128 bytes.
__device__ void prefetch_rows(const MatvecJob& job, int64_t first, int rpw, int64_t total, int lane) {
  for (int64_t R = first; R < first + rpw && R < total; ++R) {
    int64_t r = R;
    const int i = job.swiglu ? 0 : job_row(job, &r);
    for (int k = i; k <= (job.swiglu ? 1 : i); ++k) {
      const DevMat& m = job.m[k];
      const uint8_t* row = m.data + static_cast<size_t>(r) * m.stride;
      for (size_t off = static_cast<size_t>(lane) * 128; off < m.stride; off += 32 * 128) prefetch_l2(row + off);
    }
  }
}

// Grid: blocks of kWarps warps, each warp `rpw` consecutive rows of the
// matrices laid end to end. D: the row product, one type's (the job's
// matrices all of that type: small, fully inlined code) or any type's.
// n_tok > 1 (a keystroke's few new tokens): every token's x is staged, and a
// warp multiplies its row with each in turn; the row's bytes come from
// device memory once and from L1 after. job.accumulate: y += the product
// (the residual connection), each output written by one lane only.
template <class D>
__global__ void __launch_bounds__(kWarps * 32) matvec_kernel(const MatvecJob job, const float* __restrict__ x,
                                                             int64_t cols, int64_t padded, int64_t total, int rpw,
                                                             int n_tok) {
  LAYA_DYNAMIC_SHARED(float, xs);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * rpw;
  // The weights depend on no earlier kernel: into L2 while that one ends.
  if (job.prefetch) prefetch_rows(job, first, rpw, total, lane);
  pdl_enter();
  stage_x(job, x, cols, padded, n_tok, xs);
  const int64_t stride = xpad_size(padded);
  for (int64_t R = first; R < first + rpw && R < total; ++R) {
    if (job.swiglu) {
      for (int t = 0; t < n_tok; ++t) {
        const float g = D::dot(job.m[0], R, xs + t * stride, lane), u = D::dot(job.m[1], R, xs + t * stride, lane);
        if (lane == 0) {
          job.y[0][t * total + R] = g;
          job.y[1][t * total + R] = g / (1.0f + expf(-g)) * u;
        }
      }
      continue;
    }
    int64_t r = R;
    const int i = job_row(job, &r);
    for (int t = 0; t < n_tok; ++t) {
      const float s = D::dot(job.m[i], r, xs + t * stride, lane);
      if (lane == 0) {
        float* y = job.y[i] + t * job.m[i].rows + r;
        *y = job.accumulate ? *y + s : s;
      }
    }
  }
}

// ---- several rows per warp at once (LAYA_CUDA_TILE=1; off: measured 18 % slower on Q8_0, 4-5 % on BF16, docs/CUDA.md) ----
// A warp multiplies kTile rows together: each unit's x comes from shared
// memory once for all of them, and 2 * kTile rows' loads are in flight before
// any is used (the profile in docs/CUDA.md: the decode kernel waits on its
// loads). F16 / BF16 / Q8_0 jobs of one type, not SwiGLU.
constexpr int kTile = 4;

template <class U>
__global__ void __launch_bounds__(kWarps * 32) matvec_tile_kernel(const MatvecJob job, const float* __restrict__ x,
                                                                  int64_t cols, int64_t padded, int64_t total,
                                                                  int n_tok) {
  LAYA_DYNAMIC_SHARED(float, xs);
  pdl_enter();
  stage_x(job, x, cols, padded, n_tok, xs);
  const int64_t stride = xpad_size(padded);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * kTile;
  DevMat m[kTile];
  int64_t rr[kTile];
  float* y[kTile];
  bool ok[kTile];
#pragma unroll
  for (int k = 0; k < kTile; ++k) {
    int64_t r = first + k;
    ok[k] = r < total;
    const int i = job_row(job, &r);
    m[k] = job.m[i];
    rr[k] = r;
    y[k] = job.y[i];
  }
  const int64_t n = U::units(cols);
  for (int t = 0; t < n_tok; ++t) {
    const float* xt = xs + t * stride;
    float acc[kTile] = {};
    int64_t u = lane;
    for (; u + 32 < n; u += 64) {
      typename U::Raw w0[kTile], w1[kTile];
#pragma unroll
      for (int k = 0; k < kTile; ++k)
        if (ok[k]) {
          w0[k] = U::load(m[k], rr[k], u);
          w1[k] = U::load(m[k], rr[k], u + 32);
        }
      const typename U::X x0 = U::xload(xt, u), x1 = U::xload(xt, u + 32);
#pragma unroll
      for (int k = 0; k < kTile; ++k)
        if (ok[k]) acc[k] += U::dotx(w0[k], m[k], rr[k], u, x0) + U::dotx(w1[k], m[k], rr[k], u + 32, x1);
    }
    for (; u < n; u += 32) {
      const typename U::X x0 = U::xload(xt, u);
#pragma unroll
      for (int k = 0; k < kTile; ++k)
        if (ok[k]) acc[k] += U::dotx(U::load(m[k], rr[k], u), m[k], rr[k], u, x0);
    }
#pragma unroll
    for (int k = 0; k < kTile; ++k) {
      const float sum = warp_sum(acc[k]);  // ok[k] is the same on every lane
      if (ok[k] && lane == 0) {
        float* o = y[k] + t * m[k].rows + rr[k];
        *o = job.accumulate ? *o + sum : sum;
      }
    }
  }
}

using TileFn = void (*)(const MatvecJob, const float*, int64_t, int64_t, int64_t, int);

// The tile kernel for a job, or nullptr where it does not apply.
TileFn tile_for(const MatvecJob& job) {
  if (job.swiglu) return nullptr;
  for (int i = 1; i < job.n; ++i)
    if (job.m[i].type != job.m[0].type) return nullptr;
  switch (job.m[0].type) {
    case DType::F16: return matvec_tile_kernel<Unit16<false>>;
    case DType::BF16: return matvec_tile_kernel<Unit16<true>>;
    case DType::Q8_0: return matvec_tile_kernel<UnitQ8>;
    default: return nullptr;
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
  pdl_enter();
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
  pdl_enter();
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
bool g_pdl = false;               // programmatic dependent launch (configure())
// Tuning knobs read once by configure(), for measuring variants on the GPU
// in one call (bench/cuda/run_on_device.sh's "sweep"): LAYA_CUDA_PREFETCH=1
// prefetches a warp's rows into L2 before staging x even without chained
// launches; LAYA_CUDA_RPW=1..4 fixes the rows per warp.
bool g_prefetch = false;
int g_rpw = 0;
bool g_tile = false;  // LAYA_CUDA_TILE=1: matvec_tile_kernel where it applies

}  // namespace

namespace {
// Lets kernel f take `bytes` of shared memory in all: dynamic plus its static
// (stage_x's reduction), within the device's opt-in limit.
cudaError_t allow_smem(const void* f, size_t bytes) {
  cudaFuncAttributes fa{};
  if (cudaError_t e = cudaFuncGetAttributes(&fa, f); e != cudaSuccess) return e;
  return cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes - fa.sharedSizeBytes));
}
}  // namespace

cudaError_t configure(int64_t max_cols) {
  (void)max_cols;
  // The whole opt-in shared memory: x of up to kMaxVecTok tokens (matvec_tokens()).
  int dev = 0, optin = 0, major = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  if (cudaError_t e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev); e != cudaSuccess) return e;
  if (cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev); e != cudaSuccess) return e;
  const size_t bytes = static_cast<size_t>(optin);
  const MatvecFn all[] = {matvec_kernel<DotAny>,
                          matvec_kernel<DotOf<UnitF32>>,
                          matvec_kernel<DotOf<Unit16<false>>>,
                          matvec_kernel<DotOf<Unit16<true>>>,
                          matvec_kernel<DotOf<UnitQ8>>,
                          matvec_kernel<DotOf<UnitK<false>>>,
                          matvec_kernel<DotOf<UnitK<true>>>,
                          matvec_kernel<DotOf<UnitQ6>>,
                          matvec_kernel<DotOf<UnitGeneric>>};
  for (MatvecFn f : all)
    if (cudaError_t e = allow_smem(reinterpret_cast<const void*>(f), bytes); e != cudaSuccess) return e;
  const TileFn tiles[] = {matvec_tile_kernel<Unit16<false>>, matvec_tile_kernel<Unit16<true>>, matvec_tile_kernel<UnitQ8>};
  for (TileFn f : tiles)
    if (cudaError_t e = allow_smem(reinterpret_cast<const void*>(f), bytes); e != cudaSuccess) return e;
  g_smem_optin = bytes - 1024;  // what matvec_tokens() may ask for: the reduction's static bytes are far fewer
  // Off unless LAYA_CUDA_PDL=1: on the H200 it measured slower (llama-3.2-1b Q8_0 decode p50 1.70 ms
  // with it, 1.63 without): the early blocks' L2 prefetches compete with the running kernel's loads,
  // which are latency-bound already (docs/CUDA.md, "Measured").
  auto knob = [](const char* name) {
    const char* v = std::getenv(name);
    return v && std::strcmp(v, "1") == 0;
  };
  g_pdl = major >= 9 && knob("LAYA_CUDA_PDL");
  g_prefetch = knob("LAYA_CUDA_PREFETCH");
  g_tile = knob("LAYA_CUDA_TILE");
  const char* rpw = std::getenv("LAYA_CUDA_RPW");
  g_rpw = rpw && rpw[0] >= '1' && rpw[0] <= '4' && rpw[1] == 0 ? rpw[0] - '0' : 0;
  return cudaSuccess;
}

bool pdl_enabled() { return g_pdl; }

bool matvec_tokens(int64_t n_tok, int64_t cols) {
  return n_tok >= 1 && n_tok <= kMaxVecTok &&
         static_cast<size_t>(n_tok * xpad_size(padded_cols(cols))) * sizeof(float) <= std::min<size_t>(g_smem_optin, 128 * 1024);
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
  const int rpw = g_rpw > 0 ? g_rpw : static_cast<int>(std::clamp<int64_t>(total / warps_wanted, 1, 4));
  const int64_t blocks = (total + kWarps * rpw - 1) / (kWarps * rpw);
  MatvecJob j = job;
  j.prefetch = pdl_enabled() || g_prefetch;
  if (TileFn f = g_tile ? tile_for(j) : nullptr) {
    const int64_t tblocks = (total + kWarps * kTile - 1) / (kWarps * kTile);
    return launch_chained(f, dim3(static_cast<unsigned>(tblocks)), dim3(kWarps * 32),
                          static_cast<size_t>(n_tok * xpad_size(padded)) * sizeof(float), s, j, x, cols, padded, total,
                          static_cast<int>(n_tok));
  }
  return launch_chained(matvec_for(j), dim3(static_cast<unsigned>(blocks)), dim3(kWarps * 32),
                        static_cast<size_t>(n_tok * xpad_size(padded)) * sizeof(float), s, j, x, cols, padded, total, rpw,
                        static_cast<int>(n_tok));
}

cudaError_t gemm(const DevMat& m, const float* x, int64_t n_tok, float* y, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>((m.rows + kTR - 1) / kTR), static_cast<unsigned>((n_tok + kTT - 1) / kTT));
  LAYA_LAUNCH(gemm_kernel, grid, 256, 0, s)(m, x, n_tok, y);
  return cudaGetLastError();
}

cudaError_t get_rows(const DevMat& m, const int32_t* ids, int64_t n, float* out, const int64_t* dyn, cudaStream_t s) {
  for (int64_t i = 0; i < n; i += 64) {
    Ids64 chunk{};
    const int64_t k = std::min<int64_t>(64, n - i);
    for (int64_t j = 0; j < k; ++j) chunk.v[j] = ids[i + j];
    LAYA_LAUNCH(get_rows_kernel, static_cast<unsigned>(k), 128, 0, s)(m, chunk, out + i * m.cols, dyn);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace laya::cuda
