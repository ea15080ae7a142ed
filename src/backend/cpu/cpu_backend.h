// CPU backend: per-row kernels (cpu/kernels.h) driven by a persistent thread
// pool. Its buffers are host memory, zero-filled (paged in) and mlocked when
// made. All scratch is allocated in create(); ops allocate nothing.
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/packed.h"
#include "core/thread_pool.h"

namespace laya {

class CpuBackend final : public Backend {
 public:
  // opt.n_threads beyond ThreadPool::max_threads() is refused
  // (kInvalidArgument); a thread the OS refuses is kOutOfMemory.
  static Result<std::unique_ptr<Backend>> create(const BackendOptions& opt, const ForwardLimits& lim);
  ~CpuBackend() override;
  const char* name() const override;

  Result<Buffer> alloc(size_t bytes, const char* what) override;
  Status upload(void* dst, const void* host_src, size_t bytes) override;
  Status download(void* host_dst, const void* src, size_t bytes) override;
  Status copy(void* dst, const void* src, size_t bytes) override;
  Status synchronize() override { return Status::Ok(); }
  bool host_visible() const override { return true; }
  // Repacks the matrices of the types with VNNI decode kernels (cpu/packed.h)
  // when this CPU has them, hands the file pages they came from back to the
  // OS (the weights are not held twice), and locks the packed copy and the
  // file pages of everything else the forward pass reads.
  Status prepare_weights(const std::vector<const Tensor*>& matrices, const std::vector<const Tensor*>& all) override;
  size_t prepared_bytes() const override { return packed_bytes_; }
  const std::string& memory_lock_note() const override { return lock_note_; }
  void set_background(bool on) override { pool_.set_solo(on); }
  void wake() override { pool_.wake(); }
  int64_t exact_rows() const override { return kExactRowsMax; }

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

  // Rows dequantized at a time per thread in a multi-token matmul.
  static constexpr int64_t kTileRows = 16;
  // Passes of up to this many tokens multiply with the one-token kernels'
  // arithmetic (Backend::exact_rows()); longer ones with the tiled GEMM.
  static constexpr int64_t kExactRowsMax = 16;

 protected:
  void release(void* data, size_t bytes) override;

 private:
  CpuBackend(const BackendOptions& opt, const ForwardLimits& lim, int n_threads, cpu::Isa isa);
  // The packing half of prepare_weights(); returns the bytes packed. Adds each
  // packed matrix's file bytes to *done; `report` runs on the caller's thread.
  size_t pack(const std::vector<const Tensor*>& matrices, std::atomic<uint64_t>* done,
              const std::function<void()>& report);
  // Locks [p, p + n) when opt_.lock_memory; the first refusal goes to lock_note_.
  void lock(const void* p, size_t n, const char* what);

  // y (n_tok, ldy) rows r of the tile rowp[0..nr) for tokens x (n_tok, cols).
  void gemm_rows(const float* const* rowp, int64_t nr, const float* x, int64_t cols, int64_t n_tok, float* y, int64_t ldy,
                 int ti);
  struct PackedEntry;
  // Rows [b, e) of one matrix for tokens x (n_tok, cols), on thread ti; pe is
  // w's packed form or nullptr (looked up by the caller, once per op).
  void matmul_rows(const Tensor& w, const PackedEntry* pe, const float* x, int64_t n_tok, float* y, int64_t b, int64_t e,
                   int ti);
  // affine_x_[t] for tokens x (n_tok, cols) when one of ws[0..n) is an MLX
  // affine matrix and the pass runs the dot kernels (n_tok ≤ kExactRowsMax).
  void prepare_affine_input(const Tensor* const* ws, int n, const float* x, int64_t cols, int64_t n_tok);
  std::vector<float> affine_x4_, affine_sum_;
  std::vector<cpu::AffineX> affine_x_;
  // matmul_rows of an MLX affine matrix (mlx_bits(w.type) == bits).
  void matmul_rows_affine(const Tensor& w, int bits, const float* x, int64_t n_tok, float* y, int64_t b, int64_t e,
                          int ti);
  static constexpr int kMaxGroup = 8;  // matrices per matmul_group job

