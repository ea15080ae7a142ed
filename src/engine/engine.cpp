#include "engine/engine.h"

#include <algorithm>
#include <fmt/format.h>
#include <cmath>
#include <cstring>
#include <thread>

#include <xxhash.h>

#include "core/thread_pool.h"

namespace laya {

namespace {

// The root of every KV block's content key: what makes two blocks of the
// same tokens interchangeable — the model (hyper-parameters, tensor names,
// types and shapes, and a sample of each tensor's bytes: cheap, and two files
// differing only in unsampled bytes would have to be crafted) and the KV
// format (type, block size).
uint64_t kv_identity(const Model& m, const KvLayout& kv) {
  XXH64_state_t* st = XXH64_createState();
  XXH64_reset(st, 0x6c617961);  // "laya"
  const HParams& hp = m.hparams();
  const int64_t dims[] = {hp.n_vocab, hp.n_embd, hp.n_layer, hp.n_head, hp.n_head_kv, hp.head_dim, hp.n_ff,
                          static_cast<int64_t>(kv.type), kv.block_pos};
  XXH64_update(st, dims, sizeof dims);
  XXH64_update(st, hp.arch.data(), hp.arch.size());
  XXH64_update(st, &hp.rms_eps, sizeof hp.rms_eps);
  XXH64_update(st, &hp.rope_theta, sizeof hp.rope_theta);
  // What makes the same tensors attend otherwise (windows, Gemma 2 / 3);
  // hashed only when set, so the other models keep their identity.
  const double attn[] = {static_cast<double>(hp.sliding_window), hp.rope_theta_local, hp.attn_softcap, hp.final_softcap};
  if (std::any_of(std::begin(attn), std::end(attn), [](double v) { return v != 0; })) {
    XXH64_update(st, attn, sizeof attn);
    XXH64_update(st, hp.swa_layers.data(), hp.swa_layers.size());
  }
  XXH64_update(st, hp.rope_freq_factors.data(), hp.rope_freq_factors.size() * sizeof(float));
  for (const Tensor& t : m.all_tensors()) {
    XXH64_update(st, t.name.data(), t.name.size());
    XXH64_update(st, &t.type, sizeof t.type);
    XXH64_update(st, t.ne, sizeof t.ne);
    const size_t n = std::min<size_t>(t.nbytes, 64);
    if (t.data && n) {
      XXH64_update(st, t.data, n);
      XXH64_update(st, t.data + t.nbytes - n, n);
    }
    if (t.groups.nbytes) {  // an MLX tensor: the same values with other scales are another model
      const size_t g = std::min<size_t>(t.groups.nbytes, 64);
      XXH64_update(st, t.groups.scales, g);
      XXH64_update(st, t.groups.biases + t.groups.nbytes - g, g);
    }
  }
  const uint64_t h = XXH64_digest(st);
  XXH64_freeState(st);
  return h;
}

}  // namespace

Sequence::Sequence(std::shared_ptr<KvBlockPool> pool, int64_t n_ctx)
    : pool_(std::move(pool)), n_ctx_(n_ctx), table_(*pool_, n_ctx) {
  tokens_.reserve(static_cast<size_t>(n_ctx));
}

Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::create(std::shared_ptr<const Model> model, const EngineOptions& opt_in) {
  std::unique_ptr<Engine> e(new Engine());
  e->model_ = std::move(model);
  e->opt_ = opt_in;
  const HParams& hp = e->model_->hparams();
  EngineOptions& o = e->opt_;
  LAYA_TRY(ThreadPool::check_count(o.n_threads));  // negative, or past the bound: refused before any work
  if (o.n_threads == 0) o.n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (o.n_ctx <= 0) o.n_ctx = std::min<int64_t>(hp.n_ctx_train, 4096);
  if (o.n_ctx > (int64_t{1} << 24)) {
    return Status(StatusCode::kInvalidArgument, fmt::format("n_ctx = {} is too large (max 16M)", o.n_ctx));
  }
  if (o.n_batch <= 0) o.n_batch = 256;
  o.n_batch = std::min(o.n_batch, o.n_ctx);
  if (o.kv_type != DType::F32 && o.kv_type != DType::F16 && o.kv_type != DType::Q8_0) {
    return Status(StatusCode::kUnsupported,
                  fmt::format("KV cache type {} is not supported (F32, F16 or Q8_0)", dtype_name(o.kv_type)));
  }
  if (o.kv_type == DType::Q8_0 && hp.head_dim % 32 != 0) {
    return Status(
        StatusCode::kUnsupported,
        fmt::format("a Q8_0 KV cache needs head_dim to be a multiple of 32, this model's is {} (use F16 or F32)",
                    hp.head_dim));
  }
  LAYA_TRY(KvBlockPool::check_block_positions(o.kv_block_positions));  // before the costly packing
  if (!e->model_->arch().forward || !e->model_->arch().logits) {
    return Status(StatusCode::kUnsupported,
                  fmt::format("architecture {} has no forward pass", e->model_->arch().name));
  }
  LAYA_TRY(e->model_->check_files_unchanged());  // packing reads every weight
  ForwardLimits lim;
  lim.max_cols = std::max({hp.n_embd, hp.n_ff, hp.q_dim()});
  lim.max_ctx = o.n_ctx;
  lim.max_group = hp.n_head / hp.n_head_kv;
  lim.max_batch = o.n_batch;
  BackendOptions bo;
  bo.n_threads = o.n_threads;
  bo.lock_memory = o.lock_memory;
  bo.background = o.background;
  bo.awake_ms = o.awake_ms;
  bo.on_prepare_progress = o.on_prepare_progress;
  bo.isa = o.isa;
  bo.cuda = o.cuda;
  LAYA_ASSIGN_OR_RETURN(std::unique_ptr<Backend> be, make_backend(o.backend, bo, lim));
  e->backend_ = std::move(be);
  const ModelWeights& w = e->model_->weights();
  LAYA_TRY(e->backend_->prepare_weights(o.pack_weights ? w.matrices() : std::vector<const Tensor*>{}, w.all()));
  LAYA_ASSIGN_OR_RETURN(e->scratch_, ForwardScratch::create(*e->backend_, hp, o.n_batch));
  LAYA_TRY(e->make_rope_tables());

  e->kv_layout_ = KvLayout{hp.n_layer, hp.n_head_kv, hp.head_dim, o.kv_type, o.kv_block_positions};
  if (o.kv_budget_bytes == 0) {
    const int64_t blocks =
        (o.n_ctx + o.kv_block_positions - 1) / o.kv_block_positions * std::max<int64_t>(1, o.kv_default_contexts);
    o.kv_budget_bytes = std::max(static_cast<size_t>(blocks) * e->kv_layout_.block_bytes(), size_t{16} << 20);
  }
  LAYA_ASSIGN_OR_RETURN(std::unique_ptr<KvBlockPool> pool,
                        KvBlockPool::create(e->backend_, e->kv_layout_, o.kv_budget_bytes));
  e->pool_ = std::move(pool);
  e->kv_seed_ = kv_identity(*e->model_, e->kv_layout_);
  return e;
}

Status Engine::make_rope_tables() {
  const HParams& hp = model_->hparams();
  LAYA_TRY(make_rope_table(hp.rope_theta, true, &rope_buf_, &rope_.full));
  rope_.local = rope_.full;
  if (hp.rope_theta_local > 0 && hp.sliding_window > 0) {
    LAYA_TRY(make_rope_table(hp.rope_theta_local, false, &rope_local_buf_, &rope_.local));
  }
  return Status::Ok();
}

Status Engine::make_rope_table(double theta, bool scaled, Buffer* buf, RopeTable* out) {
  // RoPE angles as Hugging Face computes them: inv_freq and pos * inv_freq in
  // float32; cos/sin of that float angle, correctly rounded. `scaled`: with
  // the model's rope_freq_factors (Gemma 3 scales its global layers only).
  const HParams& hp = model_->hparams();
  const int64_t half = hp.head_dim / 2, n_ctx = opt_.n_ctx;
  std::vector<float> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float expo = static_cast<float>(2 * i) / static_cast<float>(hp.head_dim);
    float f = 1.0f / std::pow(static_cast<float>(theta), expo);
    if (scaled && !hp.rope_freq_factors.empty()) f = f / hp.rope_freq_factors[static_cast<size_t>(i)];
    inv[static_cast<size_t>(i)] = f;
  }
  // cos table then sin table, one buffer.
  std::vector<float> table(static_cast<size_t>(2 * n_ctx * half));
  float* cs = table.data();
  float* sn = table.data() + n_ctx * half;
  for (int64_t p = 0; p < n_ctx; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const float ang = static_cast<float>(p) * inv[static_cast<size_t>(i)];
      cs[p * half + i] = static_cast<float>(std::cos(static_cast<double>(ang)));
      sn[p * half + i] = static_cast<float>(std::sin(static_cast<double>(ang)));
    }
  }
  LAYA_ASSIGN_OR_RETURN(*buf, backend_->alloc(table.size() * sizeof(float), "the RoPE table"));
  LAYA_TRY(backend_->upload(buf->data(), table.data(), table.size() * sizeof(float)));
  const float* dev = buf->as<const float>();
  *out = RopeTable{dev, dev + n_ctx * half, half, n_ctx, hp.rope_layout == RopeLayout::kInterleaved};
  return Status::Ok();
}

