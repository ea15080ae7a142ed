// What a pause between keystrokes costs the machine itself, before any laya
// code: after sleeping --gap-ms, how long does it take to
//   wake      hand a job to a worker thread that waits (futex, spin, or
//             sleep-polling: --wait futex|spin|poll) until it runs,
//   compute   run a fixed arithmetic loop (clock / frequency ramp-up),
//   stream    read --mb of memory once (caches and TLB gone cold),
// each against the same thing done again at once (warm). Percentiles over
// --reps pauses, and the CPU the process used per second of wall time (what
// a waiting strategy costs).
//
//   build/bench/laya_wake_probe --gap-ms 120 --reps 200 --mb 22 --wait futex
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#define PROBE_PAUSE() _mm_pause()
#else
#define PROBE_PAUSE() ((void)0)
#endif

namespace {

using Clock = std::chrono::steady_clock;

double ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

double cpu_seconds() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

volatile uint64_t g_sink;

uint64_t compute(int n) {
  uint64_t x = 1;
  for (int i = 0; i < n; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  return x;
}

uint64_t stream(const std::vector<uint64_t>& buf) {
  uint64_t a = 0;
  for (size_t i = 0; i < buf.size(); i += 8) a += buf[i];  // one read per 64-byte line
  return a;
}

void print(const char* name, const std::vector<double>& v) {
  std::printf("  %-14s p50 %7.3f  p90 %7.3f  p99 %7.3f  max %7.3f ms\n", name, pct(v, .5), pct(v, .9), pct(v, .99),
              pct(v, 1));
}

}  // namespace

int main(int argc, char** argv) {
  int gap_ms = 120, reps = 200;
  size_t mb = 22;
  std::string wait = "futex";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--gap-ms") gap_ms = std::atoi(argv[i + 1]);
    else if (a == "--reps") reps = std::atoi(argv[i + 1]);
    else if (a == "--mb") mb = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--wait") wait = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: %s [--gap-ms 120] [--reps 200] [--mb 22] [--wait futex|spin|poll]\n", argv[0]);
      return 2;
    }
  }
  if (gap_ms < 0 || reps < 2 || mb == 0 || (wait != "futex" && wait != "spin" && wait != "poll")) {
    std::fprintf(stderr, "laya_wake_probe: --gap-ms >= 0, --reps >= 2, --mb >= 1, --wait futex|spin|poll\n");
    return 2;
  }
  std::vector<uint64_t> buf(mb * (size_t{1} << 20) / sizeof(uint64_t), 1);
  std::atomic<uint32_t> gen{0};
  std::atomic<bool> ran{false}, stop{false};
  Clock::time_point woke;
  std::thread worker([&] {
    uint32_t seen = 0;
    for (;;) {
      uint32_t g;
      while ((g = gen.load()) == seen) {
        if (wait == "futex") gen.wait(seen);
        else if (wait == "spin") PROBE_PAUSE();
        else std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      seen = g;
      woke = Clock::now();
      if (stop.load()) return;
      ran.store(true);
    }
  });
  std::vector<double> wake, comp_cold, comp_warm, str_cold, str_warm;
  const double cpu0 = cpu_seconds();
  const auto t_start = Clock::now();
  for (int r = 0; r < reps; ++r) {
    std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
    const auto t0 = Clock::now();
    ran.store(false);
    gen.fetch_add(1);
    gen.notify_all();
    while (!ran.load()) PROBE_PAUSE();
    wake.push_back(ms(t0, woke));
    const auto c0 = Clock::now();
    g_sink = compute(1000000);
    const auto c1 = Clock::now();
    g_sink = compute(1000000);
    const auto c2 = Clock::now();
    g_sink = stream(buf);
    const auto s1 = Clock::now();
    g_sink = stream(buf);
    const auto s2 = Clock::now();
    comp_cold.push_back(ms(c0, c1));
    comp_warm.push_back(ms(c1, c2));
    str_cold.push_back(ms(c2, s1));
    str_warm.push_back(ms(s1, s2));
  }
  const double wall = ms(t_start, Clock::now()) / 1e3, cpu = cpu_seconds() - cpu0;
  stop.store(true);
  gen.fetch_add(1);
  gen.notify_all();
  worker.join();
  std::printf("after a %d ms pause (%d pauses), worker waits by %s; %zu MB streamed\n", gap_ms, reps, wait.c_str(), mb);
  print("wake", wake);
  print("compute, first", comp_cold);
  print("compute, again", comp_warm);
  print("stream, first", str_cold);
  print("stream, again", str_warm);
  std::printf("  CPU used: %.2f cores (process CPU time / wall time)\n", cpu / wall);
  return 0;
}
