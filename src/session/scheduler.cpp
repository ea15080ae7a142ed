#include "session/scheduler.h"

#include <utility>

#ifdef __linux__
#include <pthread.h>
#endif

#include "core/cpu_relax.h"

namespace laya {

const char* to_string(SuggestOutcome o) {
  switch (o) {
    case SuggestOutcome::kDone: return "done";
    case SuggestOutcome::kCancelled: return "cancelled";
    case SuggestOutcome::kDropped: return "dropped";
    case SuggestOutcome::kError: return "error";
  }
  return "?";
}

SuggestScheduler::SuggestScheduler(const SchedulerOptions& opt) : opt_(opt) {
  pending_.reserve(8);
  piece_fn_ = [this](std::string_view piece) {
    // Pieces of a request made stale (its session cancelled since the
    // submit) are not passed on; suggest stops at its next check.
    if (running_.cb.on_piece && !running_.stale()) running_.cb.on_piece(running_.ticket, piece);
  };
  worker_ = std::thread([this] { worker_loop(); });
#ifdef __linux__
  pthread_setname_np(worker_.native_handle(), "laya-suggest");  // for profilers and debuggers
#endif
}

SuggestScheduler::~SuggestScheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cancel_running_locked();
    cancel_extending_locked();
  }
  poked_.store(true, std::memory_order_release);
  work_cv_.notify_all();
  idle_cv_.notify_all();
  drop_all_pending();  // before the join: a waiter learns at once, not after the running request
  worker_.join();
  drop_all_pending();  // what a callback (an on_done on the worker, or a drop) submitted after stop_
}

void SuggestScheduler::drop_all_pending() {
  for (;;) {
    Request dropped;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!take_pending_locked(dropped)) return;
    }
    drop(dropped);
  }
}

bool SuggestScheduler::take_pending_locked(Request& out, const Session* s) {
  auto it = pending_.begin();
  while (it != pending_.end() && s && it->session != s) ++it;
  if (it == pending_.end()) return false;
  out.ticket = it->ticket;
  out.session = it->session;
  out.epoch = it->epoch;
  out.opt = it->opt;  // plain values: no allocation
  // Swapped, not copied: no allocation.
  out.cb.on_piece.swap(it->cb.on_piece);
  out.cb.on_done.swap(it->cb.on_done);
  pending_.erase(it);  // moves the later ones down: no allocation
  return true;
}

void SuggestScheduler::cancel_running_locked() {
  // Only sets a flag: stops within one decode step or prefill chunk, and
  // leaves the session's epoch past the request's (stale: no idle work on it).
  if (running_.ticket != 0) running_.session->cancel();
}

void SuggestScheduler::cancel_extending_locked(const Session* only) {
  if (extending_ && (!only || extending_ == only)) extending_->cancel();  // stops it before its next step
}

void SuggestScheduler::drop(Request& r) {
  if (r.ticket == 0 || !r.cb.on_done) return;
  SuggestDone d;
  d.ticket = r.ticket;
  d.outcome = SuggestOutcome::kDropped;
  d.session = r.session;
  r.cb.on_done(d);
}

uint64_t SuggestScheduler::submit(Session& s, const SuggestOptions& opt, SuggestCallbacks cb) {
  Request dropped, dropped_other;
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ticket = next_ticket_++;
    // Newest wins: at most one request of a session waits (and with
    // preemption at most one of all, so at most one other is dropped here).
    take_pending_locked(dropped, &s);
    if (opt_.preempt_other_sessions) take_pending_locked(dropped_other);
    if (opt_.preempt_other_sessions || running_.session == &s) cancel_running_locked();
    cancel_extending_locked();  // idle work always gives way to a keystroke
    // The epoch after those cancels (of `s` itself, maybe): only later ones make it stale.
    Request& r = pending_.emplace_back();
    r.ticket = ticket;
    r.session = &s;
    r.epoch = s.cancel_epoch();
    r.opt = opt;
    r.cb.on_piece.swap(cb.on_piece);
    r.cb.on_done.swap(cb.on_done);
  }
  poked_.store(true, std::memory_order_release);
  work_cv_.notify_one();
  drop(dropped);
  drop(dropped_other);
  return ticket;
}

bool SuggestScheduler::cancel(uint64_t ticket) {
  if (ticket == 0) return false;
  Request dropped;
  bool found = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const Session* owner = nullptr;
    for (const Request& r : pending_)
      if (r.ticket == ticket) owner = r.session;
    if (owner) {
      found = take_pending_locked(dropped, owner);  // a session has one pending request: this one
    } else if (running_.ticket == ticket) {
      cancel_running_locked();
      found = true;
    }
  }
  idle_cv_.notify_all();  // an emptied slot may make the scheduler idle
  drop(dropped);
  return found;
}

