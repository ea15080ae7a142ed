// Weight products: the decode matrix-vector kernels (a streaming one, and one
// warp per row for mixed types; 16-byte loads), a tiled float32 kernel for several
// tokens, and get_rows. Both products read the weights in their stored form
// and multiply in float32 (as the CPU reference does).
#include <algorithm>
#include <map>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cuda/launch.cuh"
#include "backend/cuda/matvec.cuh"

namespace laya::cuda {

namespace {


// Row r of m times xs (staged, padded), summed over the warp. Eight (then
// four) units per lane are loaded before any is used: bytes in flight hide
// the latency of device memory.
// B units of this lane (u, u + 32, ...), all loaded before the first is used.
template <int B, class U>
__device__ __forceinline__ float units_dot(const typename U::Ref& ref, int u, const float* xs) {
  typename U::Raw w[B];
#pragma unroll
  for (int j = 0; j < B; ++j) w[j] = U::load(ref, u + 32 * j);
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < B; ++j) s += U::dot(w[j], ref, u + 32 * j, xs);
  return s;
}

template <class U>
__device__ float row_dot(const DevMat& m, int64_t r, const float* xs, int lane) {
  const int n = static_cast<int>(U::units(m.cols));
  const typename U::Ref ref = U::row(m, r);
  float s = 0.f;
  int u = lane;
  for (; u + 224 < n; u += 256) s += units_dot<8, U>(ref, u, xs);
  for (; u + 96 < n; u += 128) s += units_dot<4, U>(ref, u, xs);
  for (; u < n; u += 32) s += units_dot<1, U>(ref, u, xs);
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
    case DType::MLX_Q4:
      return mlx_unit_type(m.type, m.group_type) ? row_dot<UnitMlx<4>>(m, r, xs, lane) : row_dot<UnitGeneric>(m, r, xs, lane);
    case DType::MLX_Q8:
      return mlx_unit_type(m.type, m.group_type) ? row_dot<UnitMlx<8>>(m, r, xs, lane) : row_dot<UnitGeneric>(m, r, xs, lane);
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
  __shared__ double part[kMaxVecTok][kWarps];
  stage_x(job, x, cols, padded, n_tok, xs, part, blockIdx.x == 0);
  if (job_wants_x_sums(job)) stage_x_sums(xs, padded, n_tok);
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
        const float v = job.bias[i] ? s + job.bias[i][r] : s;
        *y = job.accumulate ? *y + v : v;
      }
    }
  }
}

// The kernels: as many blocks per SM as the registers allow (no minimum: with
// an explicit minimum of 1, ptxas took more registers for Q8_0 and the GPU ran
// 2 blocks per SM instead of 3: the output layer 90 -> 105 us), and the deep
// chunks' kernel at 2 blocks per SM.
template <class U, int B, bool kSwiglu, int T>
__global__ void __launch_bounds__(kWarps * 32) matvec_stream_kernel(const __grid_constant__ MatvecJob job,
                                                                    const float* __restrict__ x, int64_t cols,
                                                                    int64_t padded, int64_t total, int n_tok) {
  LAYA_DYNAMIC_SHARED(float, xs);
  __shared__ double part[kMaxVecTok][kWarps];
  matvec_stream<U, B, kSwiglu, T>(job, x, cols, padded, total, n_tok, xs, part, blockIdx.x, gridDim.x, [] { pdl_enter(); });
}
template <class U, int B, bool kSwiglu>
__global__ void __launch_bounds__(kWarps * 32, 2) matvec_stream_deep_kernel(const __grid_constant__ MatvecJob job,
                                                                            const float* __restrict__ x, int64_t cols,
                                                                            int64_t padded, int64_t total, int n_tok) {
  LAYA_DYNAMIC_SHARED(float, xs);
  __shared__ double part[kMaxVecTok][kWarps];
  matvec_stream<U, B, kSwiglu, 1>(job, x, cols, padded, total, n_tok, xs, part, blockIdx.x, gridDim.x, [] { pdl_enter(); });
}

using StreamFn = void (*)(const MatvecJob, const float*, int64_t, int64_t, int64_t, int);

// One token over rows of at least 64 * B units a lane (BF16 / F16 rows of
// 2,048 values and more, Q8_0 rows of 4,096 and more): chunks of 2 * B
// units, 2 blocks per SM (registers). Measured on the H200, 1B decode p50:
// BF16 1.558 -> 1.464 ms; Q8_0, where only the FFN's down rows qualify,
// 1.372 -> 1.385 with every row deep (noise), so only the long rows are.
// CudaTuning::stream_deep = false (LAYA_CUDA_STREAM_DEEP=0) turns it off.

