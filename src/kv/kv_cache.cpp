#include "kv/kv_cache.h"

namespace laya {

KvCache::KvCache(int64_t n_layer, int64_t n_ctx, int64_t kv_dim, DType type)
    : n_layer_(n_layer), n_ctx_(n_ctx), kv_dim_(kv_dim), type_(type), elem_(type == DType::F16 ? 2 : 4) {
  const size_t n = static_cast<size_t>(n_layer * n_ctx * kv_dim) * elem_;
  k_.assign(n, 0);  // touch the pages now, not during the first keystroke
  v_.assign(n, 0);
}

Status KvCache::truncate(int64_t pos) {
  if (pos < 0 || pos > n_past_) {
    return Status(StatusCode::kOutOfRange, strformat("KV cache truncate to %lld: must be in [0, %lld] (tokens cached)",
                                                     static_cast<long long>(pos), static_cast<long long>(n_past_)));
  }
  n_past_ = pos;
  return Status::Ok();
}

KvLayerView KvCache::layer(int64_t il) {
  const size_t off = static_cast<size_t>(il * n_ctx_ * kv_dim_) * elem_;
  return KvLayerView{k_.data() + off, v_.data() + off, type_, kv_dim_};
}

}  // namespace laya