std::unique_ptr<Sequence> Engine::new_sequence() {
  return std::unique_ptr<Sequence>(new Sequence(pool_, opt_.n_ctx));
}

Result<std::unique_ptr<Sequence>> Engine::fork(const Sequence& src, int64_t n_pos) {
  LAYA_TRY(check_sequence(src, "fork"));
  if (n_pos < 0 || n_pos > src.n_past()) {
    return Status(StatusCode::kOutOfRange,
                  fmt::format("fork of {} positions: must be in [0, {}] (tokens cached)", n_pos, src.n_past()));
  }
  std::lock_guard<std::mutex> lock(forward_mu_);
  std::unique_ptr<Sequence> s(new Sequence(pool_, opt_.n_ctx));
  s->table_.share_prefix(src.table_, n_pos);
  s->tokens_.assign(src.tokens_.begin(), src.tokens_.begin() + n_pos);
  return s;
}

int64_t Engine::reuse_cached_prefix(Sequence& seq, std::span<const int32_t> tokens) {
  if (seq.pool_ != pool_ || seq.n_past() > 0) return 0;
  std::lock_guard<std::mutex> lock(forward_mu_);
  const int64_t n =
      std::min<int64_t>(seq.table_.adopt_cached_prefix(kv_seed_, tokens), static_cast<int64_t>(tokens.size()));
  seq.tokens_.assign(tokens.begin(), tokens.begin() + n);
  return n;
}

