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
  piece_fn_ = [this](std::string_view piece) {
    // Session::suggest ignores a cancel() made before it began (the one for
    // the previous keystroke must not stop this one), so a cancel that lands
    // between the worker taking the request and suggest starting is only seen
    // here, at the first piece. Pieces of a cancelled request are stale: not
    // passed on.
    if (running_cancelled_.load(std::memory_order_acquire)) {
      running_.session->cancel();
      return;
    }
    if (running_.cb.on_piece) running_.cb.on_piece(running_.ticket, piece);
  };
  worker_ = std::thread([this] { worker_loop(); });
#ifdef __linux__
  pthread_setname_np(worker_.native_handle(), "laya-suggest");  // for profilers and debuggers
#endif
}

SuggestScheduler::~SuggestScheduler() {
  Request dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    take_pending_locked(dropped);
    cancel_running_locked();
    cancel_extending_locked();
  }
  poked_.store(true, std::memory_order_release);
  work_cv_.notify_all();
  idle_cv_.notify_all();
  drop(dropped);
  worker_.join();
  // A callback (the drop above, or an on_done on the worker) may have
  // submitted after stop_: that request never runs either.
  Request late;
  {
    std::lock_guard<std::mutex> lock(mu_);
    take_pending_locked(late);
  }
  drop(late);
}

void SuggestScheduler::take_pending_locked(Request& out) {
  out.ticket = std::exchange(pending_.ticket, 0);
  out.session = std::exchange(pending_.session, nullptr);
  out.opt = pending_.opt;  // plain values: no allocation
  // Swapped, not copied: no allocation, and the slot is left empty.
  out.cb.on_piece.swap(pending_.cb.on_piece);
  out.cb.on_done.swap(pending_.cb.on_done);
}

void SuggestScheduler::cancel_running_locked() {
  if (running_.ticket == 0) return;
  running_forgotten_ = true;  // cancelled or forgotten: not to be extended either
  running_cancelled_.store(true, std::memory_order_release);
  running_.session->cancel();  // only sets a flag: stops within one decode step or prefill chunk
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
  Request dropped;
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ticket = next_ticket_++;
    take_pending_locked(dropped);  // newest wins: the slot holds one request, never a queue
    pending_.ticket = ticket;
    pending_.session = &s;
    pending_.opt = opt;
    pending_.cb.on_piece.swap(cb.on_piece);
    pending_.cb.on_done.swap(cb.on_done);
    if (opt_.preempt_other_sessions || running_.session == &s) cancel_running_locked();
    cancel_extending_locked();  // idle work always gives way to a keystroke
  }
  poked_.store(true, std::memory_order_release);
  work_cv_.notify_one();
  drop(dropped);
  return ticket;
}

bool SuggestScheduler::cancel(uint64_t ticket) {
  if (ticket == 0) return false;
  Request dropped;
  bool found = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.ticket == ticket) {
      take_pending_locked(dropped);
      found = true;
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
    if (pending_.session == &s) take_pending_locked(dropped);
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
    if (pending_.session == &s) take_pending_locked(dropped);
    if (running_.session == &s || extending_ == &s) {
      cancel_running_locked();
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
  idle_cv_.wait(lock, [&] { return pending_.ticket == 0 && running_.ticket == 0 && extending_ == nullptr; });
}

void SuggestScheduler::worker_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (!stop_ && pending_.ticket == 0) {
      poked_.store(false, std::memory_order_relaxed);  // pending_ is empty: a submit from now on sets it
      lock.unlock();
      spin_until_poked(awake_until_);
      lock.lock();
    }
    work_cv_.wait(lock, [&] { return stop_ || pending_.ticket != 0; });
    if (stop_) return;  // the destructor drops what is pending
    // pending_ -> running_ in one locked step, so wait_idle never sees both
    // empty while a request is outstanding.
    take_pending_locked(running_);
    running_forgotten_ = false;
    running_cancelled_.store(false, std::memory_order_relaxed);
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
    if (done) extend_idle(lock, ran);
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

void SuggestScheduler::extend_idle(std::unique_lock<std::mutex>& lock, Session* s) {
  // Not after a forget() (an on_done may have forgotten the session to
  // destroy it) or any cancel of the request, nor with a keystroke waiting.
  if (opt_.idle_extend_tokens <= 0 || stop_ || pending_.ticket != 0 || running_forgotten_) return;
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
  if (running_cancelled_.load(std::memory_order_acquire)) {
    // Superseded between the slot and the start: nothing was computed.
    d.outcome = SuggestOutcome::kDropped;
    if (running_.cb.on_done) running_.cb.on_done(d);
    return false;
  }
  Result<Suggestion> res = running_.session->suggest(running_.opt, piece_fn_);
  awake_until_ = std::chrono::steady_clock::now() +
                 std::chrono::milliseconds(running_.session->engine().options().awake_ms);
  if (!res.ok()) {
    d.outcome = SuggestOutcome::kError;
    d.status = res.status();
  } else {
    d.suggestion = &res.value();
    // A request superseded while it ran is stale even when it happened to
    // finish: its result is not to be shown.
    const bool stopped = res->cancelled || running_cancelled_.load(std::memory_order_acquire);
    d.outcome = stopped ? SuggestOutcome::kCancelled : SuggestOutcome::kDone;
  }
  if (running_.cb.on_done) running_.cb.on_done(d);
  return d.outcome == SuggestOutcome::kDone;
}

}  // namespace laya
