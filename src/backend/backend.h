// The boundary between the model graph and the machine. The forward passes
// (an architecture's, model/forward.h) and the engine are written only against this
// interface; a backend is chosen by name through make_backend(), so a CUDA or
// Metal backend plugs in beside the CPU one without the engine naming it.
//
// A backend owns its memory: weights are prepared into its own form (the CPU
// packs them, a GPU uploads them), and activations, KV blocks and logits live
// in Buffers it allocates. Ops take pointers into those buffers; the host
// never reads them except through download() (or directly where
// host_visible()). Every call returns a Status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cuda_tuning.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"

namespace laya {

class Backend;

// Memory owned by a backend (host memory for the CPU, device memory for a
// GPU). Move-only; given back to its backend when destroyed, so a Buffer must
// not outlive the backend that made it.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend* owner, void* data, size_t bytes) : owner_(owner), data_(data), bytes_(bytes) {}
  ~Buffer() { reset(); }
  Buffer(Buffer&& o) noexcept : owner_(o.owner_), data_(o.data_), bytes_(o.bytes_) { o.owner_ = nullptr; o.data_ = nullptr; o.bytes_ = 0; }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }
  size_t bytes() const { return bytes_; }
  explicit operator bool() const { return data_ != nullptr; }
  void reset();

 private:
  Backend* owner_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Precomputed RoPE angles in backend memory: cos/sin[(pos * half) + i] for pos < n_pos.
struct RopeTable {
  const float* cos = nullptr;
  const float* sin = nullptr;
  int64_t half = 0;    // head_dim / 2
  int64_t n_pos = 0;
  bool interleaved = false;  // pairs (2i, 2i+1) instead of (i, i + half)
};

// Geometry of the KV block pool (kv/kv_block_pool.h). A block holds
// block_pos consecutive positions of one sequence for every layer: per layer,
// the K slices of the n_head_kv heads, then their V slices. Inside a slice V
// is (position, head_dim) and K is blocked by the backend for its kernels
// (the CPU's: 16 positions transposed, cpu/attention.h), so a GQA group's
// attention reads two sequential streams per block.
struct KvLayout {
  int64_t n_layer = 0, n_head_kv = 0, head_dim = 0;
  DType type = DType::F32;  // F32, F16 or Q8_0 (int8, a float32 scale per 32 values)
  int64_t block_pos = 64;   // positions per block, a multiple of 16

  // Bytes of one head's K (or V) slice of n_pos positions (n_pos a multiple of 16).
  static size_t slice_bytes(DType type, int64_t n_pos, int64_t head_dim);
  size_t head_bytes() const { return slice_bytes(type, block_pos, head_dim); }
  size_t layer_bytes() const { return 2 * static_cast<size_t>(n_head_kv) * head_bytes(); }
  size_t block_bytes() const { return static_cast<size_t>(n_layer) * layer_bytes(); }
  size_t k_offset(int64_t il, int64_t g) const { return static_cast<size_t>(il) * layer_bytes() + static_cast<size_t>(g) * head_bytes(); }
  size_t v_offset(int64_t il, int64_t g) const { return k_offset(il, g + n_head_kv); }
};

// One layer of one sequence's cache: the pool's memory and the sequence's
// block table (block ids in position order, host memory). Position p lives
// in block ids[p / block_pos] at slot p % block_pos.
struct KvLayerView {
  const KvLayout* layout = nullptr;
  uint8_t* pool = nullptr;         // backend memory, block i at pool + i * block_bytes
  const int32_t* ids = nullptr;    // the sequence's blocks
  int64_t n_blocks = 0;
  int64_t layer = 0;
};

struct AttentionShape {
  int64_t n_head, n_head_kv, head_dim;
  float scale;  // 1/sqrt(head_dim), or the family's (Gemma 2: query_pre_attn_scalar^-0.5)
  // A query at position p attends to positions (p - window, p] only: a
  // sliding-window layer (Gemma 2 / 3 local layers, Phi-3, StarCoder2). The
  // cache keeps every position; the window bounds what is read, so such a
  // layer's cost stops growing with the context. 0: [0, p].
  int64_t window = 0;
  // Scores (after scale) become softcap * tanh(score / softcap) before the
  // softmax (Gemma 2's attn_logit_softcapping). 0: unchanged.
  float softcap = 0;
};

