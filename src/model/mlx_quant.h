// MLX-quantized Hugging Face folders, as mlx-lm's `convert -q` writes them:
// config.json "quantization": {"group_size": 64, "bits": 4, "mode": "affine",
// "<module path>": {...} | false, ...} (mlx-lm also copies it to
// "quantization_config"), and for every quantized module (Linear and
// Embedding layers whose input width is a multiple of group_size, lm_head and
// embed_tokens included) three arrays: `weight` U32 [rows, cols·bits/32],
// `scales` and `biases` [rows, cols/group_size] in the model's float type.
// A module is quantized when its `scales` is in the file (as mlx-lm's loader
// decides), with the per-module entry's bits and group_size where there is
// one. The arrays are used where they are mapped (Tensor::groups); see
// DType::MLX_Q* for the packing.
#pragma once

#include <functional>
#include <map>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"
#include "core/tensor.h"
#include "format/safetensors.h"

namespace laya {

struct MlxQuantParams {
  int bits = 0;   // 2, 3, 4, 5, 6 or 8; 0: the module is left in float
  int group = 0;  // 32, 64 or 128
};

struct MlxQuant {
  bool present = false;  // config.json has an MLX "quantization"
  MlxQuantParams base;   // its "bits" and "group_size"
  std::map<std::string, MlxQuantParams> modules;  // per-module entries

  const MlxQuantParams& for_module(const std::string& module) const;
  // "MLX affine 4-bit, group 64 (+ 2 modules overridden)" for `laya info`.
  std::string describe() const;
};

// Reads config.json's "quantization" (or an MLX "quantization_config"): every
// value checked, errors naming the key, the value and what MLX allows. Other
// quantization_config methods (GPTQ, AWQ, bitsandbytes, ...) are kUnsupported
// naming the method.
Status read_mlx_quant(const std::string& cfg_path, const nlohmann::json& cfg, MlxQuant* out);

// The quantized module `module` ("model.layers.0.self_attn.q_proj") of
// safetensors file `file` as one tensor: its weight, scales and biases
// (looked up by `find`, any shard) checked against each other and the
// config, the errors naming the tensor and what is wrong with it.
using FindTensor = std::function<const safetensors::TensorInfo*(const std::string& name)>;
Status bind_mlx_module(const MlxQuant& q, const std::string& file, const std::string& module, const FindTensor& find,
                       Tensor* out);

}  // namespace laya