void SuggestScheduler::cancel_session(Session& s) {
  Request dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    take_pending_locked(dropped, &s);
    if (running_.session == &s) cancel_running_locked();
    cancel_extending_locked(&s);
  }
  idle_cv_.notify_all();
  drop(dropped);
}

void SuggestScheduler::forget(Session& s) {
  Request dropped;
  {
    std::unique_lock<std::mutex> lock(mu_);
    take_pending_locked(dropped, &s);
    if (running_.session == &s || extending_ == &s) {
      if (running_.session == &s) {
        cancel_running_locked();
        running_forgotten_ = true;  // an on_done may destroy it next: not to be touched again
      }
      cancel_extending_locked(&s);
      // On the worker thread this is an on_done: suggest has returned and
      // the worker touches the session no more, and waiting would deadlock.
      if (std::this_thread::get_id() != worker_.get_id()) {
        idle_cv_.wait(lock, [&] { return running_.session != &s && extending_ != &s; });
      }
    }
  }
  idle_cv_.notify_all();
  drop(dropped);
}

void SuggestScheduler::wait_idle() {
  if (std::this_thread::get_id() == worker_.get_id()) return;  // would wait for itself
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return pending_.empty() && running_.ticket == 0 && extending_ == nullptr; });
}

void SuggestScheduler::worker_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (!stop_ && pending_.empty()) {
      poked_.store(false, std::memory_order_relaxed);  // nothing pending: a submit from now on sets it
      lock.unlock();
      spin_until_poked(awake_until_);
      lock.lock();
    }
    work_cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
    if (stop_) return;  // the destructor drops what is pending
    // pending -> running_ in one locked step, so wait_idle never sees both
    // empty while a request is outstanding.
    take_pending_locked(running_);
    running_forgotten_ = false;
    lock.unlock();
    const bool done = run_one();
    // Only the worker reads running_.cb: cleared unlocked, so a callable's
    // destructor may call into the scheduler.
    running_.cb.on_piece = nullptr;
    running_.cb.on_done = nullptr;
    lock.lock();
    Session* ran = running_.session;
    running_.ticket = 0;
    running_.session = nullptr;
    if (done) extend_idle(lock, ran, running_.epoch);
    idle_cv_.notify_all();
  }
}

void SuggestScheduler::spin_until_poked(std::chrono::steady_clock::time_point until) {
  for (int spins = 1; !poked_.load(std::memory_order_acquire); ++spins) {
    if (spins % 256 == 0) {
      if (std::chrono::steady_clock::now() >= until) return;
      std::this_thread::yield();  // the editor's thread, woken on this core, runs at once
    }
    cpu_relax();
  }
}

void SuggestScheduler::extend_idle(std::unique_lock<std::mutex>& lock, Session* s, uint64_t ran_epoch) {
  // Not after any cancel of the session since its request (a forget() from
  // an on_done that destroys it cancels too), nor with a keystroke waiting.
  if (opt_.idle_extend_tokens <= 0 || stop_ || !pending_.empty() || running_forgotten_ ||
      s->cancel_epoch() != ran_epoch)
    return;
  extending_ = s;
  lock.unlock();
  s->extend_chain(opt_.idle_extend_tokens);
  lock.lock();
  extending_ = nullptr;
}

bool SuggestScheduler::run_one() {
  SuggestDone d;
  d.ticket = running_.ticket;
  d.session = running_.session;
  if (running_.stale()) {
    // Superseded between the submit and the start: nothing is computed.
    d.outcome = SuggestOutcome::kDropped;
    if (running_.cb.on_done) running_.cb.on_done(d);
    return false;
  }
  Suggestion& res = result_;
  const Status st = running_.session->suggest_since(running_.epoch, running_.opt, &res, piece_fn_);
  awake_until_ = std::chrono::steady_clock::now() +
                 std::chrono::milliseconds(running_.session->engine().options().awake_ms);
  if (!st.ok()) {
    d.outcome = SuggestOutcome::kError;
    d.status = st;
  } else {
    d.suggestion = &res;
    // A request superseded while it ran is stale even when it happened to
    // finish: its result is not to be shown.
    d.outcome = res.cancelled || running_.stale() ? SuggestOutcome::kCancelled : SuggestOutcome::kDone;
  }
  if (running_.cb.on_done) running_.cb.on_done(d);
  return d.outcome == SuggestOutcome::kDone;
}

}  // namespace laya
