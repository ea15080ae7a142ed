// ThreadPool: every chunk of a job runs exactly once, as fn(ctx, chunk,
// size()), whichever thread claims it; wake() and the awake window change
// when workers sleep, never what a job computes.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

namespace laya {
namespace {

constexpr int kMaxChunks = 8;

struct ChunkLog {
  std::array<std::atomic<int>, kMaxChunks> runs{};
  std::atomic<int> bad_n{0};
  void reset() {
    for (auto& r : runs) r.store(0);
    bad_n.store(0);
  }
};

// Runs `jobs` jobs and checks after each that chunks 0..size()-1 ran once.
void expect_each_chunk_once(ThreadPool& pool, int jobs, const std::function<void()>& between = {}) {
  ChunkLog log;
  const int n = pool.active();
  for (int j = 0; j < jobs; ++j) {
    log.reset();
    pool.run_each([&](int chunk, int nt) {
      if (nt != n || chunk < 0 || chunk >= nt) log.bad_n.fetch_add(1);
      else log.runs[static_cast<size_t>(chunk)].fetch_add(1);
    });
    ASSERT_EQ(log.bad_n.load(), 0) << "job " << j;
    for (int c = 0; c < n; ++c) ASSERT_EQ(log.runs[static_cast<size_t>(c)].load(), 1) << "job " << j << " chunk " << c;
    for (int c = n; c < kMaxChunks; ++c) ASSERT_EQ(log.runs[static_cast<size_t>(c)].load(), 0);
    if (between) between();
  }
}

TEST(ThreadPool, EveryChunkRunsOnceBackToBack) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    expect_each_chunk_once(pool, 2000);
  }
}

TEST(ThreadPool, EveryChunkRunsOnceAfterWorkersSlept) {
  // Pauses past the short spin: workers are asleep (or waking) when the next
  // job comes, and the caller may take their chunks.
  ThreadPool pool(3);
  expect_each_chunk_once(pool, 30, [] { std::this_thread::sleep_for(std::chrono::milliseconds(3)); });
}

TEST(ThreadPool, AwakeWindowAndWakeChangeNothingComputed) {
  ThreadPool pool(3, false, std::chrono::milliseconds(20));
  std::atomic<bool> stop{false};
  // wake() from another thread at any moment, as an editor's input thread does.
  std::thread waker([&] {
    while (!stop.load()) {
      pool.wake();
      std::this_thread::yield();
    }
  });
  expect_each_chunk_once(pool, 3000);
  expect_each_chunk_once(pool, 10, [] { std::this_thread::sleep_for(std::chrono::milliseconds(30)); });
  stop.store(true);
  waker.join();
}

TEST(ThreadPool, WakeBeforeAnyJobRunsNothing) {
  // A woken worker claims from the job counter: before the first job (and
  // between jobs) there must be nothing to claim.
  ThreadPool pool(4);
  for (int i = 0; i < 50; ++i) pool.wake();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  expect_each_chunk_once(pool, 5, [&] {
    pool.wake();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  });
}

TEST(ThreadPool, ChunkSplitDoesNotDependOnWhoRunsIt) {
  // Each chunk writes its own slice: the result is the same every time,
  // whichever thread ran which chunk.
  ThreadPool pool(4);
  std::vector<int> out(1000), want(1000);
  for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<int>(i * 7 % 13);
  for (int j = 0; j < 500; ++j) {
    std::fill(out.begin(), out.end(), -1);
    pool.run_each([&](int chunk, int nt) {
      const size_t b = out.size() * static_cast<size_t>(chunk) / static_cast<size_t>(nt);
      const size_t e = out.size() * static_cast<size_t>(chunk + 1) / static_cast<size_t>(nt);
      for (size_t i = b; i < e; ++i) out[i] = static_cast<int>(i * 7 % 13);
    });
    ASSERT_EQ(out, want) << "job " << j;
  }
}

TEST(ThreadPool, SoloRunsOneChunkOnTheCaller) {
  ThreadPool pool(4, /*solo=*/true);
  const auto caller = std::this_thread::get_id();
  int calls = 0;
  pool.run_each([&](int chunk, int nt) {
    EXPECT_EQ(chunk, 0);
    EXPECT_EQ(nt, 1);
    EXPECT_EQ(std::this_thread::get_id(), caller);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
  pool.wake();  // a no-op in solo mode
  pool.set_solo(false);  // the workers start at the next job
  expect_each_chunk_once(pool, 200);
}

}  // namespace
}  // namespace laya
