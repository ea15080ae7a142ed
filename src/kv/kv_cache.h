// The KV cache of one sequence: for every layer, K and V as n_head_kv slices
// of n_ctx positions (see KvLayerView), allocated once. Cutting it back to a
// position is O(1): rows past n_past are simply overwritten by the next prefill.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "core/dtype.h"
#include "core/status.h"

namespace laya {

class KvCache {
 public:
  KvCache(int64_t n_layer, int64_t n_ctx, int64_t n_head_kv, int64_t head_dim, DType type);
  // Bytes of one head's K (or V) slice of n_pos positions (a multiple of 16).
  static size_t head_slice_bytes(DType type, int64_t n_pos, int64_t head_dim);

  int64_t n_ctx() const { return n_ctx_; }
  int64_t n_past() const { return n_past_; }
  DType type() const { return type_; }
  size_t bytes() const { return k_.size() * 2; }  // K and V
  const void* k_data() const { return k_.data(); }
  const void* v_data() const { return v_.data(); }

  // Forget everything from `pos` on (pos <= n_past).
  Status truncate(int64_t pos);
  void clear() { n_past_ = 0; }

  KvLayerView layer(int64_t il);
  void set_n_past(int64_t n) { n_past_ = n; }

 private:
  int64_t n_layer_, n_ctx_, n_head_kv_, head_dim_;
  int64_t n_alloc_;  // positions allocated: n_ctx rounded up to whole 16-position K blocks
  DType type_;
  size_t head_bytes_;
  int64_t n_past_ = 0;
  std::vector<uint8_t> k_, v_;
};

}  // namespace laya
