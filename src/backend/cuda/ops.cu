// Element-wise ops, RMSNorm, RoPE, and the KV cache: kv_store and attention
// over the block pool in the CPU backend's layouts (cpu/attention.h), so a
// session's KV blocks mean the same on either backend.
#include <algorithm>
#include <cmath>

#include "backend/cuda/attention.cuh"
#include "backend/cuda/launch.cuh"

namespace laya::cuda {

namespace {

unsigned blocks_for(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

__global__ void rms_norm_kernel(const float* x, const float* __restrict__ w, int64_t n, float eps, float* out) {
  pdl_enter();
  __shared__ double part[32];
  rms_norm_row(blockIdx.x, x, w, n, eps, out, part);
}

__global__ void add_bias_kernel(float* y, const float* __restrict__ b, int64_t n_rows, int64_t n) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n_rows * n) y[i] += b[i % n];
}

__global__ void add_kernel(float* y, const float* x, int64_t n) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

__global__ void scale_kernel(float* x, int64_t n, float f) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= f;
}

__global__ void softcap_kernel(float* x, int64_t n, float cap) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = cap * tanhf(x[i] / cap);
}

__global__ void mul_kernel(float* y, const float* x, int64_t n) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] *= x[i];
}

// The CPU reference's float32 formula (gelu_pytorch_tanh).
__global__ void gelu_kernel(float* x, int64_t n) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
  }
}

// The sum of every thread's v over the block (blockDim.x a multiple of 32),
// through part[32]; every thread gets it.
__device__ double block_sum(double v, double* part) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    double t = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.0;
    for (int off = 16; off > 0; off >>= 1) t += __shfl_xor_sync(0xffffffffu, t, off);
    if (threadIdx.x == 0) part[0] = t;
  }
  __syncthreads();
  const double s = part[0];
  __syncthreads();  // part is reused by the next sum
  return s;
}

// One block per row: the mean, then the variance about it, in double as the CPU reference.
__global__ void layer_norm_kernel(const float* x, const float* __restrict__ w, const float* __restrict__ b, int64_t n,
                                  float eps, float* out) {
  pdl_enter();
  __shared__ double part[32];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * n;
  float* o = out + static_cast<int64_t>(blockIdx.x) * n;
  double sum = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += xr[i];
  const double mean = block_sum(sum, part) / static_cast<double>(n);
  double ss = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss += (xr[i] - mean) * (xr[i] - mean);
  const float inv = static_cast<float>(1.0 / sqrt(block_sum(ss, part) / static_cast<double>(n) + eps));
  const float m = static_cast<float>(mean);
  // In place is safe: each thread rereads only the values it summed.
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) o[i] = (xr[i] - m) * inv * w[i] + b[i];
}

__global__ void silu_mul_kernel(const float* gate, float* out, int64_t n) {
  pdl_enter();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = gate[i] / (1.0f + expf(-gate[i])) * out[i];
}

// One thread per rotated pair.
__global__ void rope_kernel(float* x, int64_t n_tok, int64_t n_heads, int64_t hd, int64_t pos0_arg,
                            const float* __restrict__ cs, const float* __restrict__ sn, int64_t half, bool interleaved,
                            const int64_t* dyn) {
  pdl_enter();
  const int64_t pos0 = dyn ? dyn[1] : pos0_arg;
  const int64_t hh = hd / 2;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n_tok * n_heads * hh) return;
  const int64_t i = idx % hh, th = idx / hh, t = th / n_heads;
  rotate_pair(x + th * hd, i, hd, pos0 + t, cs, sn, half, interleaved);
}

// F32 / F16: one thread per (token, head, dim).
__global__ void kv_store_kernel(const KvArgs kv, const float* k, const float* v, int64_t n_tok, int64_t pos0_arg,
                                const int64_t* dyn) {
  pdl_enter();
  const int64_t pos0 = dyn ? dyn[1] : pos0_arg;
  const int64_t hd = kv.head_dim, kvd = kv.n_head_kv * hd;
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n_tok * kvd) return;
  const int64_t t = idx / kvd, g = (idx % kvd) / hd, i = idx % hd;
  store_kv_value(kv, pos0 + t, g, i, k[idx], v[idx]);
}

// rope of q and k in one launch, one thread per rotated pair (rope_store_at).
__global__ void rope_store_kernel(float* q, float* k, const float* v, const KvArgs kv, bool store, int64_t n_tok,
                                  int64_t n_head, int64_t pos0_arg, const float* __restrict__ cs,
                                  const float* __restrict__ sn, int64_t half, bool interleaved, const int64_t* dyn) {
  pdl_enter();
  const int64_t pos0 = dyn ? dyn[1] : pos0_arg;
  rope_store_at(static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x, q, k, v, kv, store, n_tok, n_head, pos0,
                cs, sn, half, interleaved);
}

