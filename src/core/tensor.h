// A weight tensor: a typed view into mapped file bytes (host memory). A
// backend maps it to its own form (packed, uploaded) in prepare_weights().
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace laya {

// "[4096, 32000]": the first n_dims extents, row length first.
std::string shape_string(int n_dims, const int64_t* ne);

struct Tensor {
  std::string name;               // GGUF-style name, e.g. "blk.3.attn_k.weight"
  DType type = DType::F32;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};   // ne[0] = row length (contiguous), ne[1] = rows
  const uint8_t* data = nullptr;  // inside a mapping; never owned
  size_t nbytes = 0;

  bool present() const { return data != nullptr; }
  int64_t cols() const { return ne[0]; }
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  size_t row_stride() const { return row_bytes(type, ne[0]); }
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_stride(); }
  std::string shape_string() const;
};

}  // namespace laya
