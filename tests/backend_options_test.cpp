// BackendOptions' per-backend settings: the CUDA backend's tuning (parsed in
// every build, so checked here without a GPU) and the CPU backend's
// instruction set, each held by the backend made with it.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/kernels.h"
#include "core/tensor.h"

namespace laya {
namespace {

CudaTuning parse(const std::map<std::string, std::string>& env) {
  return CudaTuning::parse([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(BackendOptions, CudaTuningWithoutVariablesIsTheDefault) {
  const CudaTuning d;
  EXPECT_EQ(parse({}), d);
  EXPECT_TRUE(d.graphs && d.pinned && d.chained && d.stream && d.stream_deep);
  EXPECT_FALSE(d.persistent);
  EXPECT_FALSE(d.prefetch);
  EXPECT_EQ(d.attn_split, 0);
  EXPECT_EQ(d.rows_per_warp, 0);
  EXPECT_EQ(d.stream_blocks, 0);
}

TEST(BackendOptions, CudaTuningSwitchesTurnOffOnlyAtZero) {
  const std::pair<const char*, bool CudaTuning::*> switches[] = {
      {"LAYA_CUDA_GRAPHS", &CudaTuning::graphs}, {"LAYA_CUDA_PINNED", &CudaTuning::pinned},
      {"LAYA_CUDA_PDL", &CudaTuning::chained},   {"LAYA_CUDA_STREAM", &CudaTuning::stream},
      {"LAYA_CUDA_STREAM_DEEP", &CudaTuning::stream_deep}};
  for (const auto& [name, field] : switches) {
    EXPECT_FALSE(parse({{name, "0"}}).*field) << name;
    EXPECT_TRUE(parse({{name, "1"}}).*field) << name;
    EXPECT_TRUE(parse({{name, ""}}).*field) << name;
    CudaTuning want;
    want.*field = false;
    EXPECT_EQ(parse({{name, "0"}}), want) << name << " changes nothing else";
  }
  EXPECT_TRUE(parse({{"LAYA_CUDA_PREFETCH", "1"}}).prefetch);
  EXPECT_TRUE(parse({{"LAYA_CUDA_PERSISTENT", "1"}}).persistent);
  EXPECT_FALSE(parse({{"LAYA_CUDA_PERSISTENT", "yes"}}).persistent);
  EXPECT_TRUE(parse({{"LAYA_CUDA_PERSISTENT_PROFILE", "1"}}).persistent_profile);
  EXPECT_FALSE(parse({{"LAYA_CUDA_PERSISTENT_PROFILE", "0"}}).persistent_profile);
  EXPECT_EQ(parse({{"LAYA_CUDA_PERSISTENT_PREFETCH", "2"}}).persistent_prefetch, 2);
  EXPECT_EQ(parse({{"LAYA_CUDA_PERSISTENT_PREFETCH", "0"}}).persistent_prefetch, 0);
  EXPECT_EQ(parse({{"LAYA_CUDA_PERSISTENT_PREFETCH", "1"}}).persistent_prefetch, 1);
  EXPECT_EQ(parse({{"LAYA_CUDA_PERSISTENT_PREFETCH", "3"}}).persistent_prefetch, 0);
  EXPECT_FALSE(parse({{"LAYA_CUDA_PREFETCH", "yes"}}).prefetch);
}

TEST(BackendOptions, CudaTuningNumbersOutOfRangeKeepTheDefault) {
  EXPECT_EQ(parse({{"LAYA_CUDA_ATTN_SPLIT", "8"}}).attn_split, 8);
  EXPECT_EQ(parse({{"LAYA_CUDA_ATTN_SPLIT", "32"}}).attn_split, 32);
  for (const char* bad : {"0", "33", "-1", "4x", ""})
    EXPECT_EQ(parse({{"LAYA_CUDA_ATTN_SPLIT", bad}}).attn_split, 0) << bad;
  EXPECT_EQ(parse({{"LAYA_CUDA_RPW", "3"}}).rows_per_warp, 3);
  for (const char* bad : {"0", "5", "34", "2 ", ""}) EXPECT_EQ(parse({{"LAYA_CUDA_RPW", bad}}).rows_per_warp, 0) << bad;
  // The blocks per SM are clamped, as the GPU sweeps have always set them.
  EXPECT_EQ(parse({{"LAYA_CUDA_STREAM_BLOCKS", "4"}}).stream_blocks, 4);
  EXPECT_EQ(parse({{"LAYA_CUDA_STREAM_BLOCKS", "99"}}).stream_blocks, 32);
  EXPECT_EQ(parse({{"LAYA_CUDA_STREAM_BLOCKS", "-3"}}).stream_blocks, 0);
}

TEST(BackendOptions, CpuIsaUnknownOrMissingIsRefused) {
  const ForwardLimits lim{.max_cols = 64, .max_ctx = 64, .max_group = 1, .max_batch = 4};
  BackendOptions o;
  o.n_threads = 1;
  o.lock_memory = false;
  o.isa = "sse9";
  auto r = make_backend("cpu", o, lim);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().message();
  for (cpu::Isa isa : {cpu::Isa::kScalar, cpu::Isa::kAvx2, cpu::Isa::kAvx512, cpu::Isa::kNeon}) {
    o.isa = cpu::isa_name(isa);
    auto b = make_backend("cpu", o, lim);
    EXPECT_EQ(b.ok(), cpu::isa_supported(isa)) << o.isa;
    if (!b.ok()) {
      EXPECT_EQ(b.status().code(), StatusCode::kUnsupported) << b.status().message();
    }
  }
}

// y = x · wᵀ of one token on backend `be`.
std::vector<float> matvec_on(Backend& be, const Tensor& w, const std::vector<float>& x) {
  const size_t rows = static_cast<size_t>(w.rows());
  auto xb = be.alloc(x.size() * sizeof(float), "x");
  auto yb = be.alloc(rows * sizeof(float), "y");
  EXPECT_TRUE(xb.ok() && yb.ok());
  EXPECT_TRUE(be.upload(xb->data(), x.data(), x.size() * sizeof(float)).ok());
  EXPECT_TRUE(be.matmul(w, xb->as<const float>(), 1, yb->as<float>()).ok());
  std::vector<float> y(rows);
  EXPECT_TRUE(be.download(y.data(), yb->data(), rows * sizeof(float)).ok());
  return y;
}

// Two CPU backends of one process with different instruction sets: each
// computes with its own kernels, whichever was made last.
TEST(BackendOptions, CpuIsaIsPerBackend) {
  const int64_t rows = 8, cols = 64;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> wdata(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(cols));
  for (float& v : wdata) v = u(rng);
  for (float& v : x) v = u(rng);
  Tensor w;
  w.name = "w";
  w.type = DType::F32;
  w.n_dims = 2;
  w.ne[0] = cols;
  w.ne[1] = rows;
  w.data = reinterpret_cast<const uint8_t*>(wdata.data());
  w.nbytes = wdata.size() * sizeof(float);
  auto expect = [&](cpu::Isa isa) {
    std::vector<float> y(static_cast<size_t>(rows));
    const cpu::DotRowFn dot = cpu::kernels_for(isa)->dot_row[static_cast<uint32_t>(DType::F32)];
    for (int64_t r = 0; r < rows; ++r) y[static_cast<size_t>(r)] = dot(w.row(r), x.data(), cols);
    return y;
  };
  const ForwardLimits lim{.max_cols = cols, .max_ctx = 64, .max_group = 1, .max_batch = 4};
  BackendOptions o;
  o.n_threads = 1;
  o.lock_memory = false;
  auto best = make_backend("cpu", o, lim);  // LAYA_ISA's, else the best this CPU has
  ASSERT_TRUE(best.ok()) << best.status().message();
  o.isa = "scalar";
  auto scalar = make_backend("cpu", o, lim);
  ASSERT_TRUE(scalar.ok()) << scalar.status().message();
  EXPECT_EQ(matvec_on(**scalar, w, x), expect(cpu::Isa::kScalar));
  EXPECT_EQ(matvec_on(**best, w, x), expect(cpu::active_isa()));
}

}  // namespace
}  // namespace laya
