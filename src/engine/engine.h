// Engine: one loaded model + a backend + preallocated scratch, serving any
// number of independent sequences (each with its own KV cache). Built for
// interactive use: prefill at a position (cutting the cache back to it),
// decode one step, read the logits. After create(), prefill/decode allocate
// nothing.
#pragma once

#include <memory>
#include <string>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "model/transformer.h"

namespace laya {

class CpuBackend;

struct EngineOptions {
  int n_threads = 0;        // 0: all online cores
  int64_t n_ctx = 0;        // 0: min(training context, 4096)
  int64_t n_batch = 256;    // tokens per forward pass in a prefill
  // F32 by default: an F16 cache alone costs ~7e-4 relative logit error
  // (measured on the reference models), the whole budget of the default mode.
  // Q8_0 (int8, a float32 scale per 32 values: 28 % of F32's memory) trades
  // ~1e-2 relative logit error for memory on long contexts.
  DType kv_type = DType::F32;  // F32, F16 or Q8_0
  // Repack Q8_0 matrices for the AVX-512 VNNI decode kernels (two-term int8
  // activations, ~15 bits); the file pages are released. false: file layout
  // and float32 activations everywhere.
  bool pack_weights = true;
  // mlock what every decode step reads — the weights (the packed copy, and
  // the file pages of the rest), each sequence's KV cache, the forward
  // scratch — so no token waits for a page. Where the OS refuses (locked-
  // memory limit), the engine runs unlocked and memory_lock_note() says why.
  bool lock_memory = true;
};

class Sequence {
 public:
  int64_t n_past() const { return kv_.n_past(); }
  int64_t n_ctx() const { return kv_.n_ctx(); }
  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  friend class Engine;
  Sequence(int64_t n_layer, int64_t n_ctx, int64_t n_head_kv, int64_t head_dim, DType t)
      : kv_(n_layer, n_ctx, n_head_kv, head_dim, t) {
    tokens_.reserve(static_cast<size_t>(n_ctx));
  }
  KvCache kv_;
  std::vector<int32_t> tokens_;  // the tokens whose K/V are cached
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(std::shared_ptr<const Model> model, const EngineOptions& opt);
  ~Engine();

  const Model& model() const { return *model_; }
  const HParams& hparams() const { return model_->hparams(); }
  const EngineOptions& options() const { return opt_; }
  // Empty when everything asked for is locked (or locking is off); else the
  // first refusal: what, how much, the limit, and how to raise it.
  const std::string& memory_lock_note() const { return lock_note_; }
  int64_t n_vocab() const { return model_->hparams().n_vocab; }

  // A new, empty sequence with a KV cache of n_ctx positions (allocated here).
  std::unique_ptr<Sequence> new_sequence();

  // Feeds tokens at positions pos, pos+1, ... after cutting the cache back to
  // pos (pos <= seq.n_past()). Afterwards logits() holds the last token's
  // logits; with all_logits != nullptr it also receives (n, n_vocab) floats.
  Status prefill(Sequence& seq, std::span<const int32_t> tokens, int64_t pos, float* all_logits = nullptr);
  // One decode step: token at position seq.n_past().
  Status decode(Sequence& seq, int32_t token);
  // Cut the cache back to pos.
  Status truncate(Sequence& seq, int64_t pos);

  // Logits (n_vocab) of the last token of the last prefill/decode.
  const float* logits() const { return logits_.data(); }
  // Bytes of weights repacked for the backend's fast decode path.
  size_t packed_bytes() const { return packed_bytes_; }

 private:
  Engine() = default;
  std::shared_ptr<const Model> model_;
  EngineOptions opt_;
  std::unique_ptr<CpuBackend> backend_;
  std::unique_ptr<ForwardScratch> scratch_;
  std::vector<float> rope_cos_, rope_sin_;
  RopeTable rope_;
  std::vector<float> logits_;
  size_t packed_bytes_ = 0;
  std::string lock_note_;
  // Locks [p, p + n) when opt_.lock_memory; the first refusal goes to lock_note_.
  void lock(const void* p, size_t n, const char* what);
  void lock_everything_read_per_token();
};

}  // namespace laya
