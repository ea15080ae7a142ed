// foreground::Scope / yield: background work waits while a keystroke's
// suggestion runs, never longer than its bound, and never for itself.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/foreground.h"

namespace laya {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// A Scope held on another thread (a keystroke being computed) until
// `release` is set; constructed once the scope is held.
struct OtherThreadsScope {
  std::atomic<bool> entered{false}, release{false};
  std::thread thread{[this] {
    const foreground::Scope busy;
    entered = true;
    while (!release) std::this_thread::sleep_for(milliseconds(1));
  }};
  OtherThreadsScope() {
    while (!entered) std::this_thread::yield();
  }
};

TEST(Foreground, YieldReturnsAtOnceWhenNothingRuns) {
  ASSERT_EQ(foreground::held(), 0);
  const auto t = Clock::now();
  for (int i = 0; i < 1000; ++i) foreground::yield(milliseconds(1000));
  EXPECT_LT(ms_since(t), 100.0);
}

TEST(Foreground, YieldWaitsForAnotherThreadsScopeToEnd) {
  OtherThreadsScope fg;
  std::thread releaser([&] {
    std::this_thread::sleep_for(milliseconds(50));
    fg.release = true;
  });
  const auto t = Clock::now();
  foreground::yield(milliseconds(10000));
  const double waited = ms_since(t);
  fg.thread.join();
  releaser.join();
  EXPECT_GE(waited, 40.0) << "yield did not wait for the keystroke";
  EXPECT_LT(waited, 5000.0) << "yield was not woken when the scope ended";
  EXPECT_EQ(foreground::held(), 0);
}

TEST(Foreground, YieldIsBoundedAndNeverWaitsForItsOwnScope) {
  OtherThreadsScope fg;
  auto t = Clock::now();
  foreground::yield(milliseconds(30));  // the other scope stays: the bound ends the wait
  EXPECT_GE(ms_since(t), 25.0);
  fg.release = true;
  fg.thread.join();
  {
    const foreground::Scope mine;
    t = Clock::now();
    foreground::yield(milliseconds(5000));  // only this thread's own scope is held
    EXPECT_LT(ms_since(t), 1000.0);
  }
}

}  // namespace
}  // namespace laya
