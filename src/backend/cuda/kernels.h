// The CUDA backend's kernels, as host-callable launchers (defined in the .cu
// files, so only they go through nvcc). Every launcher enqueues on `stream`
// and returns the launch's error (cudaGetLastError); failures inside a kernel
// surface at the next synchronisation.
//
// Weights on the device (DevMat) keep the file's block layouts, except:
//   - F32 / F16 / BF16 rows are padded to a 16-byte stride with zeros, so the
//     decode kernel reads every row with 16-byte loads;
//   - Q8_0 is split into its int8 values (rows x cols bytes, 16-byte aligned
//     rows) and its fp16 scales (rows x cols/32): the file's 34-byte blocks
//     allow only 2-byte loads.
//   - Q6_K likewise: each 210-byte block's first 208 bytes (ql, qh, scales) in
//     rows, its fp16 d in `scales` (rows x cols/256).
//   - MLX affine types (DType::MLX_Q*): the file's packed rows (16-byte
//     aligned), then each group's scale and bias side by side (layout.h), at
//     `scales`.
// Q4_K (144-byte) and Q5_K (176-byte) blocks are already 16-byte multiples.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(LAYA_CUDA_EMULATE)
#include "backend/cuda/emulate.h"
#else
#include <cuda_runtime_api.h>
#endif

#include "backend/cuda/layout.h"
#include "backend/cuda_tuning.h"
#include "core/dtype.h"