template <class U>
StreamFn stream_of(bool swiglu, bool one_token, bool deep) {
  constexpr int B1 = stream_units<U, 1>(), B2 = stream_units<U, 2>();
  if constexpr (std::is_same_v<U, UnitQ8> || std::is_same_v<U, Unit16<true>> || std::is_same_v<U, Unit16<false>>) {
    if (one_token && deep)
      return swiglu ? matvec_stream_deep_kernel<U, 2 * B2, true> : matvec_stream_deep_kernel<U, 2 * B1, false>;
  }
  if (swiglu) return one_token ? matvec_stream_kernel<U, B2, true, 1> : matvec_stream_kernel<U, B2, true, kMaxVecTok>;
  return one_token ? matvec_stream_kernel<U, B1, false, 1> : matvec_stream_kernel<U, B1, false, kMaxVecTok>;
}

// True where every matrix of the job (both of a SwiGLU) has the first's type
// (MLX: and the decode units read each, mlx_unit_type).
bool one_type(const MatvecJob& job) {
  const int n = job.swiglu ? 2 : job.n;
  for (int i = 0; i < n; ++i) {
    if (job.m[i].type != job.m[0].type) return false;
    if (mlx_bits(job.m[i].type) && !mlx_unit_type(job.m[i].type, job.m[i].group_type)) return false;
  }
  return true;
}

// The streaming kernel for a job, or nullptr where the per-row kernel takes it
// (matrices of different types, or a type without 16-byte units). deep_ok:
// CudaTuning::stream_deep.
StreamFn stream_for(const MatvecJob& job, int64_t n_tok, bool deep_ok) {
  if (!one_type(job)) return nullptr;
  const bool one = n_tok == 1;
  // Q8_0 / F16 / BF16 rows are whole 16-byte units (the device stride); the
  // deep chunks want 64 * B of them a lane.
  const bool deep = deep_rows(job.m[0], deep_ok);
  static_assert(stream_units<UnitQ8, 1>() == stream_units<Unit16<true>, 1>());
  switch (job.m[0].type) {
    case DType::F32: return stream_of<UnitF32>(job.swiglu, one, deep);
    case DType::F16: return stream_of<Unit16<false>>(job.swiglu, one, deep);
    case DType::BF16: return stream_of<Unit16<true>>(job.swiglu, one, deep);
    case DType::Q8_0: return stream_of<UnitQ8>(job.swiglu, one, deep);
    case DType::Q4_K: return stream_of<UnitK<false>>(job.swiglu, one, deep);
    case DType::Q5_K: return stream_of<UnitK<true>>(job.swiglu, one, deep);
    case DType::Q6_K: return stream_of<UnitQ6>(job.swiglu, one, deep);
    case DType::MLX_Q4: return stream_of<UnitMlx<4>>(job.swiglu, one, deep);
    case DType::MLX_Q8: return stream_of<UnitMlx<8>>(job.swiglu, one, deep);
    default: return nullptr;
  }
}

// Every instantiation, for configure().
template <class U>
void each_stream_of(std::vector<StreamFn>* out) {
  for (bool deep : {false, true})
    for (bool sw : {false, true})
      for (bool one : {false, true}) out->push_back(stream_of<U>(sw, one, deep));
}
std::vector<StreamFn> all_stream_kernels() {
  std::vector<StreamFn> v;
  each_stream_of<UnitF32>(&v);
  each_stream_of<Unit16<false>>(&v);
  each_stream_of<Unit16<true>>(&v);
  each_stream_of<UnitQ8>(&v);
  each_stream_of<UnitK<false>>(&v);
  each_stream_of<UnitK<true>>(&v);
  each_stream_of<UnitQ6>(&v);
  each_stream_of<UnitMlx<4>>(&v);
  each_stream_of<UnitMlx<8>>(&v);
  return v;
}

using MatvecFn = void (*)(const MatvecJob, const float*, int64_t, int64_t, int64_t, int, int);

