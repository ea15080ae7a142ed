// Hugging Face / MLX folder: config.json + model.safetensors (or shards listed
// in model.safetensors.index.json). Tensor names are mapped to GGUF names so
// the rest of the engine sees one naming scheme; HF's row-major [out, in]
// shapes are ggml's ne = [in, out], so the bytes are used as they are.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "format/safetensors.h"
#include "model/model.h"

namespace laya {

namespace {

// "model.layers.3.self_attn.q_proj.weight" → "blk.3.attn_q.weight"; "" if unknown.
std::string hf_to_gguf_name(const std::string& n) {
  static const std::pair<const char*, const char*> kTop[] = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"},
  };
  for (auto [hf, gg] : kTop)
    if (n == hf) return gg;
  static const std::string kLayers = "model.layers.";
  if (n.rfind(kLayers, 0) != 0) return "";
  size_t dot = n.find('.', kLayers.size());
  if (dot == std::string::npos) return "";
  const std::string idx = n.substr(kLayers.size(), dot - kLayers.size());
  const std::string rest = n.substr(dot + 1);
  static const std::pair<const char*, const char*> kLayer[] = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
  };
  for (auto [hf, gg] : kLayer)
    if (rest == hf) return "blk." + idx + "." + gg;
  return "";
}

Result<nlohmann::json> read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(StatusCode::kNotFound, strformat("%s: cannot open", path.c_str()));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    return Status(StatusCode::kCorrupt, strformat("%s: malformed JSON at byte %zu: %s", path.c_str(), e.byte, e.what()));
  }
}

}  // namespace

