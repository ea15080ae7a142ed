// CUDA backend: weights, activations, KV blocks and logits in device memory;
// every op is a kernel on one high-priority stream, so a forward pass runs
// without a host synchronisation until its logits are downloaded.
// host_visible() is false: the engine reads results through download().
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/persistent.h"

namespace laya {

class CudaBackend final : public Backend {
 public:
  // kUnsupported naming the CUDA error when there is no usable device.
  static Result<std::unique_ptr<Backend>> create(const BackendOptions& opt, const ForwardLimits& lim);
  // Ok when a CUDA device can be used; else kUnsupported with the reason.
  static Status device_status();
  ~CudaBackend() override;
  const char* name() const override { return "cuda"; }

  Result<Buffer> alloc(size_t bytes, const char* what) override;
  Status upload(void* dst, const void* host_src, size_t bytes) override;
  Status download(void* host_dst, const void* src, size_t bytes) override;
  Status copy(void* dst, const void* src, size_t bytes) override;
  Status synchronize() override;
  bool host_visible() const override { return false; }
  // Uploads every tensor of `matrices` and `all` (float rows padded, Q8_0
  // split, MLX scales and biases paired, cuda/kernels.h); ops then find them
  // by their host address.
  Status prepare_weights(const std::vector<const Tensor*>& matrices, const std::vector<const Tensor*>& all) override;
  size_t prepared_bytes() const override { return prepared_bytes_; }
  const std::string& memory_lock_note() const override { return lock_note_; }

  Status matmul(const Tensor& w, const float* x, int64_t n_tok, float* y) override;
  Status matmul_group(const MatmulOut* outs, int n_outs, const float* x, int64_t n_tok) override;
  Status matmul_swiglu(const Tensor& w_gate, const Tensor& w_up, const float* x, int64_t n_tok, float* gate_scratch,
                       float* out) override;
  Status get_rows(const Tensor& w, const int32_t* ids, int64_t n, float* out) override;
  Status rms_norm(const float* x, const Tensor& w, int64_t n_rows, int64_t n, float eps, float* out) override;
  Status add_bias(float* y, const Tensor& b, int64_t n_rows, int64_t n) override;
  Status add(float* y, const float* x, int64_t n) override;
  Status scale(float* x, int64_t n, float s) override;
  Status softcap(float* x, int64_t n, float cap) override;
  Status mul(float* y, const float* x, int64_t n) override;
  Status gelu(float* x, int64_t n) override;
  Status layer_norm(const float* x, const Tensor& w, const Tensor& b, int64_t n_rows, int64_t n, float eps,
                    float* out) override;
  Status rope(float* x, int64_t n_tok, int64_t n_heads, int64_t head_dim, int64_t pos0, const RopeTable& rt) override;
  Status kv_store(const KvLayerView& kv, const float* k, const float* v, int64_t n_tok, int64_t pos0) override;
  Status attention(const KvLayerView& kv, const float* q, int64_t n_tok, int64_t pos0, const AttentionShape& s,
                   float* out) override;
  // Fused in the decode kernel (cuda::MatvecJob) where n_tok fits it; the
  // separate ops otherwise.
  Status norm_matmul_group(const float* x, const Tensor& norm, float eps, int64_t n_embd, float* xn, const MatmulOut* outs,
                           int n_outs, int64_t n_tok) override;
  Status norm_matmul_swiglu(const float* x, const Tensor& norm, float eps, int64_t n_embd, float* xn, const Tensor& w_gate,
                            const Tensor& w_up, int64_t n_tok, float* gate_scratch, float* out) override;
  Status matmul_add(const Tensor& w, const float* x, int64_t n_tok, float* tmp, float* y) override;
  Status rope_kv_store(const KvLayerView& kv, float* q, float* k, const float* v, int64_t n_tok, int64_t n_head,
                       int64_t n_head_kv, int64_t head_dim, int64_t pos0, const RopeTable& rt) override;
  // A decode step is captured into a CUDA graph the first time a sequence's
  // logits buffer ends one, and replayed after (its kernels read the token
  // and position from device memory). CudaTuning::graphs = false turns this off.
  // With CudaTuning::persistent, the captured step's ops also become the
  // persistent kernel's instructions (cuda/persistent.h), which then run the
  // step in one launch; a step with an op the kernel lacks keeps its graph.
  Status step_begin(const KvLayerView& kv, int32_t token, int64_t pos, const float* logits, bool* replayed) override;
  Status step_end(bool ok) override;
  // How the last recorded decode step runs: the persistent kernel (its
  // instructions and waits) or the graph, and why.
  std::string decode_step_note() const override { return step_note_; }
  std::string decode_step_profile() const override;

