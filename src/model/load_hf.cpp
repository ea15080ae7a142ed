// Hugging Face / MLX folder: config.json + model.safetensors (or shards listed
// in model.safetensors.index.json). Tensor names are mapped to GGUF names so
// the rest of the engine sees one naming scheme; HF's row-major [out, in]
// shapes are ggml's ne = [in, out], so the bytes are used as they are.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/io.h"
#include "core/json.h"
#include "core/shown.h"
#include "format/safetensors.h"
#include "model/model.h"

namespace laya {

namespace {

// "model.layers.3.self_attn.q_proj.weight" → "blk.3.attn_q.weight" by the
// architecture's table; "" if the table has no such tensor.
std::string hf_to_gguf_name(const ArchSpec& arch, const std::string& n) {
  for (const TensorSpec& s : arch.tensors()) {
    if (!s.hf) continue;
    const std::string_view hf = s.hf;
    const size_t at = hf.find("{}");
    if (at == std::string_view::npos) {
      if (n == hf) return s.gguf;
      continue;
    }
    // The layer index is whatever stands between the prefix and the next '.'.
    const std::string_view prefix = hf.substr(0, at), suffix = hf.substr(at + 2);
    if (n.compare(0, prefix.size(), prefix) != 0) continue;
    const size_t dot = n.find('.', prefix.size());
    if (dot == std::string::npos || std::string_view(n).substr(dot) != suffix) continue;
    std::string gg = s.gguf;
    gg.replace(gg.find("{}"), 2, n.substr(prefix.size(), dot - prefix.size()));
    return gg;
  }
  return "";
}

// A JSON value in a message: as written when short, cut (core/shown.h) when long.
std::string dumped(const nlohmann::json& j) {
  std::string s = j.dump();
  return s.size() <= 40 ? s : shown(s);
}

// Typed reads of config.json keys; errors name the file and the key.
struct ConfigReader {
  const std::string& path;

  Status int_field(const nlohmann::json& obj, const char* key, int64_t* out, bool required) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) {
      if (!required) return Status::Ok();
      return Status(StatusCode::kNotFound, fmt::format("{}: key \"{}\" is missing", path, key));
    }
    if (!it->is_number_integer() || it->get<int64_t>() <= 0 || it->get<int64_t>() > (int64_t{1} << 31)) {
      return Status(StatusCode::kCorrupt,
                    fmt::format("{}: key \"{}\" = {}, expected a positive integer", path, key, dumped(*it)));
    }
    *out = it->get<int64_t>();
    return Status::Ok();
  }

  Status num_field(const nlohmann::json& obj, const char* key, double* out, bool required) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) {
      if (!required) return Status::Ok();
      return Status(StatusCode::kNotFound, fmt::format("{}: key \"{}\" is missing", path, key));
    }
    if (!it->is_number()) {
      return Status(StatusCode::kCorrupt, fmt::format("{}: key \"{}\" = {}, expected a number", path, key, dumped(*it)));
    }
    *out = it->get<double>();
    return Status::Ok();
  }
};

Status read_hf_sizes(const ConfigReader& r, const nlohmann::json& cfg, const std::string& eps_key, HParams* hp,
                     DeclaredMeta* d) {
  LAYA_TRY(r.int_field(cfg, "hidden_size", &hp->n_embd, true));
  LAYA_TRY(r.int_field(cfg, "num_hidden_layers", &hp->n_layer, true));
  LAYA_TRY(r.int_field(cfg, "num_attention_heads", &hp->n_head, true));
  LAYA_TRY(r.int_field(cfg, "intermediate_size", &hp->n_ff, true));
  hp->n_head_kv = hp->n_head;
  LAYA_TRY(r.int_field(cfg, "num_key_value_heads", &hp->n_head_kv, false));
  hp->head_dim = hp->n_embd / hp->n_head;
  d->head_dim_given = cfg.contains("head_dim") && !cfg["head_dim"].is_null();
  LAYA_TRY(r.int_field(cfg, "head_dim", &hp->head_dim, false));
  hp->n_ctx_train = 2048;
  LAYA_TRY(r.int_field(cfg, "max_position_embeddings", &hp->n_ctx_train, false));
  LAYA_TRY(r.int_field(cfg, "vocab_size", &d->n_vocab, false));
  d->rms_eps = 1e-6;
  LAYA_TRY(r.num_field(cfg, eps_key.c_str(), &d->rms_eps, false));
  hp->rms_eps = static_cast<float>(d->rms_eps);
  LAYA_TRY(r.num_field(cfg, "partial_rotary_factor", &d->partial_rotary, false));
  return Status::Ok();
}

