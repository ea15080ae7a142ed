// Where a weight tensor's bytes go on the device (the layouts cuda/kernels.h
// describes). Plain C++: the backend packs with it, the host check of the
// kernels' index arithmetic (tests/cuda/units_host_check.cpp) reads it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

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

}  // namespace laya::cuda
