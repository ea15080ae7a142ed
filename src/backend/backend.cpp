#include "backend/backend.h"

namespace laya {

size_t KvLayout::slice_bytes(DType type, int64_t n_pos, int64_t head_dim) {
  const size_t elems = static_cast<size_t>(n_pos * head_dim);
  switch (type) {
    case DType::F16: return elems * 2;
    case DType::Q8_0: return elems + elems / 32 * 4;  // int8 + a float32 scale per 32
    default: return elems * 4;
  }
}

}  // namespace laya
