// Memory read bandwidth of this machine, the bound for batch-1 decode:
// every thread streams its own 256 MiB buffer (far larger than the caches)
// with 32-byte loads. Run: build/bench/laya_bench --benchmark_filter=MemoryRead
#include <benchmark/benchmark.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr size_t kBytes = size_t{256} << 20;

#if defined(__x86_64__)
// Sum of the buffer with four independent 256-bit accumulators.
__attribute__((target("avx2"))) uint64_t sum_avx2(const uint64_t* buf, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  for (size_t i = 0; i < n; i += 16) {
    a = _mm256_add_epi64(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(buf + i)));
    b = _mm256_add_epi64(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(buf + i + 4)));
    c = _mm256_add_epi64(c, _mm256_load_si256(reinterpret_cast<const __m256i*>(buf + i + 8)));
    d = _mm256_add_epi64(d, _mm256_load_si256(reinterpret_cast<const __m256i*>(buf + i + 12)));
  }
  a = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
  alignas(32) uint64_t r[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(r), a);
  return r[0] + r[1] + r[2] + r[3];
}
#endif

void MemoryRead(benchmark::State& state) {
  // One buffer per thread, touched once before timing.
  auto* buf = static_cast<uint64_t*>(std::aligned_alloc(64, kBytes));
  std::memset(buf, 1, kBytes);
  const size_t n = kBytes / sizeof(uint64_t);
#if defined(__x86_64__)
  const bool avx2 = __builtin_cpu_supports("avx2");
#else
  const bool avx2 = false;
#endif
  for (auto _ : state) {
    uint64_t s = 0;
#if defined(__x86_64__)
    if (avx2) s = sum_avx2(buf, n);
#endif
    if (!avx2)
      for (size_t i = 0; i < n; ++i) s += buf[i];
    benchmark::DoNotOptimize(s);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBytes));
  std::free(buf);
}
BENCHMARK(MemoryRead)->Threads(1)->Threads(2)->UseRealTime()->MinTime(1.0);

}  // namespace
