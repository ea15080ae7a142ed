#include "core/thread_pool.h"

#include <algorithm>

#include "core/foreground.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LAYA_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define LAYA_PAUSE() __asm__ __volatile__("yield")
#else
#define LAYA_PAUSE() ((void)0)
#endif

namespace laya {

namespace {
// ~50-100 µs of spinning before sleeping: long enough to bridge the gap
// between the ops of one forward pass, short enough that idle means idle.
constexpr int kSpinIterations = 20000;
}  // namespace

int ThreadPool::max_threads() {
  constexpr unsigned kCeiling = 256;
  const unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(hw == 0 ? kCeiling : std::min(4 * hw, kCeiling));
}

Status ThreadPool::check_count(int n_threads) {
  const int bound = max_threads();
  if (n_threads >= 0 && n_threads <= bound) return Status::Ok();
  return Status(StatusCode::kInvalidArgument,
                fmt::format("n_threads = {}: must be 0 (all cores) or 1 to {} (4 x the {} cores this machine reports, at "
                            "most 256: more threads than that only slow the work down)",
                            n_threads, bound, std::thread::hardware_concurrency()));
}

ThreadPool::ThreadPool(int n_threads, bool solo) : n_threads_(n_threads < 1 ? 1 : n_threads), solo_(solo) {
  if (!solo) start_workers();
}

void ThreadPool::start_workers() {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  try {
    // A worker waits for the generation after the current one: the next job
    // is published (generation bumped) only after this returns.
    const uint32_t now = generation_.load(std::memory_order_acquire);
    for (int i = static_cast<int>(workers_.size()) + 1; i < n_threads_; ++i)
      workers_.emplace_back([this, i, now] { worker_main(i, now); });
  } catch (...) {
    // A joinable std::thread destroyed by the unwinding would terminate the
    // process: stop and join the workers started so far, then report.
    stop_workers();
    throw;
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

void ThreadPool::run(Fn fn, void* ctx) {
  if (solo_.load(std::memory_order_acquire)) {
    foreground::yield();  // background work: not while a keystroke computes
    fn(ctx, 0, 1);
    return;
  }
  if (n_threads_ == 1) {
    fn(ctx, 0, 1);
    return;
  }
  if (static_cast<int>(workers_.size()) != n_threads_ - 1) {
    // Started solo: the workers start now, on the thread that runs the first
    // full job (a keystroke's, at normal priority). Refused: stay solo.
    try {
      start_workers();
    } catch (...) {
      stop_.store(false, std::memory_order_release);  // stop_workers set it; the pool lives on, solo
      solo_.store(true, std::memory_order_release);
      fn(ctx, 0, 1);
      return;
    }
  }
  fn_ = fn;
  ctx_ = ctx;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  fn(ctx, 0, n_threads_);
  // Wait for the workers. They usually finish about when we do, so spin; if a
  // worker was descheduled (more runnable threads than cores), yield the core
  // to it instead of burning our time slice.
  int spins = 0;
  while (pending_.load(std::memory_order_acquire) != 0) {
    if (++spins < 4000) {
      LAYA_PAUSE();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::worker_main(int index, uint32_t seen) {
  // `seen` is the generation when this worker was made; a job published
  // before the thread got scheduled must still be run, so do not re-read it.
  for (;;) {
    uint32_t g;
    int spins = 0;
    while ((g = generation_.load(std::memory_order_acquire)) == seen) {
      if (++spins < kSpinIterations) {
        LAYA_PAUSE();
      } else {
        generation_.wait(seen, std::memory_order_acquire);
      }
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    fn_(ctx_, index, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace laya
