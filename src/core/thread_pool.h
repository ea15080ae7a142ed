// Persistent worker pool. Threads are created once; a job is published by
// bumping a generation counter. No allocation per job.
//
// A job is split into size() chunks, and each thread (the caller included)
// claims chunks from one counter until none is left: the caller never waits
// for a worker that has not woken up yet, it runs that worker's chunk itself,
// and a worker that wakes late joins the next job. On a VM a sleeping core
// takes ~1-3 ms to wake (measured on the 2-core CI VM after a 120 ms pause:
// futex wake p50 0.96, p90 3.3 ms; 0.09 ms back to back), longer than a
// whole decode step; waiting for it made a keystroke after a pause slower on
// 2 threads than on 1. Chunk i is always run as fn(ctx, i, size()), so the
// split and every result are the same whichever thread runs it.
//
// Workers spin (pause) for `awake` after the last job or wake() before they
// sleep on a futex (C++20 atomic::wait): while a person types (keys 70-150
// ms apart) the cores stay awake; an idle engine uses no CPU once the window
// has passed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

#include "core/status.h"

namespace laya {

class ThreadPool {
 public:
  // The most threads a pool may have: 4 x the cores the OS reports, and never
  // more than 256 (256 when the OS reports none). More threads than cores is
  // allowed (to measure oversubscription, or where the OS under-reports), but
  // every job ends at a barrier the caller spins on: past the cores each
  // forward op waits for descheduled workers (2 busy cores: 8 threads decode
  // ~60x slower than 2, 128 threads ~800x: a "hang"), and each worker reserves
  // a stack (8 MiB) and the backend's per-thread scratch.
  static int max_threads();
  // n_threads as given by a caller (0: all cores): kInvalidArgument naming the
  // value and the bound when it is negative or above max_threads().
  static Status check_count(int n_threads);

  // n_threads includes the calling thread (n_threads - 1 workers are started).
  // Throws std::system_error when the OS refuses a thread (after stopping and
  // joining those already started), std::bad_alloc when memory runs out.
  //
  // `solo`: start in solo mode (set_solo) with no worker started yet; they
  // start at the first job run after set_solo(false), on the thread that runs
  // it. A model loaded for a hot swap is prepared this way, on the swapping
  // thread alone, while another engine serves keystrokes on all cores.
  //
  // `awake`: how long workers spin after their last job (or wake()) before
  // sleeping; 0 spins only briefly (~50 us, the gap between ops of a pass).
  explicit ThreadPool(int n_threads, bool solo = false,
                      std::chrono::microseconds awake = std::chrono::microseconds(0));
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads the pool has room for (per-thread scratch is sized by this).
  int size() const { return n_threads_; }
  // Threads a job run now is split over: size(), or 1 in solo mode.
  int active() const { return solo_.load(std::memory_order_acquire) ? 1 : n_threads_; }
  // Solo mode: jobs run on the calling thread alone, as fn(ctx, 0, 1), and
  // the workers sleep; each job first gives way to foreground work
  // (foreground::yield). For work done off the keystroke path (a model being
  // prepared for a swap) that must leave the cores to the engine serving.
  // If the workers cannot be started when solo mode ends, the pool stays solo.
  void set_solo(bool on) { solo_.store(on, std::memory_order_release); }
  bool solo() const { return solo_.load(std::memory_order_acquire); }

  // Runs fn(ctx, chunk, size()) for every chunk in [0, size()) (in solo
  // mode fn(ctx, 0, 1)) and returns when all have finished. Each chunk runs
  // on one thread, so per-chunk scratch indexed by `chunk` is never shared;
  // work splitting is the callee's job.
  using Fn = void (*)(void* ctx, int thread_index, int n_threads);
  void run(Fn fn, void* ctx);

  // Wakes sleeping workers (without a job) and restarts their awake window:
  // called when a keystroke arrives, so their wake-up overlaps the work done
  // before the first forward pass. Never blocks; cheap when they are awake.
  void wake();

  // Runs f(chunk, n_chunks) for every chunk (a lambda's captures
  // are the context; nothing is allocated).
  template <typename F>
  void run_each(F&& f) {
    run([](void* p, int ti, int nt) { (*static_cast<std::remove_reference_t<F>*>(p))(ti, nt); }, &f);
  }

 private:
  void worker_main(uint32_t seen);
  // Claims and runs chunks of the current job until none is left.
  void run_chunks();
  void start_workers();  // throws as the constructor does
  void stop_workers();

  int n_threads_;
  const int64_t awake_ns_;
  std::vector<std::thread> workers_;
  Fn fn_ = nullptr;
  void* ctx_ = nullptr;
  // Bumped to wake the workers: by each job and by wake().
  alignas(64) std::atomic<uint32_t> generation_{0};
  // The next chunk of the current job to claim (>= n_threads_: none left;
  // none before the first job, whatever a woken worker claims).
  alignas(64) std::atomic<uint32_t> next_chunk_{uint32_t{1} << 31};
  // Chunks of the current job finished; the job is done at n_threads_.
  alignas(64) std::atomic<int> done_chunks_{0};
  alignas(64) std::atomic<bool> stop_{false};
  std::atomic<bool> solo_{false};
};

}  // namespace laya