// One output of a grouped matmul: y (n_tok, w.rows()) = x · wᵀ.
struct MatmulOut {
  const Tensor* w;
  float* y;
};

// What a forward pass will ask of the backend, known when the engine is
// made, so every scratch is allocated up front and no op allocates.
struct ForwardLimits {
  int64_t max_cols = 0;   // longest weight row (max of n_embd, n_ff, q_dim)
  int64_t max_ctx = 0;    // longest attention span
  int64_t max_group = 1;  // query heads per KV head
  int64_t max_batch = 1;  // tokens per forward pass (prefill chunk)
};

struct BackendOptions {
  int n_threads = 0;  // CPU worker threads including the caller; 0: all online cores
  // mlock what every decode step reads (weights, KV blocks, scratch) so no
  // token waits for a page; where the OS refuses, run unlocked and say why
  // in memory_lock_note().
  bool lock_memory = true;
  // Start in the background mode of Backend::set_background (a model being
  // prepared for a hot swap while another engine serves).
  bool background = false;
  // How long CPU workers keep spinning after a job before they sleep (ms; 0:
  // ~50 us). A sleeping core of a VM takes 1-3 ms to wake: a window longer
  // than the gap between keys keeps a typist's cores awake (ThreadPool).
  int awake_ms = 0;
  // Told while prepare_weights() runs, on the thread that called it: bytes of
  // weights prepared so far and in all, ending with done == total. Loading a
  // large model spends its time there (every byte is read, packed, locked);
  // the library prints nothing, a caller may draw progress. Empty: none.
  std::function<void(uint64_t done, uint64_t total)> on_prepare_progress;
  // The CPU kernels' instruction set: scalar, avx2, avx512 or neon (one this
  // CPU or build lacks is kUnsupported). Empty: LAYA_ISA's, else the best
  // this CPU has (cpu::active_isa()). The `{}` initializers let designated
  // initializers leave these out without -Wmissing-field-initializers.
  std::string isa{};
  // The CUDA backend's tuning (backend/cuda_tuning.h), its own for its
  // lifetime. Unset: CudaTuning::from_env(), read when the backend is made.
  std::optional<CudaTuning> cuda{};
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;

  // ---- memory ------------------------------------------------------------------------------
  // `bytes` of zero-filled backend memory; `what` names it in errors and in
  // the lock note. kOutOfMemory (naming what and how much) when refused.
  virtual Result<Buffer> alloc(size_t bytes, const char* what) = 0;
  // Copies between host memory and a buffer, and within backend memory.
  virtual Status upload(void* dst, const void* host_src, size_t bytes) = 0;
  virtual Status download(void* host_dst, const void* src, size_t bytes) = 0;
  virtual Status copy(void* dst, const void* src, size_t bytes) = 0;
  // Waits for every op issued so far (a no-op where ops are synchronous).
  virtual Status synchronize() = 0;
  // True when buffers are host memory that the host may read directly.
  virtual bool host_visible() const = 0;

  // Readies the weights for the ops: `matrices` are what matmul / matmul_group
  // / matmul_swiglu will multiply, `all` every tensor the forward pass reads.
  // The CPU repacks the matrices it has fast kernels for and locks what it
  // reads; a GPU uploads. Ops afterwards take the same Tensor references.
  virtual Status prepare_weights(const std::vector<const Tensor*>& matrices, const std::vector<const Tensor*>& all) = 0;
  // Bytes of weights held in the backend's own form (packed / uploaded).
  virtual size_t prepared_bytes() const = 0;
  // Empty when everything asked for is locked (or locking is off); else the
  // first refusal: what, how much, the limit, and how to raise it.
  virtual const std::string& memory_lock_note() const = 0;
  // Background mode: ops run on the calling thread alone, leaving the other
  // cores to whatever serves keystrokes meanwhile (a model being prepared
  // and its prompts computed for a hot swap). Off: the backend's full width.
  // Switched only between ops. A no-op where ops do not use host threads.
  virtual void set_background(bool /*on*/) {}
  // A keystroke arrived: wake the backend's sleeping threads now, so that
  // their wake-up overlaps the edit's work. Never blocks. A no-op where ops
  // do not use host threads.
  virtual void wake() {}

