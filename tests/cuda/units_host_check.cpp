// Host check of the CUDA backend's weight arithmetic, where no GPU is at hand:
// the device code of cuda/dequant.cuh and cuda/units.cuh compiled for the CPU
// (LAYA_CUDA_HOST_CHECK), on weights packed by cuda/layout.cpp, against the
// scalar reference (cpu/ref). It checks the index arithmetic of every type's
// dequantizer (exact) and decode unit (a warp's 32 lanes run one after the
// other; float32 against double, 1e-5). The conformance suite checks the same
// on a GPU, through the Backend interface.
//
// Built in every build as laya_cuda_host_check (ctest: cuda.units_host_check); by hand:
//   g++ -std=c++20 -O1 -DLAYA_CUDA_HOST_CHECK -Isrc tests/cuda/units_host_check.cpp src/backend/cuda/layout.cpp
//     src/format/quantize.cpp src/core/dtype.cpp src/backend/cpu/ref/kernels_ref.cpp src/backend/cpu/kernels.cpp
#include "backend/cuda/units.cuh"

#include <cmath>
#include <cstring>
#include <cstdio>
#include <random>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cuda/layout.h"
#include "format/mlx_quantize.h"
#include "format/quantize.h"

namespace laya::cuda {
namespace {

// row_dot of cuda/matmul.cu with the warp's lanes run in turn.
template <class U>
double row_dot_lanes(const DevMat& m, int64_t r, const float* xs) {
  const int n = static_cast<int>(U::units(m.cols));
  const typename U::Ref ref = U::row(m, r);
  double total = 0;
  for (int lane = 0; lane < 32; ++lane) {
    float s = 0.f;
    for (int u = lane; u < n; u += 32) s += U::dot(U::load(ref, u), ref, u, xs);
    total += s;
  }
  return total;
}

double unit_dot(const DevMat& m, int64_t r, const float* xs) {
  switch (m.type) {
    case DType::F32: return row_dot_lanes<UnitF32>(m, r, xs);
    case DType::F16: return row_dot_lanes<Unit16<false>>(m, r, xs);
    case DType::BF16: return row_dot_lanes<Unit16<true>>(m, r, xs);
    case DType::Q8_0: return row_dot_lanes<UnitQ8>(m, r, xs);
    case DType::Q4_K: return row_dot_lanes<UnitK<false>>(m, r, xs);
    case DType::Q5_K: return row_dot_lanes<UnitK<true>>(m, r, xs);
    case DType::Q6_K: return row_dot_lanes<UnitQ6>(m, r, xs);
    case DType::MLX_Q4:
      return mlx_unit_type(m.type, m.group_type) ? row_dot_lanes<UnitMlx<4>>(m, r, xs) : row_dot_lanes<UnitGeneric>(m, r, xs);
    case DType::MLX_Q8:
      return mlx_unit_type(m.type, m.group_type) ? row_dot_lanes<UnitMlx<8>>(m, r, xs) : row_dot_lanes<UnitGeneric>(m, r, xs);
    default: return row_dot_lanes<UnitGeneric>(m, r, xs);
  }
}

int check(DType type, int64_t cols, std::mt19937& rng) {
  const int64_t rows = 5;
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> src(static_cast<size_t>(rows * cols));
  for (auto& v : src) v = nd(rng) * 0.1f;
  const size_t rb = row_bytes(type, cols);
  std::vector<uint8_t> file(rb * static_cast<size_t>(rows));
  if (type == DType::Q4_1 || type == DType::Q5_1) {
    // No quantizer in the project: random bits, with finite scales and minimums.
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& b : file) b = static_cast<uint8_t>(byte(rng));
    const size_t bb = dtype_info(type).block_bytes;
    for (size_t off = 0; off < file.size(); off += bb) {
      const uint16_t dm[2] = {f32_to_fp16(0.01f * (1 + nd(rng) * 0.1f)), f32_to_fp16(nd(rng) * 0.1f)};
      std::memcpy(file.data() + off, dm, 4);
    }
  } else {
    for (int64_t r = 0; r < rows; ++r) quantize_row(type, src.data() + r * cols, file.data() + r * rb, cols);
  }
  // 16-byte aligned, as a device allocation is.
  std::vector<uint4> dev((dev_bytes(type, rows, cols) + 15) / 16);
  uint8_t* d = reinterpret_cast<uint8_t*>(dev.data());
  pack_rows(type, rows, cols, file.data(), d);
  DevMat m;
  m.type = type;
  m.rows = rows;
  m.cols = cols;
  m.data = d;
  m.stride = dev_stride(type, cols);
  if (dev_scales_bytes(type, rows, cols)) m.scales = reinterpret_cast<const uint16_t*>(d + rows * m.stride);

