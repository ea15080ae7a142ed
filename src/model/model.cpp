// Model loading: GGUF metadata → HParams, tensor views, shape validation.
// (Hugging Face folders: load_hf.cpp.)
#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <unordered_set>

#include <fmt/format.h>

#include "core/fp16.h"
#include "core/shown.h"
#include "format/gguf.h"
#include "format/safetensors.h"

namespace laya {

std::vector<float> llama3_rope_factors(int64_t head_dim, double theta, double factor, double low_freq_factor,
                                       double high_freq_factor, double original_ctx) {
  const double low_wavelen = original_ctx / low_freq_factor;
  const double high_wavelen = original_ctx / high_freq_factor;
  std::vector<float> out(static_cast<size_t>(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const double inv_freq = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(head_dim));
    const double wavelen = 2.0 * M_PI / inv_freq;
    double scaled;
    if (wavelen < high_wavelen) {
      scaled = inv_freq;
    } else if (wavelen > low_wavelen) {
      scaled = inv_freq / factor;
    } else {
      const double smooth = (original_ctx / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      scaled = (1.0 - smooth) * inv_freq / factor + smooth * inv_freq;
    }
    out[static_cast<size_t>(i)] = static_cast<float>(inv_freq / scaled);
  }
  return out;
}

Model::~Model() = default;

uint64_t Model::n_params() const {
  uint64_t n = 0;
  for (const auto& t : all_) n += static_cast<uint64_t>(t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]);
  return n;
}

uint64_t Model::weight_bytes() const {
  uint64_t n = 0;
  for (const auto& t : all_) n += t.total_bytes();
  return n;
}

Status Model::check_files_unchanged() const {
  if (gguf_) LAYA_TRY(gguf_->mapping().check_unchanged());
  for (const auto& sh : shards_) LAYA_TRY(sh->mapping().check_unchanged());
  return Status::Ok();
}

Result<std::unique_ptr<Model>> Model::load(const std::string& path) {
  namespace fs = std::filesystem;
  std::unique_ptr<Model> m(new Model());
  m->path_ = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (!fs::exists(fs::path(path) / "config.json", ec)) {
      return Status(StatusCode::kNotFound, fmt::format("{}: a folder without config.json (expected a .gguf file or a "
                                                       "Hugging Face folder with config.json + safetensors)", path));
    }
    m->format_ = ModelFormat::kHfFolder;
    LAYA_TRY(m->load_hf(path));
  } else if (fs::exists(path, ec)) {
    m->format_ = ModelFormat::kGguf;
    LAYA_TRY(m->load_gguf(path));
  } else {
    return Status(StatusCode::kNotFound,
                  fmt::format("{}: no such file or folder (expected a .gguf file or a Hugging Face folder with "
                              "config.json + safetensors)", path));
  }
  // Every value the forward pass reads is checked before anything is derived
  // from it, and against the tensors before the layers are bound.
  LAYA_TRY(validate_hparams(m->hp_, m->meta_, m->keys_));
  rope_factors_from_metadata(m->meta_.rope, m->keys_, &m->hp_);
  LAYA_TRY(m->bind_weights());
  return m;
}

