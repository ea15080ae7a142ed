// dot_row throughput per type and ISA: one row of 4096 (weights in L1/L2) and
// a 1024 x 4096 matrix-vector product (weights from L3/DRAM). bytes_per_second
// counts weight bytes.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kernels.h"
#include "core/dtype.h"
#include "core/fp16.h"

namespace {

using laya::DType;
using namespace laya::cpu;

// Random bytes with every fp16 scale field replaced by a sane value.
std::vector<uint8_t> make_weights(DType t, int64_t n, int64_t rows) {
  const size_t rb = laya::row_bytes(t, n);
  std::vector<uint8_t> w(rb * rows);
  std::mt19937 rng(42);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  const auto& info = laya::dtype_info(t);
  const uint16_t scale = laya::f32_to_fp16(0.01f);
  const size_t nblocks = w.size() / info.block_bytes;
  for (size_t i = 0; i < nblocks; ++i) {
    uint8_t* blk = w.data() + i * info.block_bytes;
    switch (t) {
      case DType::F32: {
        const float v = 0.001f * static_cast<float>(i % 1000);
        std::memcpy(blk, &v, 4);
        break;
      }
      case DType::F16: std::memcpy(blk, &scale, 2); break;
      case DType::BF16: {
        const uint16_t v = laya::f32_to_bf16(0.01f);
        std::memcpy(blk, &v, 2);
        break;
      }
      case DType::Q6_K: std::memcpy(blk + 208, &scale, 2); break;
      case DType::Q4_1: case DType::Q5_1: case DType::Q4_K: case DType::Q5_K:
        std::memcpy(blk, &scale, 2);
        std::memcpy(blk + 2, &scale, 2);
        break;
      default: std::memcpy(blk, &scale, 2); break;
    }
  }
  return w;
}

void bench_dot(benchmark::State& state, const KernelTable* tab, DType t, int64_t rows) {
  const int64_t n = 4096;
  const auto w = make_weights(t, n, rows);
  std::vector<float> x(n), y(rows);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : x) v = u(rng);
  const size_t rb = laya::row_bytes(t, n);
  const DotRowFn fn = tab->dot_row[static_cast<uint32_t>(t)];
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; ++r) y[r] = fn(w.data() + r * rb, x.data(), n);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(rb) * rows);
}

// MLX affine rows (bits 4 and 8, groups of 64, BF16 scales): the same
// shapes; bytes_per_second counts the packed values and the scales and biases.
void bench_affine(benchmark::State& state, const KernelTable* tab, int bits, int64_t rows) {
  const int64_t n = 4096, group = 64, per_row_params = n / group;
  std::vector<uint8_t> q(static_cast<size_t>(rows * n * bits / 8));
  std::mt19937 rng(42);
  for (auto& b : q) b = static_cast<uint8_t>(rng());
  std::vector<uint16_t> scales(static_cast<size_t>(rows * per_row_params), laya::f32_to_bf16(0.01f));
  std::vector<uint16_t> biases(scales.size(), laya::f32_to_bf16(-0.08f));
  std::vector<float> x(n), x4(n), sum32(n / 32), y(rows);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : x) v = u(rng);
  affine_prepare(x.data(), n, x4.data(), sum32.data());
  const AffineX ax{x.data(), x4.data(), sum32.data()};
  const AffineDotFn fn = tab->affine_dot[bits];
  for (auto _ : state) {
    for (int64_t r = 0; r < rows; ++r) {
      const AffineRow row{q.data() + r * n * bits / 8, scales.data() + r * per_row_params,
                          biases.data() + r * per_row_params, DType::BF16, static_cast<int32_t>(group)};
      y[static_cast<size_t>(r)] = fn(row, ax, n);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * rows * (n * bits / 8 + 4 * per_row_params));
}

const int kRegisteredAffine = [] {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    const KernelTable* tab = kernels_for(isa);
    if (tab == nullptr) continue;
    for (int bits : {4, 8})
      for (int64_t rows : {int64_t{1}, int64_t{1024}}) {
        const std::string name = std::string("affine_dot/MLX_Q") + std::to_string(bits) + "/" + isa_name(isa) +
                                 (rows == 1 ? "/n4096" : "/matvec1024x4096");
        benchmark::RegisterBenchmark(name.c_str(), [tab, bits, rows](benchmark::State& s) {
          bench_affine(s, tab, bits, rows);
        });
      }
  }
  return 0;
}();

const int kRegistered = [] {
  const DType types[] = {DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::F16, DType::BF16, DType::F32,
                         DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q5_K};
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    const KernelTable* tab = kernels_for(isa);
    if (tab == nullptr) continue;
    for (DType t : types) {
      for (int64_t rows : {int64_t{1}, int64_t{1024}}) {
        const std::string name = std::string("dot_row/") + laya::dtype_name(t) + "/" + isa_name(isa) +
                                 (rows == 1 ? "/n4096" : "/matvec1024x4096");
        benchmark::RegisterBenchmark(name.c_str(), [tab, t, rows](benchmark::State& s) {
          bench_dot(s, tab, t, rows);
        });
      }
    }
  }
  return 0;
}();

}  // namespace
