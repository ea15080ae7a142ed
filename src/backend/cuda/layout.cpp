// The device layout of the weights (cuda/kernels.h), made on the host: plain
// C++, so the host check of the decode units (tests/cuda) uses the same code.
#include <cstring>

#include "backend/cuda/layout.h"

namespace laya::cuda {

bool dev_supported(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::Q8_0: case DType::Q4_0: case DType::Q4_1:
    case DType::Q5_0: case DType::Q5_1: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: return true;
    default: return mlx_bits(t) != 0;
  }
}

size_t dev_stride(DType t, int64_t cols) {
  if (t == DType::Q8_0) return static_cast<size_t>(cols);
  if (t == DType::Q6_K) return static_cast<size_t>(cols / 256) * 208;
  const size_t rb = row_bytes(t, cols);
  if (t == DType::F32 || t == DType::F16 || t == DType::BF16 || mlx_bits(t)) return (rb + 15) / 16 * 16;
  return rb;
}

size_t dev_scales_bytes(DType t, int64_t rows, int64_t cols) {
  if (t == DType::Q8_0) return static_cast<size_t>(rows) * static_cast<size_t>(cols / 32) * 2;
  if (t == DType::Q6_K) return static_cast<size_t>(rows) * static_cast<size_t>(cols / 256) * 2;
  return 0;
}

size_t dev_bytes(DType t, int64_t rows, int64_t cols) {
  return dev_stride(t, cols) * static_cast<size_t>(rows) + dev_scales_bytes(t, rows, cols);
}

bool dev_same_as_file(DType t, int64_t cols) {
  return t != DType::Q8_0 && t != DType::Q6_K && dev_stride(t, cols) == row_bytes(t, cols);
}

void pack_rows(DType t, int64_t rows, int64_t cols, const uint8_t* src, uint8_t* dst) {
  const size_t stride = dev_stride(t, cols), file_stride = row_bytes(t, cols);
  uint8_t* scales = dst + static_cast<size_t>(rows) * stride;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* in = src + static_cast<size_t>(r) * file_stride;
    uint8_t* out = dst + static_cast<size_t>(r) * stride;
    if (t == DType::Q8_0) {  // int8 values in rows, the fp16 scales after all rows
      const size_t nb = static_cast<size_t>(cols / 32);
      for (size_t k = 0; k < nb; ++k) {
        const BlockQ8_0* b = reinterpret_cast<const BlockQ8_0*>(in) + k;
        std::memcpy(out + k * 32, b->qs, 32);
        std::memcpy(scales + (static_cast<size_t>(r) * nb + k) * 2, &b->d, 2);
      }
    } else if (t == DType::Q6_K) {  // each block's ql, qh, scales (208 bytes) in rows, d after
      const size_t nb = static_cast<size_t>(cols / 256);
      for (size_t k = 0; k < nb; ++k) {
        const BlockQ6_K* b = reinterpret_cast<const BlockQ6_K*>(in) + k;
        std::memcpy(out + k * 208, b, 208);
        std::memcpy(scales + (static_cast<size_t>(r) * nb + k) * 2, &b->d, 2);
      }
    } else {  // float and MLX rows padded with zeros to 16 bytes; the rest as in the file
      std::memcpy(out, in, file_stride);
      std::memset(out + file_stride, 0, stride - file_stride);
    }
  }
}

size_t mlx_pair_bytes(DType group_type) { return group_type == DType::F32 ? 8 : 4; }

namespace {
size_t mlx_groups(const Tensor& t) { return static_cast<size_t>(t.rows()) * static_cast<size_t>(t.cols() / t.groups.size); }
}  // namespace

size_t dev_bytes(const Tensor& t) {
  const size_t rows = dev_bytes(t.type, t.rows(), t.cols());
  return mlx_bits(t.type) ? rows + mlx_groups(t) * mlx_pair_bytes(t.groups.type) : rows;
}

bool dev_same_as_file(const Tensor& t) { return !mlx_bits(t.type) && dev_same_as_file(t.type, t.cols()); }

void pack_tensor(const Tensor& t, uint8_t* dst) {
  pack_rows(t.type, t.rows(), t.cols(), t.data, dst);
  if (!mlx_bits(t.type)) return;
  uint8_t* pairs = dst + dev_bytes(t.type, t.rows(), t.cols());
  const size_t n = mlx_groups(t), pb = mlx_pair_bytes(t.groups.type) / 2;  // bytes of a scale (and of a bias)
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(pairs + 2 * pb * i, t.groups.scales + pb * i, pb);
    std::memcpy(pairs + 2 * pb * i + pb, t.groups.biases + pb * i, pb);
  }
}

}  // namespace laya::cuda
