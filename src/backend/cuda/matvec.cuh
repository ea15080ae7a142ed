// The decode matrix-vector kernel's body (the streaming kernel of matmul.cu),
// shared by its own kernels and by the persistent decode kernel
// (persistent.cu), which runs it as one instruction among others: the block
// index and count, the shared memory and the point where the kernel waits for
// earlier work are parameters, not blockIdx / gridDim / pdl_enter().
#pragma once

#include "backend/cuda/units.cuh"

namespace laya::cuda {

constexpr int kWarps = 8;  // warps per block of the decode kernel
constexpr int64_t kPadCols = 256;  // x is staged in shared memory padded to a multiple of this (zeros)
inline int64_t padded_cols(int64_t cols) { return (cols + kPadCols - 1) / kPadCols * kPadCols; }

__device__ __forceinline__ float warp_sum(float s) {
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  return s;
}

// Stages x (n_tok rows of cols) in shared memory, padded (units.cuh), zeros
// past cols; with job.norm_w, RMS-normalised first (job.norm_out gets the
// normalised rows from block 0: what rms_norm would have written). Two block
// barriers at most: each thread normalises the very values it staged, so the
// sums of squares (in double, as rms_norm and the CPU reference compute them)
// are all that crosses warps.
//
// part: kMaxVecTok * kWarps doubles of shared memory for the sums. first:
// this is the block that writes norm_out. x is read through L2 (ld.cg), not
// the read-only path: in the persistent kernel it was written by other
// blocks during the same launch.
__device__ inline void stage_x(const MatvecJob& job, const float* __restrict__ x, int64_t cols, int64_t padded, int n_tok,
                        float* xs, double (*part)[kWarps], bool first) {
  const int64_t stride = xpad_size(padded);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const bool vec = (cols & 3) == 0;
  const int64_t n4 = padded / 4;
  for (int t = 0; t < n_tok; ++t) {
    double ss = 0;
    if (vec) {  // 16-byte loads, four in flight per thread
      const float4* x4g = reinterpret_cast<const float4*>(x + t * cols);
      for (int64_t i = threadIdx.x; i < n4; i += 4 * blockDim.x) {
        float4 v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int64_t k = i + j * blockDim.x;
          v[j] = k * 4 < cols ? __ldcg(x4g + k) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int64_t k = i + j * blockDim.x;
          if (k >= n4) continue;
          *reinterpret_cast<float4*>(xs + t * stride + xpad(4 * k)) = v[j];
          ss += static_cast<double>(v[j].x) * v[j].x + static_cast<double>(v[j].y) * v[j].y +
                static_cast<double>(v[j].z) * v[j].z + static_cast<double>(v[j].w) * v[j].w;
        }
      }
    } else {
      for (int64_t i = threadIdx.x; i < padded; i += blockDim.x) {
        const float v = i < cols ? __ldcg(x + t * cols + i) : 0.f;
        xs[t * stride + xpad(i)] = v;
        ss += static_cast<double>(v) * v;
      }
    }
    if (job.norm_w) {
      for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
      if (lane == 0) part[t][warp] = ss;
    }
  }
  __syncthreads();
  if (!job.norm_w) return;
  for (int t = 0; t < n_tok; ++t) {
    double tot = 0;
    for (int w = 0; w < kWarps; ++w) tot += part[t][w];
    const float inv = static_cast<float>(1.0 / sqrt(tot / static_cast<double>(cols) + job.norm_eps));
    auto norm_one = [&](int64_t i) {
      float* p = xs + t * stride + xpad(i);
      const float v = job.norm_w[i] * (*p * inv);
      *p = v;
      if (first && job.norm_out) job.norm_out[t * cols + i] = v;
    };
    if (vec) {  // the values this thread staged above
      for (int64_t k = threadIdx.x; k * 4 < cols; k += blockDim.x)
        for (int e = 0; e < 4; ++e) norm_one(4 * k + e);
    } else {
      for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) norm_one(i);
    }
  }
  __syncthreads();
}

// The MLX units' sums of each 32 staged values (units.cuh, x_sum32), made
// once x is staged: one more barrier, in the kernels that read them only.
__device__ inline void stage_x_sums(float* xs, int64_t padded, int n_tok) {
  const int64_t stride = xpad_size(padded), runs = padded / kXPadEvery;
  for (int64_t i = threadIdx.x; i < n_tok * runs; i += blockDim.x)
    x_sum32(xs + (i / runs) * stride + xpad(kXPadEvery * (i % runs)));
  __syncthreads();
}
template <class U>
constexpr bool kXSumsOf = requires { U::kXSums; };
__device__ inline bool job_wants_x_sums(const MatvecJob& job) {
  for (int i = 0; i < (job.swiglu ? 2 : job.n); ++i)
    if (mlx_unit_type(job.m[i].type, job.m[i].group_type)) return true;
  return false;
}