// Q8_0: one warp per (token, head, 32 values) (kv_store_q8_warp).
__global__ void kv_store_q8_kernel(const KvArgs kv, const float* k, const float* v, int64_t n_tok, int64_t pos0_arg,
                                   const int64_t* dyn) {
  pdl_enter();
  const int64_t pos0 = dyn ? dyn[1] : pos0_arg;
  kv_store_q8_warp((static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32, threadIdx.x & 31, kv, k, v, n_tok,
                   pos0);
}

template <int ND>
__global__ void __launch_bounds__(kAttnWarps * 32) attention_kernel(const KvArgs kv, const float* q, int64_t pos0_arg,
                                                                    int64_t n_head, int64_t group, float scale,
                                                                    int64_t window, float softcap, float* out,
                                                                    const int64_t* dyn, AttnSplit split) {
  pdl_enter();
  LAYA_DYNAMIC_SHARED(float, sm);
  __shared__ int last;
  attention_block<ND>(kv, q, dyn ? dyn[1] : pos0_arg, n_head, group, AttnScore{scale, softcap, window}, out, split,
                      blockIdx.x, blockIdx.y, blockIdx.z, gridDim.z, sm, &last);
}

template <int ND>
cudaError_t launch_attention(const KvArgs& kv, const float* q, int64_t n_tok, int64_t pos0, int64_t n_head, float scale,
                             int64_t window, float softcap, float* out, const int64_t* dyn, const AttnSplit& split,
                             bool chained, cudaStream_t s) {
  const int64_t group = n_head / kv.n_head_kv;
  AttnSplit sp = split;
  if (n_tok != 1 || sp.n < 1) sp.n = 1;  // several tokens: a block per token already
  const dim3 grid(static_cast<unsigned>(n_tok), static_cast<unsigned>(kv.n_head_kv),
                  static_cast<unsigned>((group + kMaxG - 1) / kMaxG * sp.n));
  const size_t smem = attention_smem<ND>();
  if (cudaError_t e = launch_chained(chained, attention_kernel<ND>, grid, dim3(kAttnWarps * 32), smem, s, kv, q, pos0, n_head, group,
                                     scale, window, softcap, out, dyn, sp);
      e != cudaSuccess)
    return e;
  return cudaGetLastError();
}

}  // namespace

cudaError_t rms_norm(const float* x, const float* w, int64_t n_rows, int64_t n, float eps, float* out, cudaStream_t s) {
  if (n_rows == 0) return cudaSuccess;
  LAYA_LAUNCH(rms_norm_kernel, static_cast<unsigned>(n_rows), n >= 1024 ? 256 : 64, 0, s)(x, w, n, eps, out);
  return cudaGetLastError();
}

cudaError_t add_bias(float* y, const float* b, int64_t n_rows, int64_t n, cudaStream_t s) {
  if (n_rows * n == 0) return cudaSuccess;
  LAYA_LAUNCH(add_bias_kernel, blocks_for(n_rows * n, 256), 256, 0, s)(y, b, n_rows, n);
  return cudaGetLastError();
}

cudaError_t add(float* y, const float* x, int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  LAYA_LAUNCH(add_kernel, blocks_for(n, 256), 256, 0, s)(y, x, n);
  return cudaGetLastError();
}

cudaError_t scale(float* x, int64_t n, float f, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  LAYA_LAUNCH(scale_kernel, blocks_for(n, 256), 256, 0, s)(x, n, f);
  return cudaGetLastError();
}

cudaError_t softcap(float* x, int64_t n, float cap, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  LAYA_LAUNCH(softcap_kernel, blocks_for(n, 256), 256, 0, s)(x, n, cap);
  return cudaGetLastError();
}

cudaError_t mul(float* y, const float* x, int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  LAYA_LAUNCH(mul_kernel, blocks_for(n, 256), 256, 0, s)(y, x, n);
  return cudaGetLastError();
}

cudaError_t gelu(float* x, int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  LAYA_LAUNCH(gelu_kernel, blocks_for(n, 256), 256, 0, s)(x, n);
  return cudaGetLastError();
}

cudaError_t layer_norm(const float* x, const float* w, const float* b, int64_t n_rows, int64_t n, float eps, float* out,
                       cudaStream_t s) {
  if (n_rows == 0) return cudaSuccess;
  LAYA_LAUNCH(layer_norm_kernel, static_cast<unsigned>(n_rows), n >= 1024 ? 256 : 64, 0, s)(x, w, b, n, eps, out);
  return cudaGetLastError();
}

