// Model loading: GGUF metadata → HParams, tensor views, shape validation.
// (Hugging Face folders: load_hf.cpp.)
#include "model/model.h"

#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/fp16.h"
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
  for (const auto& t : all_) n += t.nbytes;
  return n;
}

Result<std::unique_ptr<Model>> Model::load(const std::string& path) {
  namespace fs = std::filesystem;
  std::unique_ptr<Model> m(new Model());
  m->path_ = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    m->format_ = ModelFormat::kHfFolder;
    LAYA_TRY(m->load_hf(path));
  } else if (fs::exists(path, ec)) {
    m->format_ = ModelFormat::kGguf;
    LAYA_TRY(m->load_gguf(path));
  } else {
    return Status(StatusCode::kNotFound,
                  strformat("%s: no such file or folder (expected a .gguf file or a Hugging Face folder with "
                            "config.json + safetensors)", path.c_str()));
  }
  LAYA_TRY(m->bind_weights());
  return m;
}

Status Model::load_gguf(const std::string& path) {
  LAYA_ASSIGN_OR_RETURN(gguf_, gguf::File::open(path));
  const gguf::File& f = *gguf_;
  LAYA_ASSIGN_OR_RETURN(std::string arch, f.get_string("general.architecture"));
  arch_ = find_arch_by_gguf_name(arch);
  if (!arch_) {
    return Status(StatusCode::kUnsupported, strformat("%s: general.architecture = '%s' is not supported (supported: %s)",
                                                      path.c_str(), arch.c_str(), supported_arch_list()));
  }
  hp_.arch = arch;
  const std::string p = arch + ".";
  auto req_int = [&](const char* key, int64_t* out) -> Status {
    auto r = f.get_int(p + key);
    if (!r.ok()) return r.status();
    if (*r <= 0 || *r > (int64_t{1} << 31)) {
      return Status(StatusCode::kCorrupt, strformat("%s: %s%s = %lld, expected a positive count", path.c_str(), p.c_str(),
                                                    key, static_cast<long long>(*r)));
    }
    *out = *r;
    return Status::Ok();
  };
  LAYA_TRY(req_int("embedding_length", &hp_.n_embd));
  LAYA_TRY(req_int("block_count", &hp_.n_layer));
  LAYA_TRY(req_int("attention.head_count", &hp_.n_head));
  LAYA_TRY(req_int("feed_forward_length", &hp_.n_ff));
  LAYA_TRY(req_int("context_length", &hp_.n_ctx_train));
  hp_.n_head_kv = hp_.n_head;
  if (f.find(p + "attention.head_count_kv")) LAYA_TRY(req_int("attention.head_count_kv", &hp_.n_head_kv));
  hp_.head_dim = hp_.n_embd / hp_.n_head;
  if (f.find(p + "attention.key_length")) LAYA_TRY(req_int("attention.key_length", &hp_.head_dim));
  LAYA_ASSIGN_OR_RETURN(double eps, f.get_float(p + "attention.layer_norm_rms_epsilon"));
  hp_.rms_eps = static_cast<float>(eps);
  if (f.find(p + "rope.freq_base")) {
    LAYA_ASSIGN_OR_RETURN(hp_.rope_theta, f.get_float(p + "rope.freq_base"));
  }
  if (const gguf::Value* st = f.find(p + "rope.scaling.type"); st && st->type == gguf::ValueType::kString) {
    if (st->str == "linear") {
      LAYA_ASSIGN_OR_RETURN(double factor, f.get_float(p + "rope.scaling.factor"));
      hp_.rope_freq_factors.assign(static_cast<size_t>(hp_.head_dim / 2), static_cast<float>(factor));
    } else if (st->str != "none") {
      return Status(StatusCode::kUnsupported, strformat("%s: %srope.scaling.type = '%.*s' is not supported (none, linear, "
                                                        "llama3 via rope_freqs.weight)", path.c_str(), p.c_str(),
                                                        static_cast<int>(st->str.size()), st->str.data()));
    }
  }
  if (auto r = f.get_int("tokenizer.ggml.bos_token_id"); r.ok()) hp_.bos_id = static_cast<int32_t>(*r);
  if (auto r = f.get_int("tokenizer.ggml.eos_token_id"); r.ok()) hp_.eos_id = static_cast<int32_t>(*r);
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

namespace {

const Tensor* find(const std::vector<Tensor>& all, const std::string& name) {
  for (const auto& t : all)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace

Status Model::bind_weights() {
  const std::string& file = path_;
  // Small vectors (norms, biases, rope factors) are converted to float32 once;
  // they are < 0.1% of the weights. Matrices stay in the mapping.
  auto get = [&](const std::string& name, Tensor* out, std::initializer_list<int64_t> shape, bool required,
                 const char* hint) -> Status {
    const Tensor* t = find(all_, name);
    if (!t) {
      if (!required) return Status::Ok();
      return Status(StatusCode::kNotFound, strformat("%s: tensor '%s' is missing (architecture %s)", file.c_str(),
                                                     name.c_str(), hp_.arch.c_str()));
    }
    std::vector<int64_t> want(shape);
    bool ok = t->n_dims == static_cast<int>(want.size()) || (t->n_dims > static_cast<int>(want.size()));
    for (size_t d = 0; d < 4; ++d) {
      int64_t w = d < want.size() ? want[d] : 1;
      if (t->ne[d] != w) ok = false;
    }
    if (!ok) {
      std::string ws = "[";
      for (size_t d = 0; d < want.size(); ++d) ws += (d ? ", " : "") + std::to_string(want[d]);
      ws += "]";
      return Status(StatusCode::kCorrupt, strformat("%s: tensor '%s': shape %s, expected %s (%s)", file.c_str(), name.c_str(),
                                                    t->shape_string().c_str(), ws.c_str(), hint));
    }
    if (!dtype_info(t->type).supported) {
      return Status(StatusCode::kUnsupported, strformat("%s: tensor '%s': type %s is not supported (supported: F32, F16, "
                                                        "BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)",
                                                        file.c_str(), name.c_str(), dtype_name(t->type)));
    }
    *out = *t;
    return Status::Ok();
  };
  const HParams& h = hp_;
  if (h.head_dim <= 0 || h.head_dim % 2 != 0 || h.n_head % h.n_head_kv != 0) {
    return Status(StatusCode::kCorrupt, strformat("%s: head_dim %lld must be even and n_head %lld a multiple of n_head_kv %lld",
                                                  file.c_str(), static_cast<long long>(h.head_dim),
                                                  static_cast<long long>(h.n_head), static_cast<long long>(h.n_head_kv)));
  }
  const Tensor* emb = find(all_, "token_embd.weight");
  if (!emb) return Status(StatusCode::kNotFound, strformat("%s: tensor 'token_embd.weight' is missing", file.c_str()));
  hp_.n_vocab = emb->ne[1];
  LAYA_TRY(get("token_embd.weight", &w_.tok_embd, {h.n_embd, h.n_vocab}, true, "n_embd mismatch?"));
  LAYA_TRY(get("output_norm.weight", &w_.output_norm, {h.n_embd}, true, "n_embd mismatch?"));
  LAYA_TRY(get("output.weight", &w_.output, {h.n_embd, h.n_vocab}, false, "vocab or n_embd mismatch?"));
  hp_.tied_embeddings = !w_.output.present();
  if (hp_.tied_embeddings) w_.output = w_.tok_embd;
  if (Tensor rf; find(all_, "rope_freqs.weight")) {
    LAYA_TRY(get("rope_freqs.weight", &rf, {h.head_dim / 2}, true, "head_dim mismatch?"));
    if (rf.type != DType::F32) {
      return Status(StatusCode::kUnsupported, strformat("%s: rope_freqs.weight has type %s, expected F32", file.c_str(),
                                                        dtype_name(rf.type)));
    }
    hp_.rope_freq_factors.resize(static_cast<size_t>(h.head_dim / 2));
    std::memcpy(hp_.rope_freq_factors.data(), rf.data, rf.nbytes);
  }
  w_.layers.resize(static_cast<size_t>(h.n_layer));
  for (int64_t il = 0; il < h.n_layer; ++il) {
    LayerWeights& L = w_.layers[static_cast<size_t>(il)];
    const std::string b = "blk." + std::to_string(il) + ".";
    LAYA_TRY(get(b + "attn_norm.weight", &L.attn_norm, {h.n_embd}, true, "n_embd mismatch?"));
    LAYA_TRY(get(b + "attn_q.weight", &L.wq, {h.n_embd, h.q_dim()}, true, "n_head or head_dim mismatch?"));
    LAYA_TRY(get(b + "attn_k.weight", &L.wk, {h.n_embd, h.kv_dim()}, true, "n_head_kv mismatch?"));
    LAYA_TRY(get(b + "attn_v.weight", &L.wv, {h.n_embd, h.kv_dim()}, true, "n_head_kv mismatch?"));
    LAYA_TRY(get(b + "attn_output.weight", &L.wo, {h.q_dim(), h.n_embd}, true, "n_head or head_dim mismatch?"));
    LAYA_TRY(get(b + "ffn_norm.weight", &L.ffn_norm, {h.n_embd}, true, "n_embd mismatch?"));
    LAYA_TRY(get(b + "ffn_gate.weight", &L.w_gate, {h.n_embd, h.n_ff}, true, "n_ff mismatch?"));
    LAYA_TRY(get(b + "ffn_up.weight", &L.w_up, {h.n_embd, h.n_ff}, true, "n_ff mismatch?"));
    LAYA_TRY(get(b + "ffn_down.weight", &L.w_down, {h.n_ff, h.n_embd}, true, "n_ff mismatch?"));
    LAYA_TRY(get(b + "attn_q.bias", &L.bq, {h.q_dim()}, arch_->qkv_bias, "n_head mismatch?"));
    LAYA_TRY(get(b + "attn_k.bias", &L.bk, {h.kv_dim()}, arch_->qkv_bias, "n_head_kv mismatch?"));
    LAYA_TRY(get(b + "attn_v.bias", &L.bv, {h.kv_dim()}, arch_->qkv_bias, "n_head_kv mismatch?"));
    LAYA_TRY(get(b + "attn_q_norm.weight", &L.q_norm, {h.head_dim}, arch_->qk_norm, "head_dim mismatch?"));
    LAYA_TRY(get(b + "attn_k_norm.weight", &L.k_norm, {h.head_dim}, arch_->qk_norm, "head_dim mismatch?"));
  }
  // Vectors must be float32 for the kernels: convert F16/BF16 ones (HF bf16
  // checkpoints) into owned buffers.
  auto to_f32 = [&](Tensor& t) -> Status {
    if (!t.present() || t.type == DType::F32) return Status::Ok();
    if (t.type != DType::F16 && t.type != DType::BF16) {
      return Status(StatusCode::kUnsupported, strformat("%s: tensor '%s' is %s; norms and biases must be F32, F16 or BF16",
                                                        file.c_str(), t.name.c_str(), dtype_name(t.type)));
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
  };
  LAYA_TRY(to_f32(w_.output_norm));
  for (auto& L : w_.layers) {
    for (Tensor* t : {&L.attn_norm, &L.ffn_norm, &L.bq, &L.bk, &L.bv, &L.q_norm, &L.k_norm}) LAYA_TRY(to_f32(*t));
  }
  return Status::Ok();
}

}  // namespace laya