Status Model::load_hf(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  LAYA_ASSIGN_OR_RETURN(nlohmann::json cfg, read_json(cfg_path));
  if (!cfg.is_object()) return Status(StatusCode::kCorrupt, strformat("%s: expected a JSON object", cfg_path.c_str()));
  if (cfg.contains("text_config") && cfg["text_config"].is_object() && !cfg.contains("hidden_size")) {
    cfg = cfg["text_config"];
  }
  auto str_field = [&](const char* key) -> std::string {
    auto it = cfg.find(key);
    return it != cfg.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const std::string model_type = str_field("model_type");
  arch_ = find_arch_by_hf_type(model_type);
  if (!arch_) {
    return Status(StatusCode::kUnsupported, strformat("%s: model_type '%s' is not supported (supported: %s)", cfg_path.c_str(),
                                                      model_type.c_str(), supported_arch_list()));
  }
  if (cfg.contains("quantization") || cfg.contains("quantization_config")) {
    return Status(StatusCode::kUnsupported, strformat("%s: quantized Hugging Face/MLX weights are not supported; use the "
                                                      "F32/F16/BF16 folder or a GGUF file", cfg_path.c_str()));
  }
  hp_.arch = arch_->name;
  auto int_field = [&](const char* key, int64_t* out, bool required) -> Status {
    auto it = cfg.find(key);
    if (it == cfg.end() || it->is_null()) {
      if (!required) return Status::Ok();
      return Status(StatusCode::kNotFound, strformat("%s: key \"%s\" is missing", cfg_path.c_str(), key));
    }
    if (!it->is_number_integer() || it->get<int64_t>() <= 0 || it->get<int64_t>() > (int64_t{1} << 31)) {
      return Status(StatusCode::kCorrupt, strformat("%s: key \"%s\" = %s, expected a positive integer", cfg_path.c_str(), key,
                                                    it->dump().c_str()));
    }
    *out = it->get<int64_t>();
    return Status::Ok();
  };
  auto num_field = [&](const nlohmann::json& obj, const char* key, double* out, bool required) -> Status {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) {
      if (!required) return Status::Ok();
      return Status(StatusCode::kNotFound, strformat("%s: key \"%s\" is missing", cfg_path.c_str(), key));
    }
    if (!it->is_number()) {
      return Status(StatusCode::kCorrupt, strformat("%s: key \"%s\" = %s, expected a number", cfg_path.c_str(), key,
                                                    it->dump().c_str()));
    }
    *out = it->get<double>();
    return Status::Ok();
  };
  LAYA_TRY(int_field("hidden_size", &hp_.n_embd, true));
  LAYA_TRY(int_field("num_hidden_layers", &hp_.n_layer, true));
  LAYA_TRY(int_field("num_attention_heads", &hp_.n_head, true));
  LAYA_TRY(int_field("intermediate_size", &hp_.n_ff, true));
  hp_.n_head_kv = hp_.n_head;
  LAYA_TRY(int_field("num_key_value_heads", &hp_.n_head_kv, false));
  hp_.head_dim = hp_.n_embd / hp_.n_head;
  LAYA_TRY(int_field("head_dim", &hp_.head_dim, false));
  hp_.n_ctx_train = 2048;
  LAYA_TRY(int_field("max_position_embeddings", &hp_.n_ctx_train, false));
  double eps = 1e-6;
  LAYA_TRY(num_field(cfg, "rms_norm_eps", &eps, false));
  hp_.rms_eps = static_cast<float>(eps);
  // transformers 4 writes rope_theta + rope_scaling; transformers 5 writes
  // rope_parameters {rope_theta, rope_type, ...}.
  const nlohmann::json* rope = nullptr;
  if (auto it = cfg.find("rope_parameters"); it != cfg.end() && it->is_object()) rope = &*it;
  if (auto it = cfg.find("rope_scaling"); !rope && it != cfg.end() && it->is_object()) rope = &*it;
  hp_.rope_theta = 10000.0;
  LAYA_TRY(num_field(cfg, "rope_theta", &hp_.rope_theta, false));
  if (rope) {
    LAYA_TRY(num_field(*rope, "rope_theta", &hp_.rope_theta, false));
    std::string type = "default";
    if (auto t = rope->find("rope_type"); t != rope->end() && t->is_string()) type = t->get<std::string>();
    else if (auto t2 = rope->find("type"); t2 != rope->end() && t2->is_string()) type = t2->get<std::string>();
    if (type == "llama3") {
      double factor = 0, lo = 0, hi = 0, orig = 0;
      LAYA_TRY(num_field(*rope, "factor", &factor, true));
      LAYA_TRY(num_field(*rope, "low_freq_factor", &lo, true));
      LAYA_TRY(num_field(*rope, "high_freq_factor", &hi, true));
      LAYA_TRY(num_field(*rope, "original_max_position_embeddings", &orig, true));
      if (factor <= 0 || lo <= 0 || hi <= lo || orig <= 0) {
        return Status(StatusCode::kCorrupt, strformat("%s: llama3 rope scaling needs factor > 0 and high_freq_factor > "
                                                      "low_freq_factor > 0", cfg_path.c_str()));
      }
      hp_.rope_freq_factors = llama3_rope_factors(hp_.head_dim, hp_.rope_theta, factor, lo, hi, orig);
    } else if (type == "linear") {
      double factor = 0;
      LAYA_TRY(num_field(*rope, "factor", &factor, true));
      hp_.rope_freq_factors.assign(static_cast<size_t>(hp_.head_dim / 2), static_cast<float>(factor));
    } else if (type != "default") {
      return Status(StatusCode::kUnsupported, strformat("%s: rope type '%s' is not supported (default, linear, llama3)",
                                                        cfg_path.c_str(), type.c_str()));
    }
  }
  if (auto it = cfg.find("bos_token_id"); it != cfg.end() && it->is_number_integer()) hp_.bos_id = it->get<int32_t>();
  if (auto it = cfg.find("eos_token_id"); it != cfg.end()) {
    if (it->is_number_integer()) hp_.eos_id = it->get<int32_t>();
    else if (it->is_array() && !it->empty() && (*it)[0].is_number_integer()) hp_.eos_id = (*it)[0].get<int32_t>();
  }
  bool tied = arch_->tied_by_default;
  if (auto it = cfg.find("tie_word_embeddings"); it != cfg.end() && it->is_boolean()) tied = it->get<bool>();
  hp_.rope_layout = RopeLayout::kHalves;

  // Weights.
  std::vector<std::string> files;
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(index)) {
    LAYA_ASSIGN_OR_RETURN(files, safetensors::read_index(index.string()));
  } else if (fs::exists(fs::path(dir) / "model.safetensors")) {
    files.push_back("model.safetensors");
  } else {
    return Status(StatusCode::kNotFound, strformat("%s: no model.safetensors or model.safetensors.index.json", dir.c_str()));
  }
  for (const auto& name : files) {
    LAYA_ASSIGN_OR_RETURN(auto sf, safetensors::File::open((fs::path(dir) / name).string()));
    for (const auto& st : sf->tensors()) {
      std::string gg = hf_to_gguf_name(st.name);
      if (gg.empty()) continue;  // e.g. rotary_emb.inv_freq of old checkpoints
      if (st.shape.empty() || st.shape.size() > 4) {
        return Status(StatusCode::kCorrupt, strformat("%s: tensor '%s' has %zu dimensions, expected 1 or 2",
                                                      sf->path().c_str(), st.name.c_str(), st.shape.size()));
      }
      Tensor t;
      t.name = gg;
      t.type = st.type;
      t.n_dims = static_cast<int>(st.shape.size());
      for (int d = 0; d < t.n_dims; ++d) t.ne[d] = st.shape[st.shape.size() - 1 - static_cast<size_t>(d)];
      t.data = st.data;
      t.nbytes = st.nbytes;
      all_.push_back(std::move(t));
    }
    shards_.push_back(std::move(sf));
  }
  // Tied checkpoints sometimes also store lm_head; honour the config.
  if (tied) {
    for (size_t i = 0; i < all_.size(); ++i) {
      if (all_[i].name == "output.weight") {
        all_.erase(all_.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
  }
  return Status::Ok();
}

}  // namespace laya