cudaError_t silu_mul(const float* gate, float* out, int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  LAYA_LAUNCH(silu_mul_kernel, blocks_for(n, 256), 256, 0, s)(gate, out, n);
  return cudaGetLastError();
}

cudaError_t rope(float* x, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t pos0, const float* cos,
                 const float* sin, int64_t half, bool interleaved, const int64_t* dyn, cudaStream_t s) {
  const int64_t n = n_tok * n_heads * (head_dim / 2);
  if (n == 0) return cudaSuccess;
  LAYA_LAUNCH(rope_kernel, blocks_for(n, 256), 256, 0, s)(x, n_tok, n_heads, head_dim, pos0, cos, sin, half, interleaved, dyn);
  return cudaGetLastError();
}

cudaError_t kv_store(const KvArgs& kv, const float* k, const float* v, int64_t n_tok, int64_t pos0, const int64_t* dyn,
                     cudaStream_t s) {
  if (n_tok == 0) return cudaSuccess;
  if (kv.type == DType::Q8_0) {
    const int64_t threads = n_tok * kv.n_head_kv * (kv.head_dim / 32) * 32;
    LAYA_LAUNCH(kv_store_q8_kernel, blocks_for(threads, 256), 256, 0, s)(kv, k, v, n_tok, pos0, dyn);
  } else {
    LAYA_LAUNCH(kv_store_kernel, blocks_for(n_tok * kv.n_head_kv * kv.head_dim, 256), 256, 0, s)(kv, k, v, n_tok, pos0, dyn);
  }
  return cudaGetLastError();
}

cudaError_t rope_kv_store(const KvArgs& kv, float* q, float* k, const float* v, int64_t n_tok, int64_t n_head,
                          int64_t pos0, const float* cos, const float* sin, int64_t half, bool interleaved,
                          const int64_t* dyn, bool chained, cudaStream_t s) {
  const int64_t n = n_tok * (n_head + kv.n_head_kv) * (kv.head_dim / 2);
  if (n == 0) return cudaSuccess;
  const bool store = kv.type != DType::Q8_0;  // Q8_0 quantizes whole 32-value groups: its own kernel after
  const cudaError_t e = launch_chained(chained, rope_store_kernel, dim3(blocks_for(n, 256)), dim3(256), 0, s, q, k, v, kv, store,
                                       n_tok, n_head, pos0, cos, sin, half, interleaved, dyn);
  if (e != cudaSuccess || store) return e;
  return kv_store(kv, k, v, n_tok, pos0, dyn, s);
}

cudaError_t configure_attention() {
  const cudaError_t e[] = {
      cudaFuncSetAttribute(attention_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, attention_smem<1>()),
      cudaFuncSetAttribute(attention_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, attention_smem<2>()),
      cudaFuncSetAttribute(attention_kernel<3>, cudaFuncAttributeMaxDynamicSharedMemorySize, attention_smem<3>()),
      cudaFuncSetAttribute(attention_kernel<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, attention_smem<4>()),
      cudaFuncSetAttribute(attention_kernel<8>, cudaFuncAttributeMaxDynamicSharedMemorySize, attention_smem<8>())};
  for (cudaError_t x : e)
    if (x != cudaSuccess) return x;
  return cudaSuccess;
}

bool attention_supported(int64_t hd) { return hd == 32 || hd == 64 || hd == 96 || hd == 128 || hd == 256; }

cudaError_t attention(const KvArgs& kv, const float* q, int64_t n_tok, int64_t pos0, int64_t n_head, float scale,
                      int64_t window, float softcap, float* out, const int64_t* dyn, const AttnSplit& split,
                      bool chained, cudaStream_t s) {
  if (n_tok == 0) return cudaSuccess;
  switch (kv.head_dim) {
    case 32: return launch_attention<1>(kv, q, n_tok, pos0, n_head, scale, window, softcap, out, dyn, split, chained, s);
    case 64: return launch_attention<2>(kv, q, n_tok, pos0, n_head, scale, window, softcap, out, dyn, split, chained, s);
    case 96: return launch_attention<3>(kv, q, n_tok, pos0, n_head, scale, window, softcap, out, dyn, split, chained, s);
    case 128: return launch_attention<4>(kv, q, n_tok, pos0, n_head, scale, window, softcap, out, dyn, split, chained, s);
    case 256: return launch_attention<8>(kv, q, n_tok, pos0, n_head, scale, window, softcap, out, dyn, split, chained, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace laya::cuda