// transformers 4 writes rope_theta + rope_scaling; transformers 5 writes
// rope_parameters {rope_theta, rope_type, ...}. The parameters are read here,
// checked by validate_hparams and turned into divisors after it.
Status read_hf_rope(const ConfigReader& r, const nlohmann::json& cfg, HParams* hp, RopeScaling* out) {
  const nlohmann::json* rope = nullptr;
  if (auto it = cfg.find("rope_parameters"); it != cfg.end() && it->is_object()) rope = &*it;
  // transformers 5's per-layer-type form (Gemma 3): the global layers' here,
  // the sliding ones' by read_hf_attention.
  if (rope) {
    if (auto it = rope->find("full_attention"); it != rope->end() && it->is_object()) rope = &*it;
  }
  if (auto it = cfg.find("rope_scaling"); !rope && it != cfg.end() && it->is_object()) rope = &*it;
  hp->rope_theta = 10000.0;
  LAYA_TRY(r.num_field(cfg, "rope_theta", &hp->rope_theta, false));
  hp->rope_layout = RopeLayout::kHalves;
  if (!rope) return Status::Ok();
  LAYA_TRY(r.num_field(*rope, "rope_theta", &hp->rope_theta, false));
  std::string type = "default";
  if (auto t = rope->find("rope_type"); t != rope->end() && t->is_string()) type = t->get<std::string>();
  else if (auto t2 = rope->find("type"); t2 != rope->end() && t2->is_string()) type = t2->get<std::string>();
  if (type == "llama3") {
    LAYA_TRY(r.num_field(*rope, "factor", &out->factor, true));
    LAYA_TRY(r.num_field(*rope, "low_freq_factor", &out->low_freq_factor, true));
    LAYA_TRY(r.num_field(*rope, "high_freq_factor", &out->high_freq_factor, true));
    LAYA_TRY(r.num_field(*rope, "original_max_position_embeddings", &out->original_ctx, true));
  } else if (type == "linear") {
    LAYA_TRY(r.num_field(*rope, "factor", &out->factor, true));
  } else if (type != "default") {
    return Status(StatusCode::kUnsupported, fmt::format("{}: rope type {} is not supported (default, linear, llama3)",
                                                        r.path, shown(type)));
  }
  out->type = type == "default" ? "none" : type;
  return Status::Ok();
}

// bos_token_id / eos_token_id (the first of a list), range-checked against
// the embedding by validate_with_tensors.
Status read_hf_special_ids(const ConfigReader& r, const nlohmann::json& cfg, DeclaredMeta* d) {
  for (const char* key : {"bos_token_id", "eos_token_id"}) {
    auto it = cfg.find(key);
    if (it == cfg.end() || it->is_null()) continue;
    const nlohmann::json& v = it->is_array() && !it->empty() ? (*it)[0] : *it;
    if (!v.is_number_integer()) {
      return Status(StatusCode::kCorrupt, fmt::format("{}: key \"{}\" = {}, expected a token id (an integer)", r.path,
                                                      key, dumped(*it)));
    }
    (std::string_view(key) == "bos_token_id" ? d->bos_id : d->eos_id) = v.get<int64_t>();
  }
  return Status::Ok();
}