  // A pass of up to this many tokens computes every token's row with the
  // same bits as a pass of that token alone (1: only one-token passes do).
  // Then a pass that verifies drafted tokens decides exactly as decoding
  // them one at a time would.
  virtual int64_t exact_rows() const { return 1; }

  // ---- ops (pointers are backend memory unless said otherwise) ------------------------------
  // y (n_tok, rows) = x (n_tok, cols) · wᵀ, w: (rows, cols) of any supported type.
  virtual Status matmul(const Tensor& w, const float* x, int64_t n_tok, float* y) = 0;
  // Several matrices over the same input x (same cols), as one parallel job:
  // q/k/v. Saves a thread synchronisation per extra matrix.
  virtual Status matmul_group(const MatmulOut* outs, int n_outs, const float* x, int64_t n_tok) = 0;
  // SwiGLU feed-forward input: out (n_tok, rows) = silu(x·w_gateᵀ) * (x·w_upᵀ),
  // fused so each thread applies the activation to the rows it computed.
  // gate_scratch (n_tok, rows) holds the gate products.
  virtual Status matmul_swiglu(const Tensor& w_gate, const Tensor& w_up, const float* x, int64_t n_tok, float* gate_scratch,
                               float* out) = 0;
  // out (n, cols) = rows ids[0..n) of w, dequantized; ids are host memory.
  virtual Status get_rows(const Tensor& w, const int32_t* ids, int64_t n, float* out) = 0;
  // out (n_rows, n) = x / rms(x) * w, per row of length n; w: F32 (n).
  virtual Status rms_norm(const float* x, const Tensor& w, int64_t n_rows, int64_t n, float eps, float* out) = 0;
  // y (n_rows, n) += b (n), per row; b: F32.
  virtual Status add_bias(float* y, const Tensor& b, int64_t n_rows, int64_t n) = 0;
  // y += x, n elements.
  virtual Status add(float* y, const float* x, int64_t n) = 0;
  // x *= s, n elements (Granite's embedding, residual and logit multipliers).
  virtual Status scale(float* x, int64_t n, float s) = 0;
  // x = cap * tanh(x / cap), n elements, cap > 0 (Gemma 2's final logit soft-capping).
  virtual Status softcap(float* x, int64_t n, float cap) = 0;
  // y *= x, n elements (a GELU-gated feed-forward's product).
  virtual Status mul(float* y, const float* x, int64_t n) = 0;
  // x = gelu(x), n elements, tanh approximation (transformers' gelu_pytorch_tanh):
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
  virtual Status gelu(float* x, int64_t n) = 0;
  // out (n_rows, n) = (x - mean) / sqrt(var + eps) * w + b, per row of
  // length n (LayerNorm with a bias: StarCoder2); w, b: F32 (n).
  virtual Status layer_norm(const float* x, const Tensor& w, const Tensor& b, int64_t n_rows, int64_t n, float eps,
                            float* out) = 0;
  // Rotate x (n_tok, n_heads, head_dim) in place; token t is at position pos0 + t.
  virtual Status rope(float* x, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t pos0, const RopeTable& rt) = 0;
  // Write k, v (n_tok, n_head_kv * head_dim) at positions pos0 .. pos0 + n_tok
  // (their blocks are in kv.ids and writable).
  virtual Status kv_store(const KvLayerView& kv, const float* k, const float* v, int64_t n_tok, int64_t pos0) = 0;
  // Causal attention of q (n_tok, n_head, head_dim) at positions pos0.. over
  // positions [0, pos0 + t] (with s.window: the last s.window of them, with
  // s.softcap: soft-capped scores); out (n_tok, n_head * head_dim).
  virtual Status attention(const KvLayerView& kv, const float* q, int64_t n_tok, int64_t pos0, const AttentionShape& s,
                           float* out) = 0;

