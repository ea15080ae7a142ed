#include "core/foreground.h"

#include <atomic>
#include <condition_variable>
#include <mutex>

namespace laya::foreground {

namespace {
// seq_cst throughout: Scope's release reads g_waiters after its decrement
// and yield() checks g_held after its increment, so one of them sees the
// other (no lost wake-up; the timeout bounds any case anyway).
std::atomic<int> g_held{0};
std::atomic<int> g_waiters{0};
std::mutex g_mu;
std::condition_variable g_cv;
thread_local int t_held = 0;
}  // namespace

Scope::Scope() {
  ++t_held;
  g_held.fetch_add(1);
}

Scope::~Scope() {
  --t_held;
  if (g_held.fetch_sub(1) == 1 && g_waiters.load() > 0) {
    std::lock_guard<std::mutex> lock(g_mu);
    g_cv.notify_all();
  }
}

void yield(std::chrono::milliseconds max_wait) {
  if (g_held.load() == 0 || t_held > 0) return;
  g_waiters.fetch_add(1);
  {
    std::unique_lock<std::mutex> lock(g_mu);
    g_cv.wait_for(lock, max_wait, [] { return g_held.load() == 0; });
  }
  g_waiters.fetch_sub(1);
}

int held() { return g_held.load(); }

}  // namespace laya::foreground
