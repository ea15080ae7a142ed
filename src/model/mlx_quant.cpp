#include "model/mlx_quant.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/shown.h"

namespace laya {

namespace {

std::string dumped(const nlohmann::json& j) {
  std::string s = j.dump();
  return s.size() <= 40 ? s : shown(s);
}

// One {"group_size", "bits", "mode"} object; `where` names it in errors.
Status read_params(const std::string& path, const std::string& where, const nlohmann::json& obj, MlxQuantParams* out) {
  auto bad = [&](const char* key, const nlohmann::json& v, const char* allowed) {
    return Status(StatusCode::kUnsupported,
                  fmt::format("{}: {}.{} = {}: {}", path, where, key, dumped(v), allowed));
  };
  if (auto m = obj.find("mode"); m != obj.end() && !(m->is_string() && m->get<std::string>() == "affine")) {
    return bad("mode", *m, "laya reads MLX's \"affine\" mode only (not mxfp4, nvfp4 or mxfp8)");
  }
  auto b = obj.find("bits");
  auto g = obj.find("group_size");
  if (b == obj.end() || g == obj.end()) {
    return Status(StatusCode::kCorrupt, fmt::format("{}: {} needs \"bits\" and \"group_size\"", path, where));
  }
  const int64_t bits = b->is_number_integer() ? b->get<int64_t>() : -1;
  if (mlx_type(static_cast<int>(bits < 0 || bits > 8 ? 0 : bits)) == DType::Invalid) {
    return bad("bits", *b, "MLX's affine widths are 2, 3, 4, 5, 6 and 8 bits");
  }
  const int64_t group = g->is_number_integer() ? g->get<int64_t>() : -1;
  if (group != 32 && group != 64 && group != 128) return bad("group_size", *g, "MLX groups are 32, 64 or 128 values");
  *out = MlxQuantParams{static_cast<int>(bits), static_cast<int>(group)};
  return Status::Ok();
}

bool is_param_key(const std::string& k) { return k == "group_size" || k == "bits" || k == "mode"; }

}  // namespace

const MlxQuantParams& MlxQuant::for_module(const std::string& module) const {
  auto it = modules.find(module);
  return it == modules.end() ? base : it->second;
}

std::string MlxQuant::describe() const {
  if (!present) return "";
  std::string s = fmt::format("MLX affine {}-bit, group {}", base.bits, base.group);
  if (!modules.empty()) s += fmt::format(" (+ {} per-module entries)", modules.size());
  return s;
}

Status read_mlx_quant(const std::string& path, const nlohmann::json& cfg, MlxQuant* out) {
  const nlohmann::json* q = nullptr;
  const char* key = "quantization";
  if (auto it = cfg.find("quantization"); it != cfg.end() && !it->is_null()) {
    q = &*it;
  } else if (auto qc = cfg.find("quantization_config"); qc != cfg.end() && !qc->is_null()) {
    if (qc->is_object() && qc->contains("quant_method")) {
      return Status(StatusCode::kUnsupported,
                    fmt::format("{}: quantization_config.quant_method = {} is not supported (laya reads MLX affine "
                                "folders, F32/F16/BF16 folders and GGUF files)",
                                path, dumped((*qc)["quant_method"])));
    }
    q = &*qc;
    key = "quantization_config";
  }
  if (!q) return Status::Ok();
  if (!q->is_object()) {
    return Status(StatusCode::kCorrupt, fmt::format("{}: {} = {}, expected an object", path, key, dumped(*q)));
  }
  LAYA_TRY(read_params(path, key, *q, &out->base));
  for (auto it = q->begin(); it != q->end(); ++it) {
    if (is_param_key(it.key())) continue;
    const std::string where = fmt::format("{}[\"{}\"]", key, it.key());
    if (it->is_boolean()) {
      // false: left in float; true: the base parameters (mlx-lm's predicate results).
      out->modules[it.key()] = it->get<bool>() ? out->base : MlxQuantParams{};
    } else if (it->is_object()) {
      LAYA_TRY(read_params(path, where, *it, &out->modules[it.key()]));
    }
    // Anything else (a string or number some converter adds) is no module entry: mlx-lm's loader only
    // looks up module paths, so it is ignored here too.
  }
  out->present = true;
  return Status::Ok();
}

namespace {

std::string shape_of(const safetensors::TensorInfo& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(t.shape[i]);
  return s + "]";
}

// scales and biases against each other and the packed weight.
Status check_module_arrays(const std::string& file, const std::string& m, const MlxQuantParams& p,
                           const safetensors::TensorInfo& w, const safetensors::TensorInfo& s,
                           const safetensors::TensorInfo& b) {
  auto bad = [&](const std::string& what) {
    return Status(StatusCode::kCorrupt, fmt::format("{}: MLX-quantized '{}': {}", file, m, what));
  };
  if (w.shape.size() != 2) return bad(fmt::format("'{}' has shape {}, expected [rows, packed words]", w.name, shape_of(w)));
  if (s.shape.size() != 2) return bad(fmt::format("'{}' has shape {}, expected [rows, groups]", s.name, shape_of(s)));
  if (b.shape != s.shape) {
    return bad(fmt::format("'{}' has shape {} but '{}' has {}; they must match", b.name, shape_of(b), s.name, shape_of(s)));
  }
  if (s.type != DType::F16 && s.type != DType::BF16 && s.type != DType::F32) {
    return bad(fmt::format("'{}' is {}, expected F16, BF16 or F32", s.name, s.dtype_str));
  }
  if (b.type != s.type) return bad(fmt::format("'{}' is {} but '{}' is {}", b.name, b.dtype_str, s.name, s.dtype_str));
  if (s.shape[0] != w.shape[0]) {
    return bad(fmt::format("'{}' has {} rows but '{}' has {}", s.name, s.shape[0], w.name, w.shape[0]));
  }
  const int64_t cols = s.shape[1] * p.group;
  if (cols <= 0 || w.shape[1] * 32 != cols * p.bits) {
    return bad(fmt::format("'{}' has {} uint32 per row ({} values of {} bits), but '{}' has {} groups of {} ({} values) "
                           "per row; are bits {} and group_size {} right for it?",
                           w.name, w.shape[1], w.shape[1] * 32 / p.bits, p.bits, s.name, s.shape[1], p.group, cols,
                           p.bits, p.group));
  }
  return Status::Ok();
}

}  // namespace

Status bind_mlx_module(const MlxQuant& q, const std::string& file, const std::string& m, const FindTensor& find,
                       Tensor* out) {
  const safetensors::TensorInfo* w = find(m + ".weight");
  const safetensors::TensorInfo* s = find(m + ".scales");
  const safetensors::TensorInfo* b = find(m + ".biases");
  auto bad = [&](StatusCode code, const std::string& what) {
    return Status(code, fmt::format("{}: MLX-quantized '{}': {}", file, m, what));
  };
  if (!q.present) {
    return bad(StatusCode::kCorrupt, fmt::format("'{}.weight' is {}{}, but config.json has no \"quantization\" with its "
                                                 "bits and group_size", m, w->dtype_str, s ? " with scales" : ""));
  }
  const MlxQuantParams& p = q.for_module(m);
  if (p.bits == 0) {
    return bad(StatusCode::kCorrupt, fmt::format("config.json's quantization[\"{}\"] says it is not quantized, but the "
                                                 "file holds '{}.scales'", m, m));
  }
  if (w->type != DType::U32) {
    return bad(StatusCode::kCorrupt, fmt::format("'{}.weight' is {}, but '{}.scales' is there: a quantized weight is U32 "
                                                 "(packed values)", m, w->dtype_str, m));
  }
  if (!s) return bad(StatusCode::kNotFound, fmt::format("'{}.weight' is U32 (packed) but '{}.scales' is missing", m, m));
  if (!b) {
    return bad(StatusCode::kNotFound, fmt::format("'{}.biases' is missing (MLX's affine mode has a bias per group)", m));
  }
  LAYA_TRY(check_module_arrays(file, m, p, *w, *s, *b));
  Tensor t;
  t.type = mlx_type(p.bits);
  t.n_dims = 2;
  t.ne[0] = s->shape[1] * p.group;
  t.ne[1] = w->shape[0];
  t.data = w->data;
  t.nbytes = w->nbytes;
  t.groups = GroupParams{s->data, b->data, s->type, p.group, s->nbytes};
  *out = std::move(t);
  return Status::Ok();
}

}  // namespace laya
