#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "core/memlock.h"

namespace laya {

Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::create(std::shared_ptr<const Model> model, const EngineOptions& opt_in) {
  std::unique_ptr<Engine> e(new Engine());
  e->model_ = std::move(model);
  e->opt_ = opt_in;
  const HParams& hp = e->model_->hparams();
  EngineOptions& o = e->opt_;
  if (o.n_threads <= 0) o.n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (o.n_ctx <= 0) o.n_ctx = std::min<int64_t>(hp.n_ctx_train, 4096);
  if (o.n_ctx > (int64_t{1} << 24)) {
    return Status(StatusCode::kInvalidArgument, strformat("n_ctx = %lld is too large (max 16M)", static_cast<long long>(o.n_ctx)));
  }
  if (o.n_batch <= 0) o.n_batch = 256;
  o.n_batch = std::min(o.n_batch, o.n_ctx);
  if (o.kv_type != DType::F32 && o.kv_type != DType::F16 && o.kv_type != DType::Q8_0) {
    return Status(StatusCode::kUnsupported,
                  strformat("KV cache type %s is not supported (F32, F16 or Q8_0)", dtype_name(o.kv_type)));
  }
  if (o.kv_type == DType::Q8_0 && hp.head_dim % 32 != 0) {
    return Status(StatusCode::kUnsupported, strformat("a Q8_0 KV cache needs head_dim to be a multiple of 32, this model's "
                                                      "is %lld (use F16 or F32)", static_cast<long long>(hp.head_dim)));
  }
  CpuBackendLimits lim;
  lim.n_threads = o.n_threads;
  lim.max_cols = std::max({hp.n_embd, hp.n_ff, hp.q_dim()});
  lim.max_ctx = o.n_ctx;
  lim.max_group = hp.n_head / hp.n_head_kv;
  lim.max_batch = o.n_batch;
  e->backend_ = std::make_unique<CpuBackend>(lim);
  if (o.pack_weights) {
    const ModelWeights& w = e->model_->weights();
    std::vector<const Tensor*> mats = {&w.output};
    for (const auto& L : w.layers)
      for (const Tensor* t : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) mats.push_back(t);
    e->packed_bytes_ = e->backend_->pack(mats);
  }
  e->scratch_ = std::make_unique<ForwardScratch>(hp, o.n_batch);
  e->logits_.assign(static_cast<size_t>(hp.n_vocab), 0.0f);

  // RoPE angles as Hugging Face computes them: inv_freq and pos * inv_freq in
  // float32; cos/sin of that float angle, correctly rounded.
  const int64_t half = hp.head_dim / 2;
  e->rope_cos_.resize(static_cast<size_t>(o.n_ctx * half));
  e->rope_sin_.resize(static_cast<size_t>(o.n_ctx * half));
  std::vector<float> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float expo = static_cast<float>(2 * i) / static_cast<float>(hp.head_dim);
    float f = 1.0f / std::pow(static_cast<float>(hp.rope_theta), expo);
    if (!hp.rope_freq_factors.empty()) f = f / hp.rope_freq_factors[static_cast<size_t>(i)];
    inv[static_cast<size_t>(i)] = f;
  }
  for (int64_t p = 0; p < o.n_ctx; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const float ang = static_cast<float>(p) * inv[static_cast<size_t>(i)];
      e->rope_cos_[static_cast<size_t>(p * half + i)] = static_cast<float>(std::cos(static_cast<double>(ang)));
      e->rope_sin_[static_cast<size_t>(p * half + i)] = static_cast<float>(std::sin(static_cast<double>(ang)));
    }
  }
  e->rope_ = RopeTable{e->rope_cos_.data(), e->rope_sin_.data(), half, o.n_ctx,
                       hp.rope_layout == RopeLayout::kInterleaved};
  if (o.lock_memory) e->lock_everything_read_per_token();
  return e;
}

void Engine::lock(const void* p, size_t n, const char* what) {
  if (!opt_.lock_memory || !lock_note_.empty()) return;  // one refusal is enough to know
  if (Status st = lock_pages(p, n, what); !st.ok()) lock_note_ = st.message();
}

