// SuggestScheduler: one engine, many sessions, one suggestion at a time.
//
// An editor calls submit() on its input thread after each keystroke and
// returns at once; one worker thread (made by the constructor, never per
// request) runs Session::suggest, which uses all of the engine's threads.
//
// Newest wins. There is one user with one cursor, so only the suggestion for
// the newest keystroke is ever shown: an older one is wasted work that would
// delay it. So there is no queue of keystrokes, one pending slot per session:
// a submit replaces its session's pending request (the replaced one ends
// `kDropped`) and cancels its running one (it ends `kCancelled` within one
// decode step or one prefill chunk). By default it does the same to every
// other session's (a keystroke in file B makes file A's suggestion stale too:
// the user has moved on); with preempt_other_sessions off (a server with
// several clients, or llama.vim's background requests that fill the cache)
// the sessions' requests run in the order they came, one at a time.
//
// Cancellation is the session's own count (Session::cancel_epoch): a request
// remembers it at submit, and any cancel() of its session since — an edit, a
// move, a newer request — stops it or, before it starts, drops it. The
// scheduler keeps no cancel flag of its own.
//
// Lifetime: a Session must outlive every request submitted for it. Before
// destroying a session, call forget(session): it drops and cancels its
// requests and returns once the worker no longer uses it.
//
// Callbacks: on_piece and the on_done of a request that ran (kDone,
// kCancelled, kError) are called on the worker thread; the on_done of a
// dropped request is called on the thread that dropped it (the one calling
// submit / cancel / cancel_session / forget / the destructor), after the
// scheduler's lock is released, so it may call submit(). Every ticket gets
// exactly one on_done. Callbacks must not throw, and on_piece must not edit
// its session (the session's lock is held) nor call forget / wait_idle.
//
// Allocation: the pending and running slots are reused (room for 8 sessions
// waiting is reserved up front); a submit copies the options (no heap) and
// moves the callbacks in (no heap). std::function keeps
// a small callable (libstdc++: trivially copyable, at most 16 bytes — a lambda
// capturing one or two pointers or references) inline; a larger one is put on
// the heap when the caller builds the Callbacks, not by the scheduler.
// Session::suggest's own result still allocates (its text and token vector).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "core/status.h"
#include "session/session.h"

namespace laya {

struct SchedulerOptions {
  // A submit always cancels a running request on the same session (its text
  // is out of date) and replaces its pending one. true: it also cancels and
  // drops every other session's (one user: the newest keystroke wins
  // everywhere). false: other sessions' requests keep their turn (first
  // come, first served).
  bool preempt_other_sessions = true;
  // Idle-time work: after a suggestion completes and while nothing is
  // pending, extend it by this many tokens (Session::extend_chain) on the
  // worker, so typing through it past its end costs no forward pass. Any
  // submit, edit or cancel stops it within one decode step. 0: none.
  int idle_extend_tokens = 0;
};

enum class SuggestOutcome {
  kDone,       // the suggestion is complete (max_tokens, end of line or text, deadline)
  kCancelled,  // stopped (or superseded) after it started; `suggestion` holds what was computed
  kDropped,    // superseded or cancelled before it started: nothing was computed
  kError,      // Session::suggest failed: `status` says why
};

const char* to_string(SuggestOutcome o);

// What on_done receives; valid only during the call (copy what you keep).
struct SuggestDone {
  uint64_t ticket = 0;
  SuggestOutcome outcome = SuggestOutcome::kDropped;
  Session* session = nullptr;
  const Suggestion* suggestion = nullptr;  // kDone and kCancelled; nullptr otherwise
  Status status;                           // kError: the error; Ok otherwise
};

struct SuggestCallbacks {
  std::function<void(uint64_t ticket, std::string_view piece)> on_piece;  // optional
  std::function<void(const SuggestDone&)> on_done;                        // optional
};

class SuggestScheduler {
 public:
  explicit SuggestScheduler(const SchedulerOptions& opt = {});
  // Cancels the running request, drops the pending one (its on_done is
  // called here), waits for the worker to finish and joins it.
  ~SuggestScheduler();
  SuggestScheduler(const SuggestScheduler&) = delete;
  SuggestScheduler& operator=(const SuggestScheduler&) = delete;