namespace {

// Granite's multipliers: <arch>.embedding_scale, .residual_scale,
// .logit_scale, .attention.scale (llama.cpp's keys), each optional. Checked
// here: a zero, negative or non-finite multiplier makes every logit wrong.
Status read_gguf_family_params(const gguf::File& f, const std::string& p, HParams* h) {
  struct Key { const char* suffix; float* out; };
  const Key keys[] = {{"embedding_scale", &h->embd_scale}, {"residual_scale", &h->residual_scale},
                      {"logit_scale", &h->logit_scale}, {"attention.scale", &h->attn_scale}};
  for (const Key& k : keys) {
    if (!f.find(p + k.suffix)) continue;
    LAYA_ASSIGN_OR_RETURN(double v, f.get_float(p + k.suffix));
    if (!(std::isfinite(v) && v > 0 && v < 1e6)) {
      return Status(StatusCode::kCorrupt, fmt::format("{}: {}{} = {:g}, expected a finite positive multiplier",
                                                      f.path(), p, k.suffix, v));
    }
    *k.out = static_cast<float>(v);
  }
  return Status::Ok();
}

// Which layers slide: <arch>.attention.sliding_window_pattern, a period (as
// llama.cpp reads it: layer i slides unless i % p == p - 1) or one flag per
// layer; else the family's period.
Status read_gguf_swa_layers(const gguf::File& f, const std::string& p, const ArchSpec& arch, HParams* h) {
  int64_t period = arch.attn.swa_period;
  const std::string key = p + "attention.sliding_window_pattern";
  if (const gguf::Value* v = f.find(key); v && v->type == gguf::ValueType::kArray) {
    LAYA_ASSIGN_OR_RETURN(const gguf::Value* a, f.get_numeric_array(key));
    if (static_cast<int64_t>(a->count) != h->n_layer) {
      return Status(StatusCode::kCorrupt, fmt::format("{}: {} has {} entries for {} layers", f.path(), key, a->count,
                                                      h->n_layer));
    }
    for (uint64_t i = 0; i < a->count; ++i) h->swa_layers.push_back(a->array_i64(i) != 0);
    return Status::Ok();
  } else if (v) {
    LAYA_ASSIGN_OR_RETURN(period, f.get_int(key));
    if (period < 0 || period > (int64_t{1} << 31)) {
      return Status(StatusCode::kCorrupt, fmt::format("{}: {} = {}, expected a layer period", f.path(), key, period));
    }
  }
  if (period > 0) {
    for (int64_t i = 0; i < h->n_layer; ++i) h->swa_layers.push_back((i + 1) % period != 0);
  }
  return Status::Ok();
}

// How the layers attend, beyond the Llama block: <arch>.attention.sliding_window
// and which layers it applies to, the sliding layers' RoPE base
// (rope.freq_base_swa), soft-capping (attn_logit_softcapping,
// final_logit_softcapping); the family's defaults (ArchSpec::attn) where the
// file is silent, as llama.cpp reads these files.
Status read_gguf_attention(const gguf::File& f, const std::string& p, const ArchSpec& arch, HParams* h) {
  const AttentionDefaults& ad = arch.attn;
  h->sliding_window = ad.gguf_window;
  if (f.find(p + "attention.sliding_window")) {
    LAYA_ASSIGN_OR_RETURN(h->sliding_window, f.get_int(p + "attention.sliding_window"));
    if (h->sliding_window < 0) h->sliding_window = 0;
  }
  if (h->sliding_window > 0) {
    LAYA_TRY(read_gguf_swa_layers(f, p, arch, h));
    h->rope_theta_local = ad.swa_rope_base;
    if (f.find(p + "rope.freq_base_swa")) {
      LAYA_ASSIGN_OR_RETURN(h->rope_theta_local, f.get_float(p + "rope.freq_base_swa"));
    }
  }
  h->attn_softcap = ad.gguf_attn_softcap;
  h->final_softcap = ad.gguf_final_softcap;
  for (auto [suffix, out] : {std::pair{"attn_logit_softcapping", &h->attn_softcap},
                             std::pair{"final_logit_softcapping", &h->final_softcap}}) {
    if (!f.find(p + suffix)) continue;
    LAYA_ASSIGN_OR_RETURN(double v, f.get_float(p + suffix));
    *out = static_cast<float>(v);  // range-checked by validate_hparams
  }
  // No query_pre_attn_scalar in GGUF: head_dim^-0.5, or (n_embd / n_head)^-0.5
  // for the family's 27B model.
  if (h->attn_scale == 0 && ad.gguf_wide_scale_layers > 0 && h->n_layer == ad.gguf_wide_scale_layers) {
    h->attn_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(h->n_embd / h->n_head)));
  }
  return Status::Ok();
}

}  // namespace

