// Persistent worker pool. Threads are created once; a job is published by
// bumping a generation counter. Workers spin briefly on it (a keystroke's
// decode steps arrive back to back) and then sleep on a futex (C++20
// atomic::wait), so an idle engine uses no CPU. No allocation per job.
#pragma once

#include <atomic>
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
  explicit ThreadPool(int n_threads, bool solo = false);
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

  // Runs fn(ctx, thread_index, n_threads) on every thread (caller is index 0)
  // and returns when all have finished. Work splitting is the callee's job.
  using Fn = void (*)(void* ctx, int thread_index, int n_threads);
  void run(Fn fn, void* ctx);

  // Runs f(thread_index, n_threads) on every thread (a lambda's captures
  // are the context; nothing is allocated).
  template <typename F>
  void run_each(F&& f) {
    run([](void* p, int ti, int nt) { (*static_cast<std::remove_reference_t<F>*>(p))(ti, nt); }, &f);
  }

 private:
  void worker_main(int index, uint32_t seen);
  void start_workers();  // throws as the constructor does
  void stop_workers();

  int n_threads_;
  std::vector<std::thread> workers_;
  Fn fn_ = nullptr;
  void* ctx_ = nullptr;
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};
  alignas(64) std::atomic<bool> stop_{false};
  std::atomic<bool> solo_{false};
};

}  // namespace laya
