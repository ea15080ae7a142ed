// The machine's own latency jitter for a decode-shaped job: stream B bytes
// (split over T threads, joined by a barrier) N times back to back and report
// the percentiles of one pass, as `laya bench` does for a decode step. What
// laya's step jitter cannot go below on this machine.
//
//   build/bench/laya_jitter_probe --mb 525 --threads 2 --passes 1000
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

uint64_t sum_range(const uint64_t* p, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  for (size_t i = 0; i + 4 <= n; i += 4) {
    a += p[i];
    b += p[i + 1];
    c += p[i + 2];
    d += p[i + 3];
  }
  return a + b + c + d;
}

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  size_t mb = 525;
  int threads = 1, passes = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--mb") mb = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--passes") passes = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--mb 525] [--threads 1] [--passes 1000]\n", argv[0]);
      return 2;
    }
  }
  if (mb == 0 || threads < 1 || passes < 1) {
    std::fprintf(stderr, "laya_jitter_probe: --mb, --threads and --passes must be positive\n");
    return 2;
  }
  const size_t n = mb * (size_t{1} << 20) / sizeof(uint64_t);
  std::vector<uint64_t> buf(n, 1);
  std::atomic<int> gen{0}, done{0};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> sink{0};
  auto part = [&](int t) {
    const size_t b = n / static_cast<size_t>(threads) * static_cast<size_t>(t);
    const size_t e = t == threads - 1 ? n : n / static_cast<size_t>(threads) * static_cast<size_t>(t + 1);
    sink += sum_range(buf.data() + b, e - b);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) {
    pool.emplace_back([&, t] {
      int seen = 0;
      while (true) {
        int g;
        while ((g = gen.load(std::memory_order_acquire)) == seen) {
          if (stop.load()) return;
#if defined(__x86_64__)
          _mm_pause();
#endif
        }
        seen = g;
        part(t);
        done.fetch_add(1, std::memory_order_acq_rel);
      }
    });
  }
  std::vector<double> ms;
  for (int p = 0; p < passes + 8; ++p) {
    const auto t0 = std::chrono::steady_clock::now();
    done.store(0);
    gen.fetch_add(1, std::memory_order_acq_rel);
    part(0);
    while (done.load(std::memory_order_acquire) != threads - 1) {
#if defined(__x86_64__)
      _mm_pause();
#endif
    }
    if (p >= 8) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  stop = true;
  for (auto& t : pool) t.join();
  const double p50 = pct(ms, 0.5), p99 = pct(ms, 0.99);
  std::printf("{\"mb\": %zu, \"threads\": %d, \"passes\": %d, \"ms_p50\": %.4f, \"ms_p99\": %.4f, \"ms_p999\": %.4f, "
              "\"ms_max\": %.4f, \"p99_over_p50\": %.3f, \"gb_s_p50\": %.2f}\n",
              mb, threads, passes, p50, p99, pct(ms, 0.999), *std::max_element(ms.begin(), ms.end()), p99 / p50,
              static_cast<double>(n * sizeof(uint64_t)) / (p50 * 1e-3) / 1e9);
  return sink.load() == 42 ? 1 : 0;  // keep the sums
}
