#include "core/tensor.h"

namespace laya {

std::string shape_string(int n_dims, const int64_t* ne) {
  std::string s = "[";
  for (int i = 0; i < n_dims; ++i) {
    if (i) s += ", ";
    s += std::to_string(ne[i]);
  }
  return s + "]";
}

std::string Tensor::shape_string() const { return laya::shape_string(n_dims, ne); }

}  // namespace laya
