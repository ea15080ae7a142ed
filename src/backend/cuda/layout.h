// Where a weight tensor's bytes go on the device (the layouts cuda/kernels.h
// describes). Plain C++: the backend packs with it, the host check of the
// kernels' index arithmetic (tests/cuda/units_host_check.cpp) reads it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/tensor.h"

namespace laya::cuda {

// True for the types the kernels read.
bool dev_supported(DType type);
// Row stride on the device (float types padded to 16 bytes; Q8_0: the int8
// values; Q6_K: 208 bytes a block).
size_t dev_stride(DType type, int64_t cols);
// Bytes of the separate fp16 scales after the rows (Q8_0, Q6_K), else 0.
size_t dev_scales_bytes(DType type, int64_t rows, int64_t cols);
// Bytes a tensor of this type and shape takes on the device.
size_t dev_bytes(DType type, int64_t rows, int64_t cols);
// True when the device layout is the file's (uploaded as it is).
bool dev_same_as_file(DType type, int64_t cols);
// The device layout of `rows` file rows: dev_bytes() bytes at dst.
void pack_rows(DType type, int64_t rows, int64_t cols, const uint8_t* src, uint8_t* dst);

// MLX affine types (DType::MLX_Q*): the functions above give their packed
// rows alone (the file's, padded to 16 bytes); the tensor forms below add
// each group's scale and bias after the rows, side by side in the file's
// type (Tensor::groups): F16 / BF16 as one 32-bit word (scale in the low
// half), F32 as two floats. One load a unit gives the decode kernel both; a
// single float32 form would cost 4 more bytes a group (+11 % of a 4-bit
// group of 64's bytes) in a bandwidth-bound kernel, for one uniform branch saved.
size_t mlx_pair_bytes(DType group_type);
// Bytes a tensor takes on the device (any type).
size_t dev_bytes(const Tensor& t);
// True when the device layout is the file's (uploaded as it is; never for MLX types).
bool dev_same_as_file(const Tensor& t);
// The device layout of a tensor: dev_bytes(t) bytes at dst.
void pack_tensor(const Tensor& t, uint8_t* dst);

}  // namespace laya::cuda