Status Engine::restore_sequence(Sequence& seq, std::span<const int32_t> tokens,
                                const std::function<const uint8_t*(int64_t block)>& block_src) {
  LAYA_TRY(check_sequence(seq, "restore_sequence"));
  if (seq.n_past() > 0) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("restore_sequence: the sequence holds {} tokens; it must be empty", seq.n_past()));
  }
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n > seq.n_ctx()) {
    return Status(StatusCode::kOutOfRange,
                  fmt::format("restore_sequence: {} tokens exceed the context of {} tokens", n, seq.n_ctx()));
  }
  LAYA_TRY(check_tokens(tokens));
  std::lock_guard<std::mutex> lock(forward_mu_);
  const int64_t bp = kv_layout_.block_pos;
  const size_t bb = kv_layout_.block_bytes();
  uint64_t key = kv_seed_;
  for (int64_t b = 0; b * bp < n; ++b) {
    const bool full = (b + 1) * bp <= n;
    // Keys as key_full_blocks gives them; the partial block has none (0).
    if (full) key = KvBlockTable::chain_key(key, tokens.subspan(static_cast<size_t>(b * bp), static_cast<size_t>(bp)));
    Status st = seq.table_.append_block(full ? key : 0, [&](uint8_t* dst) { return backend_->upload(dst, block_src(b), bb); });
    if (!st.ok()) {
      seq.table_.truncate(0);
      return Status(st.code(), fmt::format("restore_sequence: block {} of {}: {}", b, (n + bp - 1) / bp, st.message()));
    }
  }
  seq.tokens_.assign(tokens.begin(), tokens.end());
  return Status::Ok();
}