Status Model::load_gguf(const std::string& path) {
  LAYA_ASSIGN_OR_RETURN(gguf_, gguf::File::open(path));
  const gguf::File& f = *gguf_;
  LAYA_ASSIGN_OR_RETURN(std::string arch, f.get_string("general.architecture"));
  arch_ = find_arch_by_gguf_name(arch);
  if (arch == "clip") {  // llama.cpp's mmproj files: a vision tower (Gemma 3's SigLIP, LLaVA's ...) and its projector
    return Status(StatusCode::kUnsupported, fmt::format("{}: general.architecture = \"clip\": a vision tower and "
                                                        "projector (mmproj) file, not a language model; laya runs "
                                                        "text models only: load the model's own GGUF", path));
  }
  if (!arch_) {
    return Status(StatusCode::kUnsupported, fmt::format("{}: general.architecture = {} is not supported (supported: {})",
                                                        path, shown(arch), supported_arch_list()));
  }
  hp_.arch = arch;
  keys_ = MetaKeys::for_gguf(path, arch);
  const std::string p = arch + ".";
  if (arch_->layer_norm) keys_.rms_eps = p + "attention.layer_norm_epsilon";
  auto req_int = [&](const std::string& key, int64_t* out) -> Status {
    auto r = f.get_int(key);
    if (!r.ok()) return r.status();
    if (*r <= 0 || *r > (int64_t{1} << 31)) {
      return Status(StatusCode::kCorrupt, fmt::format("{}: {} = {}, expected a positive count", path, key, *r));
    }
    *out = *r;
    return Status::Ok();
  };
  auto opt_int = [&](const std::string& key, int64_t* out) -> Status {
    return f.find(key) ? req_int(key, out) : Status::Ok();
  };
  LAYA_TRY(req_int(keys_.n_embd, &hp_.n_embd));
  LAYA_TRY(req_int(keys_.n_layer, &hp_.n_layer));
  LAYA_TRY(req_int(keys_.n_head, &hp_.n_head));
  LAYA_TRY(req_int(keys_.n_ff, &hp_.n_ff));
  LAYA_TRY(req_int(keys_.n_ctx, &hp_.n_ctx_train));
  hp_.n_head_kv = hp_.n_head;
  LAYA_TRY(opt_int(keys_.n_head_kv, &hp_.n_head_kv));
  hp_.head_dim = hp_.n_embd / hp_.n_head;
  meta_.head_dim_given = f.find(keys_.head_dim) != nullptr;
  LAYA_TRY(opt_int(keys_.head_dim, &hp_.head_dim));
  LAYA_TRY(opt_int(keys_.n_rot, &meta_.n_rot));
  LAYA_TRY(opt_int(keys_.value_dim, &meta_.value_dim));
  LAYA_TRY(opt_int(keys_.n_vocab, &meta_.n_vocab));
  LAYA_ASSIGN_OR_RETURN(meta_.rms_eps, f.get_float(keys_.rms_eps));
  hp_.rms_eps = static_cast<float>(meta_.rms_eps);
  if (f.find(keys_.rope_theta)) {
    LAYA_ASSIGN_OR_RETURN(hp_.rope_theta, f.get_float(keys_.rope_theta));
  }
  if (f.find(p + "rope.scaling.type")) {
    LAYA_ASSIGN_OR_RETURN(std::string type, f.get_string(p + "rope.scaling.type"));
    if (type == "linear") {
      LAYA_ASSIGN_OR_RETURN(meta_.rope.factor, f.get_float(keys_.rope_factor));
    } else if (type != "none" && type != "llama3") {
      return Status(StatusCode::kUnsupported, fmt::format("{}: {}rope.scaling.type = {} is not supported (none, linear, "
                                                          "llama3 via rope_freqs.weight)", path, p, shown(type)));
    }
    meta_.rope.type = type;
  }
  LAYA_TRY(read_gguf_family_params(f, p, &hp_));
  LAYA_TRY(read_gguf_attention(f, p, *arch_, &hp_));
  if (const gguf::Value* toks = f.find("tokenizer.ggml.tokens"); toks && toks->type == gguf::ValueType::kArray) {
    meta_.n_tokens = static_cast<int64_t>(toks->count);
  }
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"}) {
    if (!f.find(key)) continue;
    LAYA_ASSIGN_OR_RETURN(int64_t id, f.get_int(key));
    (key == keys_.bos ? meta_.bos_id : meta_.eos_id) = id;
  }
  hp_.rope_layout = arch_->gguf_rope_interleaved ? RopeLayout::kInterleaved : RopeLayout::kHalves;

  for (const auto& ti : f.tensors()) {
    Tensor t;
    t.name = ti.name;
    t.type = ti.type;
    t.n_dims = ti.n_dims;
    for (int d = 0; d < 4; ++d) t.ne[d] = ti.ne[d];
    t.data = ti.data;
    t.nbytes = ti.nbytes;
    all_.push_back(std::move(t));
  }
  return Status::Ok();
}

