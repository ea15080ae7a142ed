#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "core/cpu_relax.h"
#include "core/foreground.h"

namespace laya {

namespace {
// ~50-100 µs of spinning before sleeping: long enough to bridge the gap
// between the ops of one forward pass, short enough that idle means idle.
constexpr int kSpinIterations = 20000;
// In the awake window the clock is read, and the core offered to another
// runnable thread (the editor's, on a 2-core machine), every this many pauses.
constexpr int kCheckEvery = 256;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
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

ThreadPool::ThreadPool(int n_threads, bool solo, std::chrono::microseconds awake)
    : n_threads_(n_threads < 1 ? 1 : n_threads),
      awake_ns_(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(awake).count())),
      solo_(solo) {
  if (!solo) start_workers();
}

void ThreadPool::start_workers() {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  try {
    // A worker waits for the generation after the current one: the next job
    // is published (generation bumped) only after this returns.
    const uint32_t now = generation_.load(std::memory_order_acquire);
    for (int i = static_cast<int>(workers_.size()) + 1; i < n_threads_; ++i)
      workers_.emplace_back([this, now] { worker_main(now); });
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
  done_chunks_.store(0, std::memory_order_relaxed);
  next_chunk_.store(0, std::memory_order_release);  // publishes fn_, ctx_ and done_chunks_ to whoever claims
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  run_chunks();
  // Wait for chunks claimed by workers. They usually finish about when we
  // do, so spin; if a worker was descheduled (more runnable threads than
  // cores), yield the core to it instead of burning our time slice.
  int spins = 0;
  while (done_chunks_.load(std::memory_order_acquire) != n_threads_) {
    if (++spins < 4000) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::run_chunks() {
  const auto n = static_cast<uint32_t>(n_threads_);
  for (uint32_t c; (c = next_chunk_.fetch_add(1, std::memory_order_acq_rel)) < n;) {
    // Chunk c < n of the current job is claimed and not done, so the caller
    // is still waiting on this job: fn_ and ctx_ are this job's.
    fn_(ctx_, static_cast<int>(c), n_threads_);
    done_chunks_.fetch_add(1, std::memory_order_release);
  }
}

void ThreadPool::wake() {
  if (n_threads_ == 1 || solo()) return;
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
}

void ThreadPool::worker_main(uint32_t seen) {
  // `seen` is the generation when this worker was made; a job published
  // before the thread got scheduled must still be run, so do not re-read it.
  int64_t awake_until = now_ns() + awake_ns_;
  for (;;) {
    uint32_t g;
    int spins = 0;
    bool awake = awake_ns_ > 0;
    while ((g = generation_.load(std::memory_order_acquire)) == seen) {
      ++spins;
      if (spins >= kSpinIterations && spins % kCheckEvery == 0) {
        awake = awake && now_ns() < awake_until;
        if (!awake) {
          generation_.wait(seen, std::memory_order_acquire);
          continue;
        }
        std::this_thread::yield();  // a woken editor thread gets this core at once
      }
      cpu_relax();
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    run_chunks();  // nothing when this was a wake() or the caller took every chunk
    awake_until = now_ns() + awake_ns_;
  }
}

}  // namespace laya