 protected:
  void release(void* data, size_t bytes) override;

 private:
  explicit CudaBackend(const ForwardLimits& lim) : lim_(lim) {}
  // The uploaded form of w, or kInvalidArgument naming a tensor prepare_weights never saw.
  Result<const cuda::DevMat*> dev(const Tensor& w, const char* op) const;
  // The KV view's block table on the device (uploaded when it changed) and the kernel arguments.
  Result<cuda::KvArgs> kv_args(const KvLayerView& kv, const char* op);
  // matmul_group with the decode kernel's fusions (cuda::MatvecJob): norm_w
  // set or accumulate true need n_tok within cuda::matvec_tokens.
  struct Fuse {
    const float* norm_w = nullptr;
    float eps = 0.f;
    float* norm_out = nullptr;
    bool accumulate = false;
  };
  Status group(const MatmulOut* outs, int n_outs, const float* x, int64_t n_tok, const Fuse& f);
  // The decode kernel takes n_tok tokens of w's width.
  bool fusable(const Tensor& w, int64_t n_tok) const { return cuda::matvec_tokens(launch_, n_tok, w.cols()); }
  // The F32 weight of an RMSNorm on the device, or kUnsupported.
  Result<const float*> norm_weight(const Tensor& w, const char* op) const;
  // Uploads one tensor into device memory at dst (its dev_bytes).
  Status upload_tensor(const Tensor& t, uint8_t* dst, cuda::DevMat* out);

  ForwardLimits lim_;
  // The device's facts and this backend's tuning, for its launches.
  cuda::Launch launch_;
  cudaStream_t stream_ = nullptr;
  std::string lock_note_;  // device memory is never paged: nothing to lock
  size_t prepared_bytes_ = 0;
  std::unordered_map<const uint8_t*, cuda::DevMat> mats_;  // by the tensor's host address
  std::vector<void*> weight_mem_;
  // The block table last uploaded, so a decode step re-sends it only when a
  // block was added or replaced.
  int32_t* ids_dev_ = nullptr;
  int64_t ids_cap_ = 0;
  std::vector<int32_t> ids_host_;
  // Page-locked bounce memory for large downloads (a decode step's logits):
  // the DMA engine copies into it at the bus's speed, where a pageable
  // destination goes through the driver's own staging in small pieces.
  void* pinned_ = nullptr;
  size_t pinned_bytes_ = 0;
  bool use_pinned_ = true;  // CudaTuning::pinned; off for good once page-locked memory is refused

  // A decode step's attention split along the positions (cuda::AttnSplit):
  // its partial results and per-group counters, sized from ForwardLimits.
  float* split_scratch_ = nullptr;
  int* split_counters_ = nullptr;
  size_t split_scratch_floats_ = 0, split_counters_n_ = 0;
  // The split for a decode step of this shape (n = 1 where it does not fit).
  cuda::AttnSplit attention_split(const AttentionShape& s) const;
  int attn_split_ = 0;  // CudaTuning::attn_split: 1..32 a fixed split (0: by shape)

  // Decode-step graphs, by the logits buffer they end in (one per sequence;
  // every other buffer a step touches is the engine's and fixed).
  static constexpr size_t kMaxGraphs = 64;
  bool use_graphs_ = true;  // CudaTuning::graphs
  bool capturing_ = false;
  const float* capture_key_ = nullptr;
  int64_t* step_dev_ = nullptr;  // {token, position} of the step being run
  int64_t step_host_[2] = {0, 0};
  std::unordered_map<const float*, cudaGraphExec_t> graphs_;
  // The step's {token, position} for the kernels that take them (nullptr
  // outside a capture: they use their arguments).
  const int64_t* dyn() const { return capturing_ ? step_dev_ : nullptr; }
  void drop_graphs();

  // The persistent kernel's programs, by logits buffer like the graphs, and
  // the one being recorded during a capture.
  bool use_persistent_ = true;  // CudaTuning::persistent
  cuda::StepProgram tape_;
  std::unordered_map<const float*, cuda::StepProgram> programs_;
  std::string step_note_;
  // During a capture: op `what` has no persistent instruction.
  void tape_refuse(const char* what) {
    if (capturing_) tape_.refuse(what);
  }
};

}  // namespace laya