  struct alignas(64) ThreadScratch {
    std::vector<float> tile;    // kTileRows * max_cols
    std::vector<float> tileT;   // the tile transposed (AVX-512 outer-product GEMM)
    std::vector<float> scores;  // max_ctx * max_group
  };
  // A packed matrix with the decode kernel for its type.
  struct PackedEntry {
    cpu::PackedMatrix m;
    cpu::PackedMatvecFn matvec;
  };
  const PackedEntry* packed(const Tensor& w) const {
    if (packed_.empty()) return nullptr;
    auto it = packed_.find(w.data);
    return it == packed_.end() ? nullptr : &it->second;
  }

  BackendOptions opt_;
  ForwardLimits lim_;
  // This backend's instruction set (BackendOptions::isa) and its kernels:
  // another backend of the process may use another.
  cpu::Isa isa_;
  const cpu::KernelTable* kt_;
  std::string lock_note_;
  size_t packed_bytes_ = 0;
  bool use_tileT_ = false;
  std::unordered_map<const uint8_t*, PackedEntry> packed_;
  uint8_t* packed_buf_ = nullptr;
  size_t packed_alloc_ = 0;
  cpu::QuantizeXFn quantize_x_ = cpu::quantize_x;
  // Each token's activations quantized for the packed kernels (qx_[0] is the
  // decode input), written once per matmul_group / matmul_swiglu.
  std::vector<int8_t> qx_hi_, qx_lo_;
  std::vector<float> qx_d_, qx_sum_;
  std::vector<int32_t> qx_corr_, qx_corr16_;
  std::vector<cpu::QuantizedX> qx_;
  // Quantizes x (n_tok, cols) into qx_ when a packed kernel of pes[0..n) will read it.
  void quantize_packed_input(const PackedEntry* const* pes, int n, const float* x, int64_t cols, int64_t n_tok);
  bool uses_packed_gemm(const PackedEntry* pe, int64_t n_tok) const;
  void (*gemm_)(const float* const*, int64_t, const float*, int64_t, int64_t, int64_t, float*, int64_t) = nullptr;
  ThreadPool pool_;
  std::vector<ThreadScratch> scratch_;

  // Decode row ranges with stealing: each thread starts on its even share,
  // claiming kDecodeChunkRows at a time from its own counter (uncontended),
  // then helps the others from theirs. A thread the OS or the hypervisor
  // stalls for a moment then costs only its current chunk, and cores that
  // run at different speeds still finish together.
  static constexpr int64_t kDecodeChunkRows = 256;
  struct alignas(64) RowCounter {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };
  std::unique_ptr<RowCounter[]> counters_;
  int n_counters_ = 1;  // counters set by the last reset_row_counters
  // Sets the counters to the even split of n rows (grain 16).
  void reset_row_counters(int64_t n);
  // Runs rows(b, e, thread) over [0, n) on the pool: stolen chunks for a
  // decode step, an even split (grain 16) for a multi-token pass.
  template <typename F>
  void run_rows(int64_t n, int64_t n_tok, F&& rows);
  // Runs fn(b, e) over [0, n) split evenly across the pool in units of
  // `grain`, or fn(0, n) on the caller's thread when n < serial_below.
  template <typename F>
  void run_split(int64_t n, int64_t grain, int64_t serial_below, F&& fn);
  // Calls f(b, e) for every chunk thread ti claims until all rows are done.
  template <typename F>
  void claim_rows(int ti, int nt, F&& f) {
    (void)nt;
    for (int k = 0; k < n_counters_; ++k) {
      RowCounter& c = counters_[static_cast<size_t>((ti + k) % n_counters_)];
      for (int64_t r; (r = c.next.fetch_add(kDecodeChunkRows, std::memory_order_relaxed)) < c.end;)
        f(r, std::min(r + kDecodeChunkRows, c.end));
    }
  }
};

}  // namespace laya