// Granite's multipliers (embedding_multiplier, residual_multiplier,
// logits_scaling, attention_multiplier), each optional and positive.
Status read_hf_family_params(const ConfigReader& r, const nlohmann::json& cfg, HParams* hp) {
  struct Key { const char* name; float* out; };
  const Key keys[] = {{"embedding_multiplier", &hp->embd_scale}, {"residual_multiplier", &hp->residual_scale},
                      {"logits_scaling", &hp->logit_scale}, {"attention_multiplier", &hp->attn_scale}};
  for (const Key& k : keys) {
    double v = 0;
    if (!cfg.contains(k.name) || cfg[k.name].is_null()) continue;
    LAYA_TRY(r.num_field(cfg, k.name, &v, true));
    if (!(std::isfinite(v) && v > 0 && v < 1e6)) {
      return Status(StatusCode::kCorrupt, fmt::format("{}: key \"{}\" = {:g}, expected a finite positive multiplier",
                                                      r.path, k.name, v));
    }
    *k.out = static_cast<float>(v);
  }
  return Status::Ok();
}

// Which layers slide: layer_types ("sliding_attention" / "full_attention",
// transformers' own list), else Qwen2's max_window_layers (the layers from
// it on), else a period: sliding_window_pattern or the family's (layer i
// slides unless (i + 1) % period == 0; 0: every layer).
Status read_hf_swa_layers(const ConfigReader& r, const nlohmann::json& cfg, const ArchSpec& arch, HParams* hp) {
  if (auto lt = cfg.find("layer_types"); lt != cfg.end() && lt->is_array()) {
    for (const nlohmann::json& t : *lt) {
      const std::string type = t.is_string() ? t.get<std::string>() : t.dump();
      if (type != "sliding_attention" && type != "full_attention") {
        return Status(StatusCode::kUnsupported, fmt::format("{}: layer_types holds {}: laya runs sliding_attention and "
                                                            "full_attention layers only", r.path, shown(type)));
      }
      hp->swa_layers.push_back(type == "sliding_attention");
    }
    return Status::Ok();  // its length is checked against the layer count by validate_hparams
  }
  int64_t period = arch.attn.swa_period;
  if (auto u = cfg.find("use_sliding_window"); u != cfg.end() && u->is_boolean() && cfg.contains("max_window_layers")) {
    int64_t from = 0;
    LAYA_TRY(r.int_field(cfg, "max_window_layers", &from, true));
    for (int64_t i = 0; i < hp->n_layer; ++i) hp->swa_layers.push_back(i >= from);
    return Status::Ok();
  }
  if (cfg.contains("sliding_window_pattern") && !cfg["sliding_window_pattern"].is_null()) {
    LAYA_TRY(r.int_field(cfg, "sliding_window_pattern", &period, true));
  }
  if (period > 0) {
    for (int64_t i = 0; i < hp->n_layer; ++i) hp->swa_layers.push_back((i + 1) % period != 0);
  }
  return Status::Ok();
}

