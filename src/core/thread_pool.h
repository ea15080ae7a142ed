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

namespace laya {

class ThreadPool {
 public:
  // n_threads includes the calling thread (n_threads - 1 workers are started).
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

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
  void worker_main(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  Fn fn_ = nullptr;
  void* ctx_ = nullptr;
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};
  alignas(64) std::atomic<bool> stop_{false};
};

}  // namespace laya