void Engine::lock_everything_read_per_token() {
  const ModelWeights& w = model_->weights();
  if (const auto region = backend_->packed_region(); region.second > 0) lock(region.first, region.second, "the packed weights");
  // The rest is read from the file mapping. Packed matrices' file pages were
  // given back; locking them would read them in again.
  auto weight = [&](const Tensor& t) {
    if (t.present() && !backend_->is_packed(t)) lock(t.data, t.nbytes, "the weights");
  };
  weight(w.tok_embd);
  weight(w.output);
  weight(w.output_norm);
  for (const auto& L : w.layers) {
    for (const Tensor* t : {&L.attn_norm, &L.wq, &L.wk, &L.wv, &L.bq, &L.bk, &L.bv, &L.q_norm, &L.k_norm, &L.wo,
                            &L.ffn_norm, &L.w_gate, &L.w_up, &L.w_down})
      weight(*t);
  }
  for (const std::vector<float>* v : scratch_->buffers()) lock(v->data(), v->size() * sizeof(float), "the forward scratch");
  lock(logits_.data(), logits_.size() * sizeof(float), "the logits");
  lock(rope_cos_.data(), rope_cos_.size() * sizeof(float), "the RoPE table");
  lock(rope_sin_.data(), rope_sin_.size() * sizeof(float), "the RoPE table");
}

std::unique_ptr<Sequence> Engine::new_sequence() {
  const HParams& hp = model_->hparams();
  std::unique_ptr<Sequence> s(new Sequence(hp.n_layer, opt_.n_ctx, hp.n_head_kv, hp.head_dim, opt_.kv_type));
  lock(s->kv_.k_data(), s->kv_.bytes() / 2, "a KV cache");
  lock(s->kv_.v_data(), s->kv_.bytes() / 2, "a KV cache");
  return s;
}

Status Engine::truncate(Sequence& seq, int64_t pos) {
  LAYA_TRY(seq.kv_.truncate(pos));
  seq.tokens_.resize(static_cast<size_t>(pos));
  return Status::Ok();
}

Status Engine::prefill(Sequence& seq, std::span<const int32_t> tokens, int64_t pos, float* all_logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return Status(StatusCode::kInvalidArgument, "prefill: no tokens");
  if (pos < 0 || pos > seq.n_past()) {
    return Status(StatusCode::kOutOfRange, strformat("prefill at position %lld: must be in [0, %lld] (tokens cached)",
                                                     static_cast<long long>(pos), static_cast<long long>(seq.n_past())));
  }
  if (pos + n > seq.n_ctx()) {
    return Status(StatusCode::kOutOfRange, strformat("prefill of %lld tokens at position %lld exceeds the context of %lld "
                                                     "tokens (raise n_ctx)", static_cast<long long>(n),
                                                     static_cast<long long>(pos), static_cast<long long>(seq.n_ctx())));
  }
  const int64_t nv = n_vocab();
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[static_cast<size_t>(i)] < 0 || tokens[static_cast<size_t>(i)] >= nv) {
      return Status(StatusCode::kInvalidArgument, strformat("token %lld at index %lld is out of range [0, %lld)",
                                                            static_cast<long long>(tokens[static_cast<size_t>(i)]),
                                                            static_cast<long long>(i), static_cast<long long>(nv)));
    }
  }
  LAYA_TRY(truncate(seq, pos));
  for (int64_t off = 0; off < n; off += opt_.n_batch) {
    const int64_t m = std::min(opt_.n_batch, n - off);
    const bool last = off + m == n;
    float* out = all_logits ? all_logits + off * nv : (last ? logits_.data() : nullptr);
    transformer_forward(*model_, *backend_, rope_, seq.kv_, *scratch_, tokens.data() + off, m, pos + off, out,
                        all_logits != nullptr);
    seq.tokens_.insert(seq.tokens_.end(), tokens.begin() + off, tokens.begin() + off + m);
  }
  if (all_logits) std::copy(all_logits + (n - 1) * nv, all_logits + n * nv, logits_.begin());
  return Status::Ok();
}

Status Engine::decode(Sequence& seq, int32_t token) {
  return prefill(seq, std::span<const int32_t>(&token, 1), seq.n_past(), nullptr);
}

}  // namespace laya