// Row R of the job's matrices laid end to end: which matrix (returned) and
// its row there (*r, given R).
__device__ __forceinline__ int job_row(const MatvecJob& job, int64_t* r) {
  int i = 0;
  while (i + 1 < job.n && *r >= job.m[i].rows) *r -= job.m[i++].rows;
  return i;
}

// Row R of the job (rows laid end to end; both matrices of a SwiGLU) into
// L2, one prefetch per 128 bytes a lane; with `scales`, a Q8_0 row's scales too.
__device__ inline void prefetch_row(const MatvecJob& job, int64_t R, int lane, bool scales) {
  int64_t r = R;
  const int i = job.swiglu ? 0 : job_row(job, &r);
  for (int k = i; k <= (job.swiglu ? 1 : i); ++k) {
    const DevMat& m = job.m[k];
    const uint8_t* row = m.data + static_cast<size_t>(r) * m.stride;
    for (size_t off = static_cast<size_t>(lane) * 128; off < m.stride; off += 32 * 128) prefetch_l2(row + off);
    if (scales && m.type == DType::Q8_0 && m.scales) {
      const size_t sb = static_cast<size_t>(m.cols / 32) * sizeof(uint16_t);
      const uint8_t* sr = reinterpret_cast<const uint8_t*>(m.scales) + static_cast<size_t>(r) * sb;
      for (size_t off = static_cast<size_t>(lane) * 128; off < sb; off += 32 * 128) prefetch_l2(sr + off);
    }
  }
}

// The rows a warp will multiply, into L2.
__device__ inline void prefetch_rows(const MatvecJob& job, int64_t first, int rpw, int64_t total, int lane) {
  for (int64_t R = first; R < first + rpw && R < total; ++R) prefetch_row(job, R, lane, false);
}

// The rows warp `warp` of block vb (of nvb) multiplies in matvec_stream
// (rows warp, warp + W, ... of the job laid end to end), with their Q8_0
// scales, into L2.
__device__ inline void prefetch_stream_rows(const MatvecJob& job, int64_t total, int vb, int nvb) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t W = static_cast<int64_t>(nvb) * kWarps;
  for (int64_t R = static_cast<int64_t>(vb) * kWarps + warp; R < total; R += W) prefetch_row(job, R, lane, true);
}

// ---- the streaming decode kernel ----------------------------------------------------------------
// The per-row kernel above pays, in every block of 8 rows, for staging x (and
// its norm) behind block barriers before the first weight load: ncu put a 1B
// model's layer at ~89 us against ~13 us of bytes, its warps waiting on too
// few loads in flight (docs/CUDA.md). Here the grid holds no more blocks than
// the GPU runs at once, so x is staged once per resident block; warp w of the
// grid (W warps in all) takes rows w, w + W, w + 2W, ..., in chunks of B units
// per lane (per matrix), and issues the next chunk's loads before it
// multiplies the current one, so its loads stream without a gap; the first
// chunk's loads go out before x is staged. Jobs whose matrices share a type
// the units cover; the per-row kernel takes the rest.

// Units per lane per chunk: about 64 bytes of weights a lane (two chunks in
// registers: this one and the next), K matrices at a time.
template <class U, int K>
constexpr int stream_units() {
  const int b = sizeof(typename U::Raw) > 32 ? 2 : 4;
  return b / K > 0 ? b / K : 1;
}

// Where row R of a job is: matrix mi (0 for SwiGLU, whose two matrices share
// rows), row r of it, and the row's bytes in each of the K matrices read.
// Rows of at least 64 * B units a lane (BF16 / F16 rows of 2,048 values and
// more, Q8_0 of 4,096 and more) take chunks of twice the units (deep_ok:
// CudaTuning::stream_deep); m is the job's first matrix.
inline bool deep_rows(const DevMat& m, bool deep_ok) {
  return deep_ok && static_cast<int64_t>(m.stride / 16) >= 64 * stream_units<UnitQ8, 1>();
}

template <class U, int K>
struct RowAt {
  int mi = 0;
  int64_t r = 0;
  typename U::Ref ref[K];
};
template <class U, int K, bool kSwiglu>
__device__ __forceinline__ RowAt<U, K> row_at(const MatvecJob& job, int64_t R) {
  RowAt<U, K> a;
  a.r = R;
  if (!kSwiglu) a.mi = job_row(job, &a.r);
#pragma unroll
  for (int k = 0; k < K; ++k) a.ref[k] = U::row(job.m[a.mi + k], a.r);
  return a;
}