Status Model::check_tokenizer_size(int64_t n_tokens, const std::string& tokenizer) const {
  return validate_tokenizer_size(hp_, keys_, n_tokens, tokenizer);
}

namespace {

const Tensor* find(const std::vector<Tensor>& all, const std::string& name) {
  for (const auto& t : all)
    if (t.name == name) return &t;
  return nullptr;
}

// The model-wide or the per-layer entries of a table in the order the loader
// checks them: those every model has first, then the conditional ones, so an
// error names a core tensor before an architecture's extra.
std::vector<const TensorSpec*> loader_order(std::span<const TensorSpec> specs, bool per_layer) {
  std::vector<const TensorSpec*> out;
  for (bool always : {true, false})
    for (const TensorSpec& s : specs)
      if (s.per_layer() == per_layer && (s.when == When::kAlways) == always) out.push_back(&s);
  return out;
}

}  // namespace

Status Model::bind_tensor(const TensorSpec& spec, int64_t layer, Tensor* out) const {
  const std::string name = spec.gguf_name(layer);
  const Tensor* t = find(all_, name);
  if (!t) {
    if (!spec.expected(flags_)) return Status::Ok();
    return Status(StatusCode::kNotFound, fmt::format("{}: tensor '{}' is missing (architecture {})", path_, name, hp_.arch));
  }
  int64_t want[4] = {1, 1, 1, 1};  // [4]: gcc's -Warray-bounds cannot see that d < n_dims <= 2
  for (int d = 0; d < spec.n_dims; ++d) want[d] = dim_value(spec.shape[d], hp_);
  bool ok = t->n_dims >= spec.n_dims;
  for (int d = 0; d < 4; ++d) {
    if (t->ne[d] != (d < spec.n_dims ? want[d] : 1)) ok = false;
  }
  if (!ok) {
    std::string ws = "[";
    for (int d = 0; d < spec.n_dims; ++d) ws += (d ? ", " : "") + std::to_string(want[d]);
    ws += "]";
    return Status(StatusCode::kCorrupt, fmt::format("{}: tensor '{}': shape {}, expected {} ({})", path_, name,
                                                    t->shape_string(), ws, spec.hint));
  }
  if (!dtype_info(t->type).supported) {
    return Status(StatusCode::kUnsupported, fmt::format("{}: tensor '{}': type {} is not supported (supported: F32, F16, "
                                                        "BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)",
                                                        path_, name, dtype_name(t->type)));
  }
  *out = *t;
  return Status::Ok();
}

Status Model::set_rope_factors(const Tensor& rf) {
  if (rf.type != DType::F32) {
    return Status(StatusCode::kUnsupported, fmt::format("{}: rope_freqs.weight has type {}, expected F32", path_,
                                                        dtype_name(rf.type)));
  }
  hp_.rope_freq_factors.resize(static_cast<size_t>(hp_.head_dim / 2));
  std::memcpy(hp_.rope_freq_factors.data(), rf.data, rf.nbytes);
  return Status::Ok();
}

// 1 + the largest layer index in any tensor name ("blk.7.attn_q.weight"; HF
// names were mapped to these), and whether rope_freqs.weight is there.
TensorFacts Model::tensor_facts() const {
  TensorFacts t;
  t.embedding_rows = hp_.n_vocab;
  for (const Tensor& x : all_) {
    if (x.name.compare(0, 4, "blk.") != 0) continue;
    int64_t layer = 0;
    size_t i = 4;
    for (; i < x.name.size() && i < 14 && x.name[i] >= '0' && x.name[i] <= '9'; ++i) {
      layer = layer * 10 + (x.name[i] - '0');  // at most 10 digits: no overflow
    }
    if (i > 4 && i < x.name.size() && x.name[i] == '.') t.n_layer_in_file = std::max(t.n_layer_in_file, layer + 1);
  }
  const std::vector<const TensorSpec*> layer_specs = loader_order(arch_->tensors(), true);
  if (!layer_specs.empty()) t.next_layer_tensor = layer_specs[0]->gguf_name(t.n_layer_in_file);
  for (const TensorSpec& s : arch_->tensors())
    if (s.role == TensorRole::kRopeFreqs && find(all_, s.gguf)) t.rope_freqs_tensor = true;
  return t;
}

