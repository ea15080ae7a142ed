#include "core/thread_pool.h"

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

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run(Fn fn, void* ctx) {
  if (n_threads_ == 1) {
    fn(ctx, 0, 1);
    return;
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

void ThreadPool::worker_main(int index) {
  // Generation 0 is the state at construction; a job published before this
  // thread got scheduled must still be run, so do not re-read it here.
  uint32_t seen = 0;
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