Status Engine::read_kv_block(int32_t id, uint8_t* host_dst) {
  if (id < 0 || id >= pool_->n_blocks()) {
    return Status(StatusCode::kOutOfRange, fmt::format("read_kv_block: block {} of {}", id, pool_->n_blocks()));
  }
  std::lock_guard<std::mutex> lock(forward_mu_);
  const size_t bb = kv_layout_.block_bytes();
  return backend_->download(host_dst, pool_->memory() + static_cast<size_t>(id) * bb, bb);
}

void Engine::forget_cached_kv() {
  std::lock_guard<std::mutex> lock(forward_mu_);
  pool_->forget_cached();
}

Status Engine::check_sequence(const Sequence& seq, const char* what) const {
  if (seq.pool_ != pool_) {
    return Status(
        StatusCode::kInvalidArgument,
        fmt::format("{}: the sequence belongs to another engine (its KV blocks live in that engine's pool)", what));
  }
  return Status::Ok();
}

Status Engine::check_tokens(std::span<const int32_t> tokens) const {
  const int64_t nv = n_vocab();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= nv) {
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("token {} at index {} is out of range [0, {})", tokens[i], i, nv));
    }
  }
  return Status::Ok();
}

Status Engine::truncate(Sequence& seq, int64_t pos) {
  LAYA_TRY(check_sequence(seq, "truncate"));
  if (pos < 0 || pos > seq.n_past()) {
    return Status(StatusCode::kOutOfRange,
                  fmt::format("KV cache truncate to {}: must be in [0, {}] (tokens cached)", pos, seq.n_past()));
  }
  std::lock_guard<std::mutex> lock(forward_mu_);
  seq.table_.truncate(pos);
  seq.tokens_.resize(static_cast<size_t>(pos));
  return Status::Ok();
}

Status Engine::forward_chunk(Sequence& seq, const int32_t* tokens, int64_t m, int64_t pos, float* out,
                             bool all_logits) {
  LAYA_TRY(seq.table_.prepare_write(pos, m));
  const ArchSpec& arch = model_->arch();  // its block: the forward and logits functions
  const KvLayerView kv{&pool_->layout(), pool_->memory(), seq.table_.ids().data(), seq.table_.n_blocks(), 0};
  if (m == 1 && out && !all_logits) {
    // A decode step: the backend may replay a recording of it (Backend::step_begin).
    bool replayed = false;
    LAYA_TRY(backend_->step_begin(kv, tokens[0], pos, out, &replayed));
    if (!replayed) {
      Status st = arch.forward(*model_, *backend_, rope_, kv, scratch_, tokens, m, pos);
      if (st.ok()) st = arch.logits(*model_, *backend_, scratch_, 0, 1, out);
      const Status end = backend_->step_end(st.ok());
      LAYA_TRY(st);
      LAYA_TRY(end);
    }
    seq.tokens_.insert(seq.tokens_.end(), tokens, tokens + m);
    seq.table_.key_full_blocks(kv_seed_, seq.tokens_, pos);
    return Status::Ok();
  }
  LAYA_TRY(arch.forward(*model_, *backend_, rope_, kv, scratch_, tokens, m, pos));
  seq.tokens_.insert(seq.tokens_.end(), tokens, tokens + m);  // within the reserved n_ctx: no allocation
  seq.table_.key_full_blocks(kv_seed_, seq.tokens_, pos);
  if (!out) return Status::Ok();
  if (!all_logits) return arch.logits(*model_, *backend_, scratch_, m - 1, 1, out);
  if (backend_->host_visible()) return arch.logits(*model_, *backend_, scratch_, 0, m, out);
  // `out` is host memory: the rows go through a device buffer of a few rows,
  // made at the first such call (all-position logits are for tests and
  // measurements, not the keystroke path).
  const int64_t nv = n_vocab(), rows = std::min<int64_t>(opt_.n_batch, kLogitRowsPerDownload);
  if (!all_logits_dev_) {
    LAYA_ASSIGN_OR_RETURN(all_logits_dev_, backend_->alloc(static_cast<size_t>(rows * nv) * sizeof(float),
                                                           "the all-position logits' rows"));
  }
  for (int64_t f = 0; f < m; f += rows) {
    const int64_t k = std::min(rows, m - f);
    LAYA_TRY(arch.logits(*model_, *backend_, scratch_, f, k, all_logits_dev_.as<float>()));
    LAYA_TRY(backend_->download(out + f * nv, all_logits_dev_.data(), static_cast<size_t>(k * nv) * sizeof(float)));
  }
  return Status::Ok();
}

