// Decode attention of one GQA group over n_kv cached positions (the step's
// cost that grows with the context). Shapes of the benchmark models:
// group 7 / hd 64 (qwen2.5-0.5b), group 4 / hd 64 (llama-3.2-1b), 2 / 128 (qwen3-0.6b).
// Run: build/bench/laya_bench --benchmark_filter=Attend
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/attention.h"
#include "core/fp16.h"

namespace {

using namespace laya::cpu;

enum class Cache { kF32, kF16, kQ8 };

void run(benchmark::State& st, int group, int64_t hd, int64_t n_kv, Cache cache, int64_t block_pos) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> q(static_cast<size_t>(group * hd)), kf(static_cast<size_t>(scores_stride(n_kv) * hd)), vf(kf.size());
  std::vector<uint16_t> k16(kf.size()), v16(kf.size());
  for (auto& x : q) x = nd(rng);
  for (size_t i = 0; i < kf.size(); ++i) {
    kf[i] = nd(rng);
    vf[i] = nd(rng);
    k16[i] = laya::f32_to_fp16(kf[i]);
    v16[i] = laya::f32_to_fp16(vf[i]);
  }
  const int64_t slots = scores_stride(n_kv);
  std::vector<uint8_t> k8(static_cast<size_t>(slots / kKvBlock) * q8_k_block_bytes(hd)), v8(static_cast<size_t>(slots) * q8_v_row_bytes(hd));
  for (int64_t j = 0; j < n_kv; ++j) {
    q8_store_k(k8.data(), j, kf.data() + j * hd, hd);
    q8_store_v(v8.data(), j, vf.data() + j * hd, hd);
  }
  std::vector<float> scores(static_cast<size_t>(group * scores_stride(n_kv))), out(q.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const laya::DType type = cache == Cache::kQ8 ? laya::DType::Q8_0 : cache == Cache::kF16 ? laya::DType::F16 : laya::DType::F32;
  const AttendGroupFn f = attend_group_for(type, group, hd);
  const void* k = cache == Cache::kQ8 ? static_cast<const void*>(k8.data()) : cache == Cache::kF16 ? static_cast<const void*>(k16.data()) : kf.data();
  const void* v = cache == Cache::kQ8 ? static_cast<const void*>(v8.data()) : cache == Cache::kF16 ? static_cast<const void*>(v16.data()) : vf.data();
  // block_pos > 0: the same slices walked as pool blocks of block_pos
  // positions (ids in order; K and V take the same bytes per position).
  KvHeadBlocks kv = KvHeadBlocks::contiguous(k, v);
  std::vector<int32_t> ids(static_cast<size_t>(slots));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  if (block_pos > 0) {
    const size_t per_pos = cache == Cache::kQ8 ? q8_v_row_bytes(hd) : static_cast<size_t>(hd) * (cache == Cache::kF16 ? 2 : 4);
    kv = KvHeadBlocks{static_cast<const uint8_t*>(k), static_cast<const uint8_t*>(v), ids.data(),
                      per_pos * static_cast<size_t>(block_pos), block_pos};
  }
  for (auto _ : st) {
    f(q.data(), group, hd, kv, n_kv, {scale}, scores.data(), out.data());
    benchmark::DoNotOptimize(out.data());
  }
  st.SetItemsProcessed(st.iterations() * n_kv);  // items = cached positions
  const double bytes_per_value = cache == Cache::kQ8 ? 1.125 : cache == Cache::kF16 ? 2 : 4;
  st.SetBytesProcessed(static_cast<int64_t>(static_cast<double>(st.iterations() * n_kv * hd * 2) * bytes_per_value));
}

const int kRegistered = [] {
  struct Shape {
    int group;
    int64_t hd;
  };
  for (Shape s : {Shape{7, 64}, Shape{4, 64}, Shape{2, 128}}) {
    for (Cache c : {Cache::kF32, Cache::kF16, Cache::kQ8}) {
      for (int64_t n_kv : {256, 1024}) {
        for (int64_t bp : {0, 64}) {
          const char* cn = c == Cache::kF32 ? "/f32/" : c == Cache::kF16 ? "/f16/" : "/q8_0/";
          const std::string name = "Attend/g" + std::to_string(s.group) + "_hd" + std::to_string(s.hd) + cn +
                                   std::to_string(n_kv) + (bp ? "/blocks" + std::to_string(bp) : "/flat");
          benchmark::RegisterBenchmark(name.c_str(), [s, n_kv, c, bp](benchmark::State& st) { run(st, s.group, s.hd, n_kv, c, bp); });
        }
      }
    }
  }
  return 0;
}();

}  // namespace