  // Asks for a suggestion for `s` at its current text and cursor (as they are
  // when the worker starts it). Returns its ticket (> 0, increasing). Never
  // waits for a running suggestion. Options are checked by Session::suggest:
  // bad ones end kError.
  uint64_t submit(Session& s, const SuggestOptions& opt, SuggestCallbacks cb);

  // Drops the request if pending, cancels it if running. false: the ticket is
  // neither (finished, dropped or unknown). Never blocks on the worker.
  bool cancel(uint64_t ticket);
  // The same for whatever request `s` has. Never blocks on the worker.
  void cancel_session(Session& s);
  // Drops and cancels `s`'s requests, and waits until the worker no longer
  // uses `s` (its on_done has returned), so it may be destroyed. From an
  // on_done on the worker thread it does not wait (the worker is done with
  // the session by then); never call it from on_piece.
  void forget(Session& s);
  // Waits until nothing is pending or running (tests, shutdown). Not from a
  // callback on the worker thread (it returns at once there).
  void wait_idle();

 private:
  struct Request {
    uint64_t ticket = 0;  // 0: the slot is empty
    Session* session = nullptr;
    uint64_t epoch = 0;   // session->cancel_epoch() at submit: any cancel since makes it stale
    SuggestOptions opt;
    SuggestCallbacks cb;
    bool stale() const { return session->cancel_epoch() != epoch; }
  };

  void worker_loop();
  bool run_one();  // runs running_ (the lock not held); true when it completed (kDone)
  // The idle-time work after a completed suggestion on `s`, submitted at
  // `ran_epoch` (lock held on entry and exit, released while it runs).
  void extend_idle(std::unique_lock<std::mutex>& lock, Session* s, uint64_t ran_epoch);
  void cancel_extending_locked(const Session* only = nullptr);
  // Spins (the lock not held) until poked_ or `until`.
  void spin_until_poked(std::chrono::steady_clock::time_point until);
  // Moves the pending request of `s` (nullptr: the oldest of any) into `out`
  // (callbacks moved, no allocation) and removes it, under mu_. false: none.
  bool take_pending_locked(Request& out, const Session* s = nullptr);
  void cancel_running_locked();
  static void drop(Request& r);  // calls on_done(kDropped); the lock not held
  void drop_all_pending();       // the lock not held

  const SchedulerOptions opt_;
  std::mutex mu_;
  std::condition_variable work_cv_;  // pending_ filled or stop_
  std::condition_variable idle_cv_;  // running_ emptied
  std::vector<Request> pending_;     // the newest request of each session not yet started, oldest first
  Request running_;                  // written under mu_ by the worker only; read by it unlocked
  Session* extending_ = nullptr;     // the session whose suggestion the worker extends (idle work), under mu_
  bool running_forgotten_ = false;   // forget() hit running_: its session may be gone after on_done, under mu_
  // Set with every work_cv_ notification (a submit, the destructor): what the
  // worker watches while it spins in its awake window.
  std::atomic<bool> poked_{false};
  // The worker spins instead of sleeping until then after a suggestion (the
  // engine's EngineOptions::awake_ms): the next keystroke of a typist then
  // finds it awake (a sleeping core of a VM takes 1-3 ms to wake).
  std::chrono::steady_clock::time_point awake_until_{};
  Suggestion result_;  // the running request's, reused (the worker's only)
  uint64_t next_ticket_ = 1;
  bool stop_ = false;
  // Made once: forwards running_'s pieces (a member, so suggest() gets the
  // same small std::function every time).
  std::function<void(std::string_view)> piece_fn_;
  std::thread worker_;  // last: started after everything above is built
};

}  // namespace laya