namespace {

// Rows [first, first + n) of a bound matrix, as a tensor of its own (the
// bytes stay in the mapping; rows are whole blocks of any type).
Tensor row_view(const Tensor& t, int64_t first, int64_t n, const char* part) {
  Tensor v = t;
  v.name = t.name + "[" + part + "]";
  v.n_dims = 2;
  v.ne[1] = n;
  v.ne[2] = v.ne[3] = 1;
  v.data = t.row(first);
  v.nbytes = static_cast<size_t>(n) * t.row_stride();
  return v;
}

}  // namespace

// A fused q/k/v holds q's rows, then k's, then v's (Phi3Attention's split);
// a fused gate/up holds the gate's rows, then up's (Phi3MLP's chunk(2)).
// Their shapes were checked when bound.
void Model::split_fused(const HParams& h, LayerWeights* L) {
  if (L->wqkv.present()) {
    L->wq = row_view(L->wqkv, 0, h.q_dim(), "q");
    L->wk = row_view(L->wqkv, h.q_dim(), h.kv_dim(), "k");
    L->wv = row_view(L->wqkv, h.q_dim() + h.kv_dim(), h.kv_dim(), "v");
  }
  if (L->w_gate_up.present()) {
    L->w_gate = row_view(L->w_gate_up, 0, h.n_ff, "gate");
    L->w_up = row_view(L->w_gate_up, h.n_ff, h.n_ff, "up");
  }
}

Status Model::bind_weights() {
  const std::span<const TensorSpec> specs = arch_->tensors();
  // The vocabulary size is the embedding's row count.
  const Tensor* emb = nullptr;
  for (const TensorSpec& s : specs)
    if (s.role == TensorRole::kEmbedding) emb = find(all_, s.gguf);
  if (!emb) return Status(StatusCode::kNotFound, fmt::format("{}: tensor '{}' is missing", path_, keys_.embedding));
  hp_.n_vocab = emb->ne[1];
  w_.arch = arch_;
  // Which optional tensors this model has, decided once: the architecture's
  // flags, or the file having layer 0's tensor of a group (e.g. a Llama file
  // with q/k/v biases). Every layer must then have them, and the forward
  // pass reads the same flags.
  flags_ = arch_->flags();
  for (const TensorSpec& sp : specs) {
    if (!sp.per_layer() || !find(all_, sp.gguf_name(0))) continue;
    if (sp.when == When::kQkvBias) flags_.qkv_bias = true;
    if (sp.when == When::kQkNorm) flags_.qk_norm = true;
  }
  for (const TensorSpec* s : loader_order(specs, false)) {
    Tensor t;
    LAYA_TRY(bind_tensor(*s, 0, &t));
    if (s->role == TensorRole::kRopeFreqs && t.present()) LAYA_TRY(set_rope_factors(t));
    if (s->model_field) w_.*(s->model_field) = std::move(t);
  }
  // The metadata against the tensors, before the layers are allocated.
  LAYA_TRY(validate_with_tensors(hp_, meta_, keys_, tensor_facts()));
  hp_.bos_id = static_cast<int32_t>(meta_.bos_id);
  hp_.eos_id = static_cast<int32_t>(meta_.eos_id);
  hp_.tied_embeddings = !w_.output.present();
  flags_.untied_output = !hp_.tied_embeddings;
  flags_.rope_freqs = !hp_.rope_freq_factors.empty();
  if (hp_.tied_embeddings) w_.output = w_.tok_embd;
  const std::vector<const TensorSpec*> layer_specs = loader_order(specs, true);
  w_.layers.resize(static_cast<size_t>(hp_.n_layer));
  for (int64_t il = 0; il < hp_.n_layer; ++il) {
    LayerWeights& L = w_.layers[static_cast<size_t>(il)];
    for (const TensorSpec* s : layer_specs)
      if (s->when != When::kSplit) LAYA_TRY(bind_tensor(*s, il, &(L.*(s->layer_field))));
    split_fused(hp_, &L);
  }
  return convert_vectors_to_f32();
}