// The kernel for a job: one type's when every matrix has it, else the general one.
MatvecFn matvec_for(const MatvecJob& job) {
  if (!one_type(job)) return matvec_kernel<DotAny>;
  switch (job.m[0].type) {
    case DType::F32: return matvec_kernel<DotOf<UnitF32>>;
    case DType::F16: return matvec_kernel<DotOf<Unit16<false>>>;
    case DType::BF16: return matvec_kernel<DotOf<Unit16<true>>>;
    case DType::Q8_0: return matvec_kernel<DotOf<UnitQ8>>;
    case DType::Q4_K: return matvec_kernel<DotOf<UnitK<false>>>;
    case DType::Q5_K: return matvec_kernel<DotOf<UnitK<true>>>;
    case DType::Q6_K: return matvec_kernel<DotOf<UnitQ6>>;
    case DType::MLX_Q4: return matvec_kernel<DotOf<UnitMlx<4>>>;
    case DType::MLX_Q8: return matvec_kernel<DotOf<UnitMlx<8>>>;
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

cudaError_t configure(const CudaTuning& tuning, Launch* out) {
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
                          matvec_kernel<DotOf<UnitMlx<4>>>,
                          matvec_kernel<DotOf<UnitMlx<8>>>,
                          matvec_kernel<DotOf<UnitGeneric>>};
  for (MatvecFn f : all)
    if (cudaError_t e = allow_smem(reinterpret_cast<const void*>(f), bytes); e != cudaSuccess) return e;
  for (StreamFn f : all_stream_kernels())
    if (cudaError_t e = allow_smem(reinterpret_cast<const void*>(f), bytes); e != cudaSuccess) return e;
  Launch l;
  l.tuning = tuning;
  if (cudaError_t e = cudaDeviceGetAttribute(&l.sms, cudaDevAttrMultiProcessorCount, dev); e != cudaSuccess) return e;
  if (cudaError_t e = cudaDeviceGetAttribute(&l.clock_khz, cudaDevAttrClockRate, dev); e != cudaSuccess) return e;
  l.smem_optin = bytes - 1024;  // what matvec_tokens() may ask for: the reduction's static bytes are far fewer
  // On by default: with the streaming kernel, whose first weight loads go out before pdl_wait(),
  // llama-3.2-1b Q8_0 decode p50 1.277 -> 1.210 ms on the H200. (With the per-row kernel alone it
  // measured slower, 1.70 against 1.63: its L2 prefetches competed with the running kernel.)
  l.chained = major >= 9 && tuning.chained;
  *out = l;
  return cudaSuccess;
}

bool matvec_tokens(const Launch& l, int64_t n_tok, int64_t cols) {
  return n_tok >= 1 && n_tok <= kMaxVecTok &&
         static_cast<size_t>(n_tok * xpad_size(padded_cols(cols))) * sizeof(float) <= std::min<size_t>(l.smem_optin, 128 * 1024);
}

namespace {
// Blocks of kernel f (with smem bytes of x) one multiprocessor runs at once,
// asked once per (kernel, bytes).
int resident_blocks(StreamFn f, size_t smem) {
  static std::mutex mu;
  static std::map<std::pair<const void*, size_t>, int> known;
  const std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(reinterpret_cast<const void*>(f), smem);
  if (auto it = known.find(key); it != known.end()) return it->second;
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, f, kWarps * 32, smem) != cudaSuccess) {
    cudaGetLastError();
    n = 1;
  }
  return known[key] = std::max(n, 1);
}

// Warps of the streaming kernel for `total` rows: no more than the GPU runs at
// once, and as few as give every warp the same number of rows (the slowest
// warp sets the kernel's time).
int64_t stream_warps(const Launch& l, StreamFn f, size_t smem, int64_t total) {
  const int per_sm = l.tuning.stream_blocks > 0 ? l.tuning.stream_blocks : resident_blocks(f, smem);
  const int64_t most = static_cast<int64_t>(l.sms) * per_sm * kWarps;
  const int64_t rows_each = (total + most - 1) / most;
  return (total + rows_each - 1) / rows_each;
}
}  // namespace

cudaError_t matvec(const Launch& l, const MatvecJob& job, const float* x, int64_t n_tok, cudaStream_t s) {
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
  const int rpw = l.tuning.rows_per_warp > 0 ? l.tuning.rows_per_warp
                                             : static_cast<int>(std::clamp<int64_t>(total / warps_wanted, 1, 4));
  const int64_t blocks = (total + kWarps * rpw - 1) / (kWarps * rpw);
  MatvecJob j = job;
  j.prefetch = l.chained || l.tuning.prefetch;
  if (StreamFn f = l.tuning.stream ? stream_for(j, n_tok, l.tuning.stream_deep) : nullptr) {
    const size_t smem = static_cast<size_t>(n_tok * xpad_size(padded)) * sizeof(float);
    const int64_t warps = stream_warps(l, f, smem, total);
    return launch_chained(l.chained, f, dim3(static_cast<unsigned>((warps + kWarps - 1) / kWarps)), dim3(kWarps * 32),
                          smem, s, j, x, cols, padded, total, static_cast<int>(n_tok));
  }
  return launch_chained(l.chained, matvec_for(j), dim3(static_cast<unsigned>(blocks)), dim3(kWarps * 32),
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