  const cpu::KernelTable& ref = *cpu::kernels_for(cpu::Isa::kScalar);
  const int64_t padded = (cols + 255) / 256 * 256;
  std::vector<float> x(static_cast<size_t>(padded), 0.f), want(static_cast<size_t>(cols));
  for (int64_t i = 0; i < cols; ++i) x[static_cast<size_t>(i)] = nd(rng);
  // Staged as the decode kernel stages it (units.cuh: 4 floats of padding after every 32).
  std::vector<float> xs(static_cast<size_t>(xpad_size(padded)), std::nanf(""));
  for (int64_t i = 0; i < padded; ++i) xs[static_cast<size_t>(xpad(i))] = x[static_cast<size_t>(i)];
  int bad = 0;
  double worst_deq = 0, worst_dot = 0;
  for (int64_t r = 0; r < rows; ++r) {
    ref.dequantize_row[static_cast<uint32_t>(type)](file.data() + r * rb, want.data(), cols);
    for (int64_t g = 0; g * 32 < cols; ++g) {
      float got[32];
      deq32(m, r, g, got);
      for (int j = 0; j < 32 && g * 32 + j < cols; ++j)
        worst_deq = std::max(worst_deq, static_cast<double>(std::fabs(got[j] - want[static_cast<size_t>(g * 32 + j)])));
    }
    double exact = 0, mag = 0;
    for (int64_t i = 0; i < cols; ++i) {
      exact += static_cast<double>(want[static_cast<size_t>(i)]) * x[static_cast<size_t>(i)];
      mag += std::fabs(static_cast<double>(want[static_cast<size_t>(i)]) * x[static_cast<size_t>(i)]);
    }
    const double err = std::fabs(unit_dot(m, r, xs.data()) - exact) / std::max(mag / std::sqrt(static_cast<double>(cols)), 1e-30);
    worst_dot = std::max(worst_dot, err);
  }
  const bool ok = worst_deq <= 1e-6 && worst_dot <= 1e-5;
  bad += ok ? 0 : 1;
  std::printf("%-5s cols %4lld: dequantize max |d| %.2e, decode unit rel err %.2e  %s\n", dtype_name(type),
              static_cast<long long>(cols), worst_deq, worst_dot, ok ? "ok" : "FAILED");
  return bad;
}

// An MLX affine matrix (bits, group, scale type) quantized as mlx-lm does
// (format/mlx_quantize.h), packed by cuda/layout.cpp (rows, then the (scale,
// bias) pairs), against the scalar reference (cpu/ref/affine_ref.cpp): deq32
// exactly, the decode unit (UnitMlx for 4 / 8 bits with 16-bit scales, else
// UnitGeneric) on x staged with its sums of 32 (x_sum32) to 1e-5.
int check_mlx(int bits, int group, DType ptype, int64_t cols, std::mt19937& rng) {
  const int64_t rows = 5;
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> src(static_cast<size_t>(rows * cols));
  for (auto& v : src) v = nd(rng) * 0.1f;
  const MlxQuantizedMatrix q = mlx_quantize(src.data(), rows, cols, bits, group, ptype);
  Tensor t;
  t.type = mlx_type(bits);
  t.n_dims = 2;
  t.ne[0] = cols;
  t.ne[1] = rows;
  t.data = q.q.data();
  t.nbytes = q.q.size();
  t.groups = GroupParams{q.scales.data(), q.biases.data(), ptype, group, q.scales.size()};
  std::vector<uint4> dev((dev_bytes(t) + 15) / 16);  // 16-byte aligned, as a device allocation is
  uint8_t* d = reinterpret_cast<uint8_t*>(dev.data());
  pack_tensor(t, d);
  DevMat m;
  m.type = t.type;
  m.rows = rows;
  m.cols = cols;
  m.data = d;
  m.stride = dev_stride(t.type, cols);
  m.scales = reinterpret_cast<const uint16_t*>(d + rows * m.stride);
  m.group = group;
  m.group_type = ptype;

  const cpu::KernelTable& ref = *cpu::kernels_for(cpu::Isa::kScalar);
  const int64_t padded = (cols + 255) / 256 * 256;
  std::vector<float> x(static_cast<size_t>(padded), 0.f), want(static_cast<size_t>(cols));
  for (int64_t i = 0; i < cols; ++i) x[static_cast<size_t>(i)] = nd(rng);
  std::vector<float> xs(static_cast<size_t>(xpad_size(padded)), std::nanf(""));
  for (int64_t i = 0; i < padded; ++i) xs[static_cast<size_t>(xpad(i))] = x[static_cast<size_t>(i)];
  for (int64_t i = 0; i < padded; i += kXPadEvery) x_sum32(xs.data() + xpad(i));  // as stage_x_sums does
  double worst_deq = 0, worst_dot = 0;
  for (int64_t r = 0; r < rows; ++r) {
    ref.affine_dequantize[bits](cpu::affine_row(t.data, t.row_stride(), t.groups, cols, r), want.data(), cols);
    for (int64_t g = 0; g * 32 < cols; ++g) {
      float got[32];
      deq32(m, r, g, got);
      for (int j = 0; j < 32; ++j)
        worst_deq = std::max(worst_deq, static_cast<double>(std::fabs(got[j] - want[static_cast<size_t>(g * 32 + j)])));
    }
    double exact = 0, mag = 0;
    for (int64_t i = 0; i < cols; ++i) {
      exact += static_cast<double>(want[static_cast<size_t>(i)]) * x[static_cast<size_t>(i)];
      mag += std::fabs(static_cast<double>(want[static_cast<size_t>(i)]) * x[static_cast<size_t>(i)]);
    }
    const double err = std::fabs(unit_dot(m, r, xs.data()) - exact) / std::max(mag / std::sqrt(static_cast<double>(cols)), 1e-30);
    worst_dot = std::max(worst_dot, err);
  }
  // F32 scales: s·q is rounded, and a fused multiply-add may round once less than the reference.
  const bool ok = worst_deq <= (ptype == DType::F32 ? 1e-7 : 0.0) && worst_dot <= 1e-5;
  std::printf("%-6s g%-3d %-4s cols %4lld: dequantize max |d| %.2e, decode unit rel err %.2e  %s\n", dtype_name(t.type),
              group, dtype_name(ptype), static_cast<long long>(cols), worst_deq, worst_dot, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace laya::cuda

int main() {
  using laya::DType;
  std::mt19937 rng(5);
  int bad = 0;
  for (DType t : {DType::F32, DType::F16, DType::BF16})
    for (int64_t cols : {37, 96, 2048}) bad += laya::cuda::check(t, cols, rng);
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1})
    for (int64_t cols : {32, 288, 2048}) bad += laya::cuda::check(t, cols, rng);
  for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K})
    for (int64_t cols : {256, 512, 2048}) bad += laya::cuda::check(t, cols, rng);
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int group : {32, 64, 128})
      for (DType pt : {DType::F16, DType::BF16, DType::F32}) bad += laya::cuda::check_mlx(bits, group, pt, 384, rng);
  for (DType pt : {DType::F16, DType::BF16}) {  // rows of several 256-value stagings
    bad += laya::cuda::check_mlx(4, 64, pt, 2304, rng);
    bad += laya::cuda::check_mlx(8, 128, pt, 2304, rng);
  }
  std::printf(bad ? "%d FAILED\n" : "all ok\n", bad);
  return bad ? 1 : 0;
}