// Small vectors (norms, biases) are converted to float32 once; they are
// < 0.1% of the weights. Matrices stay in the mapping.
Status Model::convert_vectors_to_f32() {
  const std::span<const TensorSpec> specs = arch_->tensors();
  auto is_vector = [](const TensorSpec& s) { return s.role == TensorRole::kNorm || s.role == TensorRole::kBias; };
  for (const TensorSpec* s : loader_order(specs, false))
    if (is_vector(*s) && s->model_field) LAYA_TRY(vector_to_f32(w_.*(s->model_field)));
  const std::vector<const TensorSpec*> layer_specs = loader_order(specs, true);
  for (auto& L : w_.layers)
    for (const TensorSpec* s : layer_specs)
      if (is_vector(*s)) LAYA_TRY(vector_to_f32(L.*(s->layer_field)));
  if (format_ != ModelFormat::kHfFolder || arch_->hf_norm_shift == 0.0f) return Status::Ok();
  for (const TensorSpec* s : loader_order(specs, false))
    if (s->role == TensorRole::kNorm && s->model_field) shift_vector(w_.*(s->model_field), arch_->hf_norm_shift);
  for (auto& L : w_.layers)
    for (const TensorSpec* s : layer_specs)
      if (s->role == TensorRole::kNorm) shift_vector(L.*(s->layer_field), arch_->hf_norm_shift);
  return Status::Ok();
}

void Model::shift_vector(Tensor& t, float shift) {
  if (!t.present()) return;
  const int64_t n = t.ne[0];
  auto& buf = owned_f32_.emplace_back(static_cast<size_t>(n));
  std::memcpy(buf.data(), t.data, static_cast<size_t>(n) * 4);
  for (float& v : buf) v += shift;
  t.data = reinterpret_cast<const uint8_t*>(buf.data());
}

// F16/BF16 vectors (HF bf16 checkpoints) into owned float32 buffers.
Status Model::vector_to_f32(Tensor& t) {
  if (!t.present() || t.type == DType::F32) return Status::Ok();
  if (t.type != DType::F16 && t.type != DType::BF16) {
    return Status(StatusCode::kUnsupported, fmt::format("{}: tensor '{}' is {}; norms and biases must be F32, F16 or BF16",
                                                        path_, t.name, dtype_name(t.type)));
  }
  const int64_t n = t.ne[0];
  auto& buf = owned_f32_.emplace_back(static_cast<size_t>(n));
  const uint16_t* src = reinterpret_cast<const uint16_t*>(t.data);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t v;
    std::memcpy(&v, src + i, 2);
    buf[static_cast<size_t>(i)] = t.type == DType::F16 ? fp16_to_f32(v) : bf16_to_f32(v);
  }
  t.type = DType::F32;
  t.data = reinterpret_cast<const uint8_t*>(buf.data());
  t.nbytes = static_cast<size_t>(n) * 4;
  return Status::Ok();
}

// ---- the table-driven views of the weights -----------------------------------------

void ModelWeights::for_each(const std::function<void(const TensorSpec&, const Tensor&)>& fn) const {
  if (!arch) return;
  const std::span<const TensorSpec> specs = arch->tensors();
  for (const TensorSpec& s : specs)
    if (!s.per_layer() && s.model_field && (this->*(s.model_field)).present()) fn(s, this->*(s.model_field));
  for (const LayerWeights& L : layers)
    for (const TensorSpec& s : specs)
      if (s.per_layer() && (L.*(s.layer_field)).present()) fn(s, L.*(s.layer_field));
}

namespace {

std::vector<const Tensor*> unique_by_data(const ModelWeights& w, bool matrices_only) {
  std::vector<const Tensor*> out;
  std::unordered_set<const uint8_t*> seen;
  w.for_each([&](const TensorSpec& s, const Tensor& t) {
    if (matrices_only && s.role != TensorRole::kMatrix) return;
    if (s.role == TensorRole::kFused) return;  // its views are the matrices (and hold its bytes)
    if (seen.insert(t.data).second) out.push_back(&t);
  });
  return out;
}

}  // namespace

std::vector<const Tensor*> ModelWeights::matrices() const { return unique_by_data(*this, true); }
std::vector<const Tensor*> ModelWeights::all() const { return unique_by_data(*this, false); }

}  // namespace laya