  // ---- fused sequences (optional) -----------------------------------------------------------
  // Each is exactly the sequence of ops its default runs, with the same
  // results in the same buffers. A backend whose every op is a kernel launch
  // overrides them to do the sequence in one launch (CUDA: ~200 launches per
  // decode step become ~100; measured in docs/CUDA.md); the CPU keeps the
  // defaults, where a fused form would save nothing but a function call.
  //
  // xn = rms_norm(x, norm), then matmul_group(outs, xn).
  virtual Status norm_matmul_group(const float* x, const Tensor& norm, float eps, int64_t n_embd, float* xn,
                                   const MatmulOut* outs, int n_outs, int64_t n_tok) {
    LAYA_TRY(rms_norm(x, norm, n_tok, n_embd, eps, xn));
    return matmul_group(outs, n_outs, xn, n_tok);
  }
  // xn = rms_norm(x, norm), then matmul_swiglu(w_gate, w_up, xn).
  virtual Status norm_matmul_swiglu(const float* x, const Tensor& norm, float eps, int64_t n_embd, float* xn,
                                    const Tensor& w_gate, const Tensor& w_up, int64_t n_tok, float* gate_scratch,
                                    float* out) {
    LAYA_TRY(rms_norm(x, norm, n_tok, n_embd, eps, xn));
    return matmul_swiglu(w_gate, w_up, xn, n_tok, gate_scratch, out);
  }
  // tmp = x · wᵀ, then y += tmp (the residual connection); y (n_tok, w rows).
  virtual Status matmul_add(const Tensor& w, const float* x, int64_t n_tok, float* tmp, float* y) {
    LAYA_TRY(matmul(w, x, n_tok, tmp));
    return add(y, tmp, n_tok * w.rows());
  }
  // rope(q, n_head), rope(k, n_head_kv), then kv_store(k, v).
  virtual Status rope_kv_store(const KvLayerView& kv, float* q, float* k, const float* v, int64_t n_tok, int64_t n_head,
                               int64_t n_head_kv, int64_t head_dim, int64_t pos0, const RopeTable& rt) {
    LAYA_TRY(rope(q, n_tok, n_head, head_dim, pos0, rt));
    LAYA_TRY(rope(k, n_tok, n_head_kv, head_dim, pos0, rt));
    return kv_store(kv, k, v, n_tok, pos0);
  }

  // ---- decode steps (optional) --------------------------------------------------------------
  // Where issuing the ~200 ops of a one-token forward pass costs more than
  // running them (a GPU: a kernel launch each), a backend may record a
  // decode step once and replay the recording. The engine calls step_begin()
  // before a decode step's ops, with the step's token (host), position, the
  // sequence's KV view and the logits buffer the step ends in. `*replayed`
  // true: the backend has issued the whole step (forward pass and logits)
  // and the engine issues nothing; false: the engine issues the ops as
  // usual, then step_end(ok) with whether they all succeeded. The default
  // records nothing.
  virtual Status step_begin(const KvLayerView& kv, int32_t token, int64_t pos, const float* logits, bool* replayed) {
    (void)kv, (void)token, (void)pos, (void)logits;
    *replayed = false;
    return Status::Ok();
  }
  virtual Status step_end(bool ok) {
    (void)ok;
    return Status::Ok();
  }
  // How this backend runs a decode step, for `laya bench` (the CUDA
  // backend: its persistent kernel, or a graph and why); empty where there
  // is nothing to say.
  virtual std::string decode_step_note() const { return {}; }
  // Where the decode steps' time went, where the backend was asked to time
  // them (the CUDA persistent kernel's profile); empty otherwise.
  virtual std::string decode_step_profile() const { return {}; }

 protected:
  friend class Buffer;
  // Gives back what alloc() returned.
  virtual void release(void* data, size_t bytes) = 0;
};

inline Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    owner_ = o.owner_;
    data_ = o.data_;
    bytes_ = o.bytes_;
    o.owner_ = nullptr;
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

inline void Buffer::reset() {
  if (owner_ && data_) owner_->release(data_, bytes_);
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

// The one factory: "cpu" (the default), "cuda" where built with LAYA_CUDA
// (kUnsupported, naming the CUDA error, where no GPU can be used). Unknown names are kInvalidArgument
// naming the backends this build has.
Result<std::unique_ptr<Backend>> make_backend(std::string_view name, const BackendOptions& opt, const ForwardLimits& lim);
// "cpu" (and others compiled in), for --help and errors.
std::vector<std::string> backend_names();

}  // namespace laya