namespace laya::cuda {

struct DevMat {
  DType type = DType::F32;
  int64_t rows = 0, cols = 0;
  const uint8_t* data = nullptr;     // rows of `stride` bytes (Q8_0: the int8 values)
  const uint16_t* scales = nullptr;  // Q8_0: fp16 scale of each 32 values, (rows, cols / 32); Q6_K: d of each block;
                                     // MLX: the (scale, bias) pairs, (rows, cols / group)
  size_t stride = 0;
  int32_t group = 0;                 // MLX: values per group (32, 64, 128)
  DType group_type = DType::F16;     // MLX: the scales' and biases' type (F16, BF16, F32)
};


// Up to three matrices over one input vector in one launch (decode, n_tok 1).
// swiglu: m[0] is the gate, m[1] the up matrix (same shape): y[0] receives the
// gate products, y[1] silu(gate) * up.
struct MatvecJob {
  int n = 0;
  DevMat m[3];
  float* y[3] = {nullptr, nullptr, nullptr};
  bool swiglu = false;
  // Fusions: x is RMS-normalised with norm_w (F32, cols) before the products
  // (norm_out, when set, receives the normalised x); accumulate: y[i] += the
  // product instead of y[i] = (the residual add).
  const float* norm_w = nullptr;
  float norm_eps = 0.f;
  float* norm_out = nullptr;
  bool accumulate = false;
  // A bias per matrix (F32, its rows), added to the product before the
  // accumulation (qwen2's q, k, v); nullptr: none.
  const float* bias[3] = {nullptr, nullptr, nullptr};
  bool prefetch = false;  // set by matvec(): the rows into L2 before pdl_wait() (a chained launch)
};

// What the launchers read: the device's facts and the tuning of the backend
// that launches (each CudaBackend holds its own, made by configure()).
struct Launch {
  CudaTuning tuning;
  size_t smem_optin = 48 * 1024;  // shared memory matvec_tokens() may ask for (configure() sets it)
  int sms = 1;                    // multiprocessors of the device
  int clock_khz = 0;              // the SM clock (the persistent kernel's profile converts its cycles with it)
  // launch_chained() (launch.cuh) lets a kernel start before the one before
  // it has finished: tuning.chained, where the device has programmatic
  // dependent launch (compute capability 9.0+).
  bool chained = false;
};

// Raises the matrix-vector kernels' dynamic shared-memory limit to the
// device's opt-in maximum and fills *out from the device and `tuning`.
// Call once per backend (the limits are the device's; setting them again is
// harmless).
cudaError_t configure(const CudaTuning& tuning, Launch* out);

// The matrix-vector kernel also takes a few tokens (a keystroke's edit):
// true when n_tok rows of `cols` values fit its shared memory.
constexpr int64_t kMaxVecTok = 8;
bool matvec_tokens(const Launch& l, int64_t n_tok, int64_t cols);
// y[i] (n_tok, rows_i) = x (n_tok, cols) . m[i]^T; swiglu as above, per token.
cudaError_t matvec(const Launch& l, const MatvecJob& job, const float* x, int64_t n_tok, cudaStream_t s);
// y (n_tok, rows) = x (n_tok, cols) . m^T for any n_tok (tiled, float32).
cudaError_t gemm(const DevMat& m, const float* x, int64_t n_tok, float* y, cudaStream_t s);
// A recorded decode step (a CUDA graph) replays with other tokens and
// positions: its kernels read them from device memory, dyn = {token,
// position} (nullptr: the arguments given). Used where n / n_tok is 1.
//
// out (n, cols) = rows ids[0..n) of m; ids are host memory (passed by value).
cudaError_t get_rows(const DevMat& m, const int32_t* ids, int64_t n, float* out, const int64_t* dyn, cudaStream_t s);

cudaError_t rms_norm(const float* x, const float* w, int64_t n_rows, int64_t n, float eps, float* out, cudaStream_t s);
cudaError_t add_bias(float* y, const float* b, int64_t n_rows, int64_t n, cudaStream_t s);
cudaError_t add(float* y, const float* x, int64_t n, cudaStream_t s);
cudaError_t scale(float* x, int64_t n, float f, cudaStream_t s);
// x[i] = cap * tanh(x[i] / cap).
cudaError_t softcap(float* x, int64_t n, float cap, cudaStream_t s);
cudaError_t mul(float* y, const float* x, int64_t n, cudaStream_t s);
cudaError_t gelu(float* x, int64_t n, cudaStream_t s);
cudaError_t layer_norm(const float* x, const float* w, const float* b, int64_t n_rows, int64_t n, float eps, float* out,
                       cudaStream_t s);
// out[i] = silu(gate[i]) * out[i].
cudaError_t silu_mul(const float* gate, float* out, int64_t n, cudaStream_t s);
cudaError_t rope(float* x, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t pos0, const float* cos,
                 const float* sin, int64_t half, bool interleaved, const int64_t* dyn, cudaStream_t s);

// One layer of one sequence in the block pool; ids is device memory.
struct KvArgs {
  uint8_t* pool = nullptr;
  const int32_t* ids = nullptr;
  int64_t n_blocks = 0;
  size_t block_bytes = 0;  // distance between block ids
  size_t k_off = 0;        // K slice of KV head 0 of this layer inside a block
  size_t v_off = 0;        // V slice of KV head 0
  size_t head_bytes = 0;   // one head's slice
  int64_t block_pos = 0, n_head_kv = 0, head_dim = 0;
  DType type = DType::F32;
};

// The CPU backend's layouts (cpu/attention.h): K in blocks of 16 positions
// (head_dim, 16), V rows (position, head_dim); Q8_0 with a float32 scale per 32
// values of a position.
cudaError_t kv_store(const KvArgs& kv, const float* k, const float* v, int64_t n_tok, int64_t pos0, const int64_t* dyn,
                     cudaStream_t s);
// rope of q (n_tok, n_head, head_dim) and k (n_tok, kv.n_head_kv, head_dim)
// in place, then kv_store(k, v): one launch for F32 / F16 caches. chained:
// Launch::chained.
cudaError_t rope_kv_store(const KvArgs& kv, float* q, float* k, const float* v, int64_t n_tok, int64_t n_head,
                          int64_t pos0, const float* cos, const float* sin, int64_t half, bool interleaved,
                          const int64_t* dyn, bool chained, cudaStream_t s);
// A decode step's attention split along the positions into n blocks per
// head group: scratch holds n_head * n * (head_dim + 2) floats, counters one
// zeroed int per (KV head, group of 8 query heads). n = 1: no split.
struct AttnSplit {
  int n = 1;
  float* scratch = nullptr;
  int* counters = nullptr;
};
// head_dim in {32, 64, 96, 128, 256}; any group size. window > 0: a query
// at p reads positions (p - window, p] only; softcap > 0: scores become
// softcap * tanh(score / softcap). chained: Launch::chained.
cudaError_t attention(const KvArgs& kv, const float* q, int64_t n_tok, int64_t pos0, int64_t n_head, float scale,
                      int64_t window, float softcap, float* out, const int64_t* dyn, const AttnSplit& split,
                      bool chained, cudaStream_t s);
bool attention_supported(int64_t head_dim);
// Raises the attention kernels' shared-memory limits (head_dim 256 needs
// more than the default 48 KB). Call once per device.
cudaError_t configure_attention();

}  // namespace laya::cuda
