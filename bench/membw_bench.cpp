// Memory read bandwidth of this machine, the bound for batch-1 decode:
// every thread streams its own 256 MiB buffer (far larger than the caches)
// with 32-byte loads. Run: build/bench/laya_bench --benchmark_filter=MemoryRead
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr size_t kBytes = size_t{256} << 20;

void MemoryRead(benchmark::State& state) {
  // One buffer per thread, touched once before timing.
  auto* buf = static_cast<uint64_t*>(std::aligned_alloc(64, kBytes));
  std::memset(buf, 1, kBytes);
  const size_t n = kBytes / sizeof(uint64_t);
  for (auto _ : state) {
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i < n; i += 4) {
      a += buf[i];
      b += buf[i + 1];
      c += buf[i + 2];
      d += buf[i + 3];
    }
    benchmark::DoNotOptimize(a + b + c + d);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBytes));
  std::free(buf);
}
BENCHMARK(MemoryRead)->Threads(1)->Threads(2)->UseRealTime()->MinTime(1.0);

}  // namespace
