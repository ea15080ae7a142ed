// Writing MLX-quantized weights (DType::MLX_Q*, core/dtype.h) and safetensors
// files: what `laya mkmodel --type MLX4` and the tests use to make MLX folders
// (this machine has no MLX). The quantizer follows mx.quantize's affine mode
// (mlx/ops.cpp affine_quantize): per group of `group` values, with
// n = 2^bits − 1, the scale is (max − min) / n (at least 1e-7), signed and
// nudged so that the extreme value of larger magnitude (the edge) is q0·s
// exactly, the bias is that edge (0 when q0 = 0), q = clip(round((w − z) / s),
// 0, n), computed in float32; scales and biases are then stored in `type`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/dtype.h"
#include "core/status.h"

namespace laya {

struct MlxQuantizedMatrix {
  std::vector<uint8_t> q;       // rows × cols·bits/8 bytes (the U32 array's bytes)
  std::vector<uint8_t> scales;  // rows × cols/group values of `type`
  std::vector<uint8_t> biases;
};

// w: rows × cols float32, row-major; cols a multiple of group; bits 2..8 but
// 7; group 32, 64 or 128; type F16, BF16 or F32.
MlxQuantizedMatrix mlx_quantize(const float* w, int64_t rows, int64_t cols, int bits, int group, DType type);

// One array of a safetensors file: bytes as they are stored, row-major.
struct SafetensorsArray {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16", "U32"
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// Writes the arrays (in this order) as one safetensors file through an
// AtomicFile; __metadata__ {"format": "mlx"} as mlx-lm writes it.
Status write_safetensors(const std::string& path, const std::vector<SafetensorsArray>& arrays, const OutputOptions& opt);

}  // namespace laya