// The units of a chunk of row `at`, from unit u0 on (lanes past the row's end load nothing).
template <class U, int B, int K>
__device__ __forceinline__ void load_chunk(typename U::Raw (&w)[K][B], const RowAt<U, K>& at, int u0, int n) {
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int j = 0; j < B; ++j)
      if (u0 + 32 * j < n) w[k][j] = U::load(at.ref[k], u0 + 32 * j);
}

// The end of row R: each token's sums over the warp to y (lane 0), acc zeroed.
template <bool kSwiglu, int K, int T>
__device__ __forceinline__ void finish_row(const MatvecJob& job, float (&acc)[K][T], int64_t R, int mi, int64_t r,
                                           int64_t total, int n_tok, int lane) {
#pragma unroll
  for (int t = 0; t < T; ++t) {
    if (t >= n_tok) break;
    float s[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      s[k] = warp_sum(acc[k][t]);
      acc[k][t] = 0.f;
    }
    if (lane != 0) continue;
    if (kSwiglu) {
      job.y[0][t * total + R] = s[0];
      job.y[1][t * total + R] = s[0] / (1.0f + expf(-s[0])) * s[K - 1];
    } else {
      float* y = job.y[mi] + t * job.m[mi].rows + r;
      const float v = job.bias[mi] ? s[0] + job.bias[mi][r] : s[0];
      *y = job.accumulate ? __ldcg(y) + v : v;
    }
  }
}

//
// Block vb of nvb (the kernel's own blockIdx / gridDim, or the persistent
// kernel's); xs and part in shared memory (stage_x); enter() is called once
// the first loads are out, before anything another kernel (or an earlier
// instruction of the persistent kernel) wrote is read.
template <class U, int B, bool kSwiglu, int T, class Enter>
__device__ __forceinline__ void matvec_stream(const MatvecJob& job, const float* __restrict__ x, int64_t cols,
                                              int64_t padded, int64_t total, int n_tok, float* xs,
                                              double (*part)[kWarps], int vb, int nvb, Enter enter) {
  constexpr int K = kSwiglu ? 2 : 1;
  using Raw = typename U::Raw;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n = static_cast<int>(U::units(cols)), per_chunk = 32 * B, n_chunks = (n + per_chunk - 1) / per_chunk;
  const int64_t W = static_cast<int64_t>(nvb) * kWarps;
  int64_t R = static_cast<int64_t>(vb) * kWarps + warp;
  int c = 0;
  RowAt<U, K> at = row_at<U, K, kSwiglu>(job, R < total ? R : 0);
  Raw cur[K][B] = {}, nxt[K][B] = {};
  // The weights depend on no earlier kernel: loaded while x is staged.
  if (R < total) load_chunk<U, B, K>(cur, at, lane, n);
  enter();
  stage_x(job, x, cols, padded, n_tok, xs, part, vb == 0);
  if constexpr (kXSumsOf<U>) stage_x_sums(xs, padded, n_tok);
  const int stride = static_cast<int>(xpad_size(padded));
  float acc[K][T];
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int t = 0; t < T; ++t) acc[k][t] = 0.f;
  // One step: the loads of the chunk after (R, c) into nw, then chunk (R, c),
  // held in w, into acc; false once the warp has no rows left. The loop below
  // alternates the two buffers rather than copying nw into w: a copy would
  // wait for the loads it copies, leaving one chunk in flight, not two.
  auto step = [&](Raw (&w)[K][B], Raw (&nw)[K][B]) {
    int64_t R2 = R;
    int c2 = c + 1;
    RowAt<U, K> at2 = at;
    if (c2 == n_chunks) {
      c2 = 0;
      R2 = R + W;
      if (R2 < total) at2 = row_at<U, K, kSwiglu>(job, R2);
    }
    if (R2 < total) load_chunk<U, B, K>(nw, at2, c2 * per_chunk + lane, n);
    const int u0 = c * per_chunk + lane;
#pragma unroll
    for (int t = 0; t < T; ++t) {
      if (t >= n_tok) break;
#pragma unroll
      for (int k = 0; k < K; ++k)
#pragma unroll
        for (int j = 0; j < B; ++j)
          if (u0 + 32 * j < n) acc[k][t] += U::dot(w[k][j], at.ref[k], u0 + 32 * j, xs + t * stride);
    }
    if (c2 == 0) finish_row<kSwiglu, K, T>(job, acc, R, at.mi, at.r, total, n_tok, lane);
    R = R2;
    c = c2;
    at = at2;
    return R < total;
  };
  while (R < total && step(cur, nxt) && step(nxt, cur)) {
  }
}


}  // namespace laya::cuda