// How the layers attend, beyond the Llama block: query_pre_attn_scalar
// (queries scaled by its -0.5th power), attn_logit_softcapping and
// final_logit_softcapping (null: none), the sliding window (null or 0: none;
// off where use_sliding_window says so, as in Qwen2's configs) and its
// layers, and the sliding layers' RoPE base (rope_local_base_freq, or
// transformers 5's rope_parameters.sliding_attention).
Status read_hf_attention(const ConfigReader& r, const nlohmann::json& cfg, const ArchSpec& arch, HParams* hp) {
  if (cfg.contains("query_pre_attn_scalar") && !cfg["query_pre_attn_scalar"].is_null()) {
    double v = 0;
    LAYA_TRY(r.num_field(cfg, "query_pre_attn_scalar", &v, true));
    if (!(std::isfinite(v) && v > 0 && v < 1e12)) {
      return Status(StatusCode::kCorrupt, fmt::format("{}: key \"query_pre_attn_scalar\" = {:g}, expected a finite "
                                                      "number > 0 (queries are scaled by its -0.5th power; Gemma uses "
                                                      "head_dim, 256)", r.path, v));
    }
    hp->attn_scale = static_cast<float>(1.0 / std::sqrt(v));
  }
  for (auto [key, out] : {std::pair{"attn_logit_softcapping", &hp->attn_softcap},
                          std::pair{"final_logit_softcapping", &hp->final_softcap}}) {
    double v = 0;
    LAYA_TRY(r.num_field(cfg, key, &v, false));
    *out = static_cast<float>(v);  // range-checked by validate_hparams
  }
  if (auto u = cfg.find("use_sliding_window"); u != cfg.end() && u->is_boolean() && !u->get<bool>()) return Status::Ok();
  if (auto w = cfg.find("sliding_window"); w != cfg.end() && w->is_number_integer() && w->get<int64_t>() == 0) {
    return Status::Ok();
  }
  LAYA_TRY(r.int_field(cfg, "sliding_window", &hp->sliding_window, false));
  if (hp->sliding_window == 0) return Status::Ok();
  LAYA_TRY(read_hf_swa_layers(r, cfg, arch, hp));
  hp->rope_theta_local = arch.attn.swa_rope_base;
  LAYA_TRY(r.num_field(cfg, "rope_local_base_freq", &hp->rope_theta_local, false));
  if (auto rp = cfg.find("rope_parameters"); rp != cfg.end() && rp->is_object()) {
    if (auto sl = rp->find("sliding_attention"); sl != rp->end() && sl->is_object()) {
      if (auto t = sl->find("rope_type"); t != sl->end() && !(t->is_string() && t->get<std::string>() == "default")) {
        return Status(StatusCode::kUnsupported, fmt::format("{}: rope_parameters.sliding_attention.rope_type = {}: "
                                                            "the sliding layers' RoPE must be the default one",
                                                            r.path, dumped(*t)));
      }
      LAYA_TRY(r.num_field(*sl, "rope_theta", &hp->rope_theta_local, false));
    }
  }
  return Status::Ok();
}

// Variants of a supported model type that carry what laya does not run:
// refused by name rather than loaded into a wrong forward pass.
Status refuse_variants(const std::string& path, const nlohmann::json& cfg) {
  for (const char* key : {"num_local_experts", "num_experts", "n_routed_experts"}) {
    if (auto it = cfg.find(key); it != cfg.end() && it->is_number_integer() && it->get<int64_t>() > 0) {
      return Status(StatusCode::kUnsupported, fmt::format("{}: a mixture-of-experts model (\"{}\" = {}) is not "
                                                          "supported; dense models only", path, key, it->dump()));
    }
  }
  return Status::Ok();
}

}  // namespace

Status Model::load_hf(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  LAYA_ASSIGN_OR_RETURN(std::string text, read_file(cfg_path));
  LAYA_ASSIGN_OR_RETURN(nlohmann::json cfg, parse_json(text, cfg_path));
  if (!cfg.is_object()) return Status(StatusCode::kCorrupt, fmt::format("{}: expected a JSON object", cfg_path));
  if (cfg.contains("vision_config")) {
    // Gemma3ForConditionalGeneration, LLaVA ...: named by its class where config.json says it.
    std::string what = "a model";
    if (auto a = cfg.find("architectures"); a != cfg.end() && a->is_array() && !a->empty() && (*a)[0].is_string()) {
      what = shown((*a)[0].get<std::string>());
    }
    return Status(StatusCode::kUnsupported, fmt::format("{}: {} with a vision tower (\"vision_config\") is not "
                                                        "supported; laya runs text models only (for Gemma 3: a "
                                                        "Gemma3ForCausalLM folder, model_type gemma3_text)",
                                                        cfg_path, what));
  }
  if (cfg.contains("text_config") && cfg["text_config"].is_object() && !cfg.contains("hidden_size")) {
    cfg = nlohmann::json(cfg["text_config"]);
  }
  std::string model_type;
  if (auto it = cfg.find("model_type"); it != cfg.end() && it->is_string()) model_type = it->get<std::string>();
  arch_ = find_arch_by_hf_type(model_type);
  if (!arch_) {
    return Status(StatusCode::kUnsupported, fmt::format("{}: model_type {} is not supported (supported: {})", cfg_path,
                                                        shown(model_type), supported_arch_list()));
  }
  LAYA_TRY(read_mlx_quant(cfg_path, cfg, &mlx_));
  hp_.arch = arch_->name;
  keys_ = MetaKeys::for_hf(cfg_path, arch_->name);
  if (arch_->layer_norm) keys_.rms_eps = "norm_epsilon";
  const ConfigReader reader{cfg_path};
  LAYA_TRY(read_hf_sizes(reader, cfg, keys_.rms_eps, &hp_, &meta_));
  LAYA_TRY(read_hf_rope(reader, cfg, &hp_, &meta_.rope));
  LAYA_TRY(read_hf_special_ids(reader, cfg, &meta_));
  LAYA_TRY(read_hf_family_params(reader, cfg, &hp_));
  LAYA_TRY(read_hf_attention(reader, cfg, *arch_, &hp_));
  LAYA_TRY(refuse_variants(cfg_path, cfg));
  bool tied = arch_->tied_by_default;
  if (auto it = cfg.find("tie_word_embeddings"); it != cfg.end() && it->is_boolean()) tied = it->get<bool>();
  return map_hf_tensors(dir, tied);
}

