// Engine: one loaded model + a backend (chosen by name) + a KV block pool,
// serving any number of independent sequences. Built for interactive use:
// prefill at a position (cutting the sequence back to it), decode one step,
// read that sequence's logits. After create(), prefill/decode allocate
// nothing but a sequence's first logits buffer and the pool's blocks (made
// when the pool was).
//
// Thread safety: forward passes are serialised (one backend workspace), so
// prefill/decode/truncate may be called from several threads on different
// sequences; a Sequence itself is used by one thread at a time.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "kv/kv_block_pool.h"
#include "model/forward.h"
#include "model/model.h"

namespace laya {

struct EngineOptions {
  std::string backend = "cpu";  // make_backend() name
  int n_threads = 0;        // 0: all online cores; at most ThreadPool::max_threads() (else kInvalidArgument)
  int64_t n_ctx = 0;        // positions per sequence; 0: min(training context, 4096)
  int64_t n_batch = 256;    // tokens per forward pass in a prefill
  // F32 by default: an F16 cache alone costs ~7e-4 relative logit error
  // (measured on the reference models), the whole budget of the default mode.
  // Q8_0 (int8, a float32 scale per 32 values: 28 % of F32's memory) trades
  // ~1e-2 relative logit error for memory on long contexts.
  DType kv_type = DType::F32;  // F32, F16 or Q8_0
  // Bytes of KV memory shared by all sequences (the block pool, allocated,
  // zero-filled and locked by create()). 0: one full context of n_ctx
  // positions or 16 MiB, whichever is larger: a few short sequences fit
  // beside a long one (16 MiB is ~2,700 positions of the default model),
  // and a one-sequence run of a large model holds no more than before.
  size_t kv_budget_bytes = 0;
  // With kv_budget_bytes 0: this many full contexts (still at least 16 MiB).
  // `replay --verify` holds two sequences of up to a full context each: the
  // live one and the fresh one it is checked against.
  int64_t kv_default_contexts = 1;
  // Positions per KV block: a multiple of 16 (the CPU kernels' K layout). 64
  // keeps the block table short (64 entries for 4,096 positions) while a
  // shared prefix is still found at a fine grain.
  int64_t kv_block_positions = 64;
  // Let the backend repack matrices for its fast decode kernels (the CPU's
  // AVX-512 VNNI layouts with two-term int8 activations, ~15 bits; the file
  // pages are released). false: file layout and float32 activations everywhere.
  bool pack_weights = true;
  // mlock what every decode step reads — the weights (the packed copy, and
  // the file pages of the rest), the KV pool, the forward scratch — so no
  // token waits for a page. Where the OS refuses (locked-memory limit), the
  // engine runs unlocked and memory_lock_note() says why.
  bool lock_memory = true;
  // Made in background mode (Backend::set_background): the weights are
  // packed and every forward pass runs on the calling thread alone until
  // set_background(false). ModelSlot prepares a swap's model so.
  bool background = false;
  // BackendOptions::awake_ms: how long the CPU workers stay awake (spinning)
  // after a forward pass. 0: ~50 us, then they sleep.
  int awake_ms = 0;
  // BackendOptions::isa and ::cuda: the CPU kernels' instruction set and the
  // CUDA backend's tuning (empty / unset: LAYA_ISA and the LAYA_CUDA_*
  // variables give them).
  std::string isa;
  std::optional<CudaTuning> cuda;
  // Progress of create()'s longest step, preparing the weights
  // (BackendOptions::on_prepare_progress): called on the calling thread with
  // bytes done and in all, ending with done == total. Empty: none.
  std::function<void(uint64_t done, uint64_t total)> on_prepare_progress;
};

class Engine;

class Sequence {
 public:
  int64_t n_past() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t n_ctx() const { return n_ctx_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // Logits (n_vocab, host memory) of the last token of this sequence's last
  // prefill/decode; nullptr before the first.
  const float* logits() const { return logits_host_; }
  // The KV blocks this sequence holds (none before its first token).
  const KvBlockTable& blocks() const { return table_; }

 private:
  friend class Engine;
  Sequence(std::shared_ptr<KvBlockPool> pool, int64_t n_ctx);
  std::shared_ptr<KvBlockPool> pool_;  // first: destroyed last, after the table gives its blocks back
  int64_t n_ctx_;
  KvBlockTable table_;
  std::vector<int32_t> tokens_;   // the tokens whose K/V are cached
  Buffer logits_;                 // backend memory, made by the first forward
  std::vector<float> logits_copy_;  // host copy where backend memory is not host-visible
  const float* logits_host_ = nullptr;
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(std::shared_ptr<const Model> model, const EngineOptions& opt);
  ~Engine();

  const Model& model() const { return *model_; }
  const HParams& hparams() const { return model_->hparams(); }
  const EngineOptions& options() const { return opt_; }
  const Backend& backend() const { return *backend_; }
  // Backend::set_background: forward passes on the calling thread alone
  // (on) or the backend's full width (off). Between forward passes only.
  void set_background(bool on) const { backend_->set_background(on); }
  // Backend::wake: a keystroke arrived, the first forward pass is near.
  void wake() const { backend_->wake(); }
  const KvBlockPool& kv_pool() const { return *pool_; }
  // Empty when everything asked for is locked (or locking is off); else the
  // first refusal: what, how much, the limit, and how to raise it.
  const std::string& memory_lock_note() const { return backend_->memory_lock_note(); }
  int64_t n_vocab() const { return model_->hparams().n_vocab; }

  // A new, empty sequence of up to n_ctx positions. It takes KV blocks from
  // the pool as it grows; until its first token it costs a few KB.
  std::unique_ptr<Sequence> new_sequence();
  // A sequence holding the first n_pos tokens of `src` (n_pos <= src.n_past()),
  // sharing its KV blocks (copied only when either writes into a shared one).
  Result<std::unique_ptr<Sequence>> fork(const Sequence& src, int64_t n_pos);

  // Feeds tokens at positions pos, pos+1, ... after cutting the sequence back
  // to pos (pos <= seq.n_past()). Afterwards seq.logits() holds the last
  // token's logits; with all_logits != nullptr it also receives (n, n_vocab)
  // floats. `cancel` (may be set from any thread) is checked between batch
  // chunks: kCancelled, with the sequence holding the chunks done so far.
  Status prefill(Sequence& seq, std::span<const int32_t> tokens, int64_t pos, float* all_logits = nullptr,
                 const std::atomic<bool>* cancel = nullptr);
  // One decode step: token at position seq.n_past().
  Status decode(Sequence& seq, int32_t token);
  // Cut the sequence back to pos.
  Status truncate(Sequence& seq, int64_t pos);
  // Resumes an empty sequence from cached blocks holding a prefix of
  // `tokens` (left by sequences that held the same tokens). Returns the
  // positions reused, a multiple of the block size; the caller prefills the rest.
  int64_t reuse_cached_prefix(Sequence& seq, std::span<const int32_t> tokens);

  // ---- persistence (session/session_store.h) ----
  // The model + KV format identity every block's content key starts from:
  // KV bytes saved by an engine with the same value are valid here.
  uint64_t kv_seed() const { return kv_seed_; }
  // Refills an empty sequence with saved tokens and the K/V of their blocks:
  // block b (kv_pool().layout().block_bytes() bytes, host memory) is
  // block_src(b); a full block already resident under the same content key
  // is shared instead (no copy), so documents restored with a common head
  // hold it once. The last, partial block is copied too: the sequence
  // resumes with nothing to recompute. kOutOfMemory when the pool is full,
  // kInvalidArgument for a token out of range or a sequence that is not
  // empty; on failure the sequence is left empty.
  Status restore_sequence(Sequence& seq, std::span<const int32_t> tokens,
                          const std::function<const uint8_t*(int64_t block)>& block_src);
  // Copies KV block `id` of the pool (kv_pool().layout().block_bytes() bytes)
  // into host memory, through the backend's download(): for saving sessions
  // where the pool is device memory.
  Status read_kv_block(int32_t id, uint8_t* host_dst);
  // Forgets the pool's cached (unreferenced) blocks: a cold start for a
  // measurement (KvBlockPool::forget_cached).
  void forget_cached_kv();

 private:
  Engine() = default;
  Status check_sequence(const Sequence& seq, const char* what) const;
  Status check_tokens(std::span<const int32_t> tokens) const;
  Status forward_chunk(Sequence& seq, const int32_t* tokens, int64_t m, int64_t pos, float* out, bool all_logits);
  // The RoPE tables (model/forward.h): every layer's, and the windowed
  // layers' where their base differs (Gemma 3).
  Status make_rope_tables();
  Status make_rope_table(double theta, bool scaled, Buffer* buf, RopeTable* out);

  std::shared_ptr<const Model> model_;
  EngineOptions opt_;
  std::shared_ptr<Backend> backend_;  // shared with the pool: outlives every buffer
  ForwardScratch scratch_;
  Buffer rope_buf_, rope_local_buf_;
  // All-position logits on a backend whose memory the host cannot read:
  // rows computed here, then downloaded (forward_chunk).
  static constexpr int64_t kLogitRowsPerDownload = 16;
  Buffer all_logits_dev_;
  RopeTables rope_;
  KvLayout kv_layout_;
  std::shared_ptr<KvBlockPool> pool_;
  uint64_t kv_seed_ = 0;  // model + KV format identity: the root of every block's content key
  std::mutex forward_mu_;
};

}  // namespace laya
