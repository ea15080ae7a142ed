// A weight tensor: a typed view into mapped file bytes (host memory). A
// backend maps it to its own form (packed, uploaded) in prepare_weights().
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace laya {

// "[4096, 32000]": the first n_dims extents, row length first.
std::string shape_string(int n_dims, const int64_t* ne);

// The per-group parameters of an MLX affine tensor (DType::MLX_Q*), read in
// place from the file like the packed values: rows × (cols / size) scales
// and as many biases, row-major, each of `type`.
struct GroupParams {
  const uint8_t* scales = nullptr;
  const uint8_t* biases = nullptr;
  DType type = DType::F16;  // F16, BF16 or F32
  int32_t size = 0;         // values per group: 32, 64 or 128
  size_t nbytes = 0;        // bytes of the scales (the biases have as many)
};

struct Tensor {
  std::string name;               // GGUF-style name, e.g. "blk.3.attn_k.weight"
  DType type = DType::F32;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};   // ne[0] = row length (contiguous), ne[1] = rows
  const uint8_t* data = nullptr;  // inside a mapping; never owned
  size_t nbytes = 0;              // of `data` (an MLX tensor's packed values only)
  GroupParams groups;             // MLX types only

  bool present() const { return data != nullptr; }
  int64_t cols() const { return ne[0]; }
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  size_t row_stride() const { return row_bytes(type, ne[0]); }
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_stride(); }
  std::string shape_string() const;
  // Every byte the tensor reads: data plus an MLX tensor's scales and biases.
  size_t total_bytes() const { return nbytes + 2 * groups.nbytes; }
};

}  // namespace laya
