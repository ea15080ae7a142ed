#include "kv/kv_cache.h"

namespace laya {

KvCache::KvCache(int64_t n_layer, int64_t n_ctx, int64_t n_head_kv, int64_t head_dim, DType type)
    : n_layer_(n_layer),
      n_ctx_(n_ctx),
      n_head_kv_(n_head_kv),
      head_dim_(head_dim),
      n_alloc_((n_ctx + 15) / 16 * 16),
      type_(type),
      head_bytes_(head_slice_bytes(type, n_alloc_, head_dim)) {
  const size_t n = static_cast<size_t>(n_layer * n_head_kv) * head_bytes_;
  k_.assign(n, 0);  // touch the pages now, not during the first keystroke
  v_.assign(n, 0);
}

size_t KvCache::head_slice_bytes(DType type, int64_t n_pos, int64_t head_dim) {
  const size_t elems = static_cast<size_t>(n_pos * head_dim);
  switch (type) {
    case DType::F16: return elems * 2;
    case DType::Q8_0: return elems + elems / 32 * 4;  // int8 + a float32 scale per 32
    default: return elems * 4;
  }
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
  const size_t off = static_cast<size_t>(il * n_head_kv_) * head_bytes_;
  return KvLayerView{k_.data() + off, v_.data() + off, type_, n_head_kv_, head_dim_, head_bytes_};
}

}  // namespace laya