Status Engine::prefill(Sequence& seq, std::span<const int32_t> tokens, int64_t pos, float* all_logits,
                       const std::atomic<bool>* cancel) {
  LAYA_TRY(check_sequence(seq, "prefill"));
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return Status(StatusCode::kInvalidArgument, "prefill: no tokens");
  if (pos < 0 || pos > seq.n_past()) {
    return Status(StatusCode::kOutOfRange,
                  fmt::format("prefill at position {}: must be in [0, {}] (tokens cached)", pos, seq.n_past()));
  }
  if (n > seq.n_ctx() - pos) {
    return Status(StatusCode::kOutOfRange,
                  fmt::format("prefill of {} tokens at position {} exceeds the context of {} tokens (raise n_ctx)", n,
                              pos, seq.n_ctx()));
  }
  LAYA_TRY(check_tokens(tokens));
  // A weights file truncated under us would raise SIGBUS in the forward pass.
  LAYA_TRY(model_->check_files_unchanged());
  // The caller's all_logits array receives the rows directly where backend
  // memory is host memory (one matmul per chunk, as before the backend split);
  // else a few rows at a time through download() (forward_chunk).
  std::lock_guard<std::mutex> lock(forward_mu_);
  const int64_t nv = n_vocab();
  if (!seq.logits_) {  // the sequence's first forward
    LAYA_ASSIGN_OR_RETURN(seq.logits_, backend_->alloc(static_cast<size_t>(nv) * sizeof(float), "a sequence's logits"));
    if (backend_->host_visible()) {
      seq.logits_host_ = seq.logits_.as<const float>();
    } else {
      seq.logits_copy_.assign(static_cast<size_t>(nv), 0.0f);
      seq.logits_host_ = seq.logits_copy_.data();
    }
  }
  seq.table_.truncate(pos);
  seq.tokens_.resize(static_cast<size_t>(pos));
  for (int64_t off = 0; off < n; off += opt_.n_batch) {
    if (off > 0 && cancel && cancel->load(std::memory_order_relaxed)) {
      return Status(StatusCode::kCancelled, fmt::format("prefill cancelled after {} of {} tokens", off, n));
    }
    const int64_t m = std::min(opt_.n_batch, n - off);
    const bool last = off + m == n;
    float* out = all_logits ? all_logits + off * nv : (last ? seq.logits_.as<float>() : nullptr);
    if (Status st = forward_chunk(seq, tokens.data() + off, m, pos + off, out, all_logits != nullptr); !st.ok()) {
      // The chunk's K/V may be half written: keep only what completed.
      seq.table_.truncate(seq.n_past());
      return st;
    }
  }
  if (all_logits && backend_->host_visible()) {
    LAYA_TRY(backend_->copy(seq.logits_.data(), all_logits + (n - 1) * nv, static_cast<size_t>(nv) * sizeof(float)));
  } else if (all_logits) {
    // The host already holds the last row: no device round trip.
    std::memcpy(seq.logits_copy_.data(), all_logits + (n - 1) * nv, static_cast<size_t>(nv) * sizeof(float));
    LAYA_TRY(backend_->upload(seq.logits_.data(), all_logits + (n - 1) * nv, static_cast<size_t>(nv) * sizeof(float)));
  } else if (!backend_->host_visible()) {
    LAYA_TRY(backend_->download(seq.logits_copy_.data(), seq.logits_.data(), static_cast<size_t>(nv) * sizeof(float)));
  }
  return Status::Ok();
}

Status Engine::decode(Sequence& seq, int32_t token) {
  return prefill(seq, std::span<const int32_t>(&token, 1), seq.n_past(), nullptr);
}

}  // namespace laya
