// Foreground work and the background work that gives way to it.
//
// A keystroke's suggestion is foreground: it holds a Scope while it runs.
// Work done beside it on the same cores — a hot swap loading, probing and
// prewarming the next model (session/model_slot.h) — calls yield() between
// its steps and waits there while any Scope is held, so the keystroke's
// threads never share a core with it. On a 2-core machine a third runnable
// thread made every barrier of the keystroke's forward pass wait for a
// descheduled worker: swap_added_ms p50 67 / p99 348 ms in `laya replay
// --swap-to` before this, with the swap's forward passes on 2 threads.
//
// Why not a low scheduling priority (SCHED_IDLE, nice 19) for the swap
// thread: it starves whenever the machine is busy with anything else (a
// build, other tests: a swap test went from 2 s to 450 s beside a compile),
// and an unprivileged thread cannot raise its priority back. yield() waits
// for this process's keystrokes only, and at most `max_wait` per call, so a
// swap always finishes, also under a stream of requests.
#pragma once

#include <chrono>

namespace laya::foreground {

// Held by foreground work for its duration (no allocation, two atomic ops).
class Scope {
 public:
  Scope();
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
};

// Waits while any other thread holds a Scope, at most `max_wait`; at once
// when none does (one atomic load) or when the calling thread holds one.
void yield(std::chrono::milliseconds max_wait = std::chrono::milliseconds(20));

// Scopes held now (tests).
int held();

}  // namespace laya::foreground