Status Model::map_hf_tensors(const std::string& dir, bool tied) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(index)) {
    LAYA_ASSIGN_OR_RETURN(files, safetensors::read_index(index.string()));
  } else if (fs::exists(fs::path(dir) / "model.safetensors")) {
    files.push_back("model.safetensors");
  } else {
    return Status(StatusCode::kNotFound, fmt::format("{}: no model.safetensors or model.safetensors.index.json", dir));
  }
  for (const auto& name : files) {
    LAYA_ASSIGN_OR_RETURN(auto sf, safetensors::File::open((fs::path(dir) / name).string()));
    shards_.push_back(std::move(sf));
  }
  // An MLX module's weight, scales and biases may lie in different shards.
  std::unordered_map<std::string, const safetensors::TensorInfo*> by_name;
  for (const auto& sf : shards_)
    for (const auto& st : sf->tensors()) by_name.emplace(st.name, &st);
  const FindTensor find = [&](const std::string& n) -> const safetensors::TensorInfo* {
    auto it = by_name.find(n);
    return it == by_name.end() ? nullptr : it->second;
  };
  for (const auto& sf : shards_) {
    for (const auto& st : sf->tensors()) {
      std::string gg = hf_to_gguf_name(*arch_, st.name);
      if (gg.empty()) continue;  // e.g. rotary_emb.inv_freq of old checkpoints
      Tensor t;
      const std::string_view kWeight = ".weight";
      const bool is_weight = st.name.size() > kWeight.size() && st.name.ends_with(kWeight);
      const std::string module = is_weight ? st.name.substr(0, st.name.size() - kWeight.size()) : "";
      if (is_weight && (st.type == DType::U32 || find(module + ".scales"))) {
        LAYA_TRY(bind_mlx_module(mlx_, sf->path(), module, find, &t));
      } else {
        if (st.type == DType::U32) {
          return Status(StatusCode::kCorrupt, fmt::format("{}: tensor '{}' is U32; only an MLX-quantized module's weight "
                                                          "may be", sf->path(), st.name));
        }
        if (st.shape.empty() || st.shape.size() > 4) {
          return Status(StatusCode::kCorrupt, fmt::format("{}: tensor '{}' has {} dimensions, expected 1 or 2",
                                                          sf->path(), st.name, st.shape.size()));
        }
        t.type = st.type;
        t.n_dims = static_cast<int>(st.shape.size());
        for (int d = 0; d < t.n_dims; ++d) t.ne[d] = st.shape[st.shape.size() - 1 - static_cast<size_t>(d)];
        t.data = st.data;
        t.nbytes = st.nbytes;
      }
      t.name = gg;
      all_.push_back(std::move(t));
    }
  }
  // Tied checkpoints sometimes also store lm_head; honour the config.
  if (!tied) return Status::Ok();
  for (const TensorSpec& s : arch_->tensors()) {
    if (s.when != When::kUntiedOutput) continue;
    auto it = std::find_if(all_.begin(), all_.end(), [&](const Tensor& t) { return t.name == s.gguf; });
    if (it != all_.end()) all_.erase(it);
  }
  return Status::Ok();
}

}  // namespace laya
