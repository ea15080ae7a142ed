// SuggestScheduler: one worker; the newest request wins (older ones are
// dropped or cancelled, never queued); every ticket gets exactly one on_done;
// a forgotten session can be destroyed; destruction ends everything.
// No timing asserts: waits are bounded only so that a hang fails (aborts).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "session/scheduler.h"

#include "test_util.h"

namespace laya {
namespace {

using namespace std::chrono_literals;

std::string model_path() { return std::string(LAYA_SOURCE_DIR) + "/models/laya-default-q8_0.gguf"; }

struct Env {
  std::shared_ptr<const Model> model;
  std::unique_ptr<tok::Tokenizer> tok;
  std::unique_ptr<Engine> eng;
};

// One engine for the whole binary (as in session_test): 2 threads, 1024 context.
Env* env() {
  static Env* e = [] {
    auto* r = new Env;
    auto m = Model::load(model_path());
    if (!m.ok()) return r;
    r->model = std::move(m).value();
    auto t = tok::Tokenizer::from_gguf(*r->model->gguf_file());
    if (!t.ok()) return r;
    r->tok = std::move(t).value();
    EngineOptions eo;
    eo.n_threads = test::sanitizer_threads(2);
    eo.n_ctx = 1024;
    auto en = Engine::create(r->model, eo);
    if (en.ok()) r->eng = std::move(en).value();
    return r;
  }();
  return e;
}

#define REQUIRE_MODEL()                                                                                \
  if (!std::filesystem::exists(model_path()))                                                          \
    GTEST_SKIP() << "no " << model_path() << " (the shipped default model): skipping scheduler tests"; \
  Env* E = env();                                                                                      \
  ASSERT_TRUE(E->eng && E->tok) << "the default model did not load"

// Long suggestions (200 tokens) from these never end before a few pieces.
constexpr const char* kCode = "import os\nimport sys\n\n\ndef main(argv):";
constexpr const char* kNotes = "The meeting notes for today:\n- ";

SuggestOptions tokens(int n) {
  SuggestOptions o;
  o.max_tokens = n;
  return o;
}

// What a fresh session suggests synchronously for `text`.
std::string fresh(Env* E, const std::string& text, int max_tokens) {
  Session f(*E->eng, *E->tok);
  EXPECT_TRUE(f.set_text(text).ok());
  auto r = f.suggest(tokens(max_tokens));
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r->text : "<error>";
}

bool eventually(const std::function<bool()>& pred) {
  const auto until = std::chrono::steady_clock::now() + 120s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Runs f on its own thread; join() aborts the binary when f has not returned
// within two minutes, so a hang fails here instead of stalling the run.
class Bounded {
 public:
  explicit Bounded(std::function<void()> f) : t_([this, f = std::move(f)] { f(); done_ = true; }) {}
  void join(const char* what) {
    if (!eventually([&] { return done_.load(); })) {
      std::fprintf(stderr, "%s did not return within 120 s\n", what);
      std::abort();
    }
    t_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread t_;
};

// Sets a flag when the scope ends, so that a failed ASSERT never leaves the
// worker blocked in a test's on_piece (the scheduler's destructor would hang).
struct Release {
  std::atomic<bool>& flag;
  ~Release() { flag = true; }
};

// Every on_done, by ticket (any thread).
struct Log {
  std::mutex mu;
  std::map<uint64_t, std::vector<std::string>> outcomes;
  std::map<uint64_t, std::string> text;  // kDone / kCancelled: the suggestion's text

  SuggestCallbacks callbacks(std::function<void(uint64_t, std::string_view)> on_piece = {},
                             std::function<void(const SuggestDone&)> also = {}) {
    SuggestCallbacks cb;
    cb.on_piece = std::move(on_piece);
    cb.on_done = [this, also = std::move(also)](const SuggestDone& d) {
      {
        std::lock_guard<std::mutex> lock(mu);
        std::string o = to_string(d.outcome);
        if (d.outcome == SuggestOutcome::kError) o += ": " + d.status.to_string();
        const bool ran = d.outcome == SuggestOutcome::kDone || d.outcome == SuggestOutcome::kCancelled;
        EXPECT_EQ(d.suggestion != nullptr, ran);
        outcomes[d.ticket].push_back(o);
        if (d.suggestion) text[d.ticket] = d.suggestion->text;
      }
      if (also) also(d);
    };
    return cb;
  }
  // The outcomes of `t`, comma-separated: exactly one is expected.
  std::string of(uint64_t t) {
    std::lock_guard<std::mutex> lock(mu);
    std::string s;
    for (const auto& o : outcomes[t]) s += (s.empty() ? "" : ",") + o;
    return s;
  }
  size_t calls() {
    std::lock_guard<std::mutex> lock(mu);
    size_t n = 0;
    for (const auto& [t, v] : outcomes) n += v.size();
    return n;
  }
};

// on_piece for a long request: the n-th piece waits for `go`, so the worker
// is busy while the test submits (and a cancel lands before the next step).
std::function<void(uint64_t, std::string_view)> hold_at(int n, std::atomic<int>& pieces, std::atomic<bool>& go,
                                                        std::string* streamed = nullptr) {
  return [n, &pieces, &go, streamed](uint64_t, std::string_view p) {
    if (streamed) *streamed += p;
    if (++pieces == n)
      while (!go.load()) std::this_thread::yield();
  };
}

// Request t is running: it has streamed n pieces (fails when it ended first).
#define ASSERT_RUNNING(log, t, pieces, n)                                            \
  ASSERT_TRUE(eventually([&] { return pieces.load() >= n || !log.of(t).empty(); })); \
  ASSERT_EQ(log.of(t), "") << "the suggestion ended before " << n << " pieces"

TEST(SuggestScheduler, SingleSubmitEqualsSynchronousSuggest) {
  REQUIRE_MODEL();
  Session s(*E->eng, *E->tok);
  const std::string text = "def fib(n):\n    if n < 2:\n        return n\n    return ";
  ASSERT_TRUE(s.set_text(text).ok());
  Log log;
  std::string streamed;  // written on the worker, read after wait_idle
  SuggestScheduler sched;
  const uint64_t t = sched.submit(s, tokens(8), log.callbacks([&](uint64_t, std::string_view p) { streamed += p; }));
  EXPECT_GT(t, 0u);
  Bounded([&] { sched.wait_idle(); }).join("wait_idle");
  EXPECT_EQ(log.of(t), "done");
  EXPECT_FALSE(log.text[t].empty());
  EXPECT_EQ(log.text[t], fresh(E, text, 8));
  EXPECT_EQ(streamed, log.text[t]);
}

TEST(SuggestScheduler, BurstOnOneSessionOnlyNewestCompletes) {
  REQUIRE_MODEL();
  Session s(*E->eng, *E->tok);
  ASSERT_TRUE(s.set_text(kCode).ok());
  Log log;
  std::atomic<int> pieces{0};
  std::atomic<bool> burst_done{false};
  SuggestScheduler sched;
  Release release{burst_done};
  // The worker is busy: the first piece of a long suggestion waits for the burst.
  const uint64_t busy = sched.submit(s, tokens(200), log.callbacks(hold_at(1, pieces, burst_done)));
  ASSERT_RUNNING(log, busy, pieces, 1);
  std::vector<uint64_t> burst;
  for (int i = 0; i < 20; ++i) burst.push_back(sched.submit(s, tokens(8), log.callbacks()));
  // Superseded in the slot: dropped at once, in submit, never queued.
  for (int i = 0; i + 1 < 20; ++i) {
    EXPECT_EQ(log.of(burst[i]), "dropped") << "burst " << i;
    EXPECT_GT(burst[i + 1], burst[i]);
  }
  burst_done = true;
  Bounded([&] { sched.wait_idle(); }).join("wait_idle");
  EXPECT_EQ(log.of(busy), "cancelled");
  EXPECT_EQ(pieces.load(), 1);  // no piece passed on after the cancel
  EXPECT_EQ(log.of(burst.back()), "done");
  EXPECT_EQ(log.text[burst.back()], fresh(E, kCode, 8));
  EXPECT_EQ(log.calls(), 21u);
}

TEST(SuggestScheduler, SubmitOnAnotherSessionCancelsWithinOneDecodeStep) {
  REQUIRE_MODEL();
  Session a(*E->eng, *E->tok), b(*E->eng, *E->tok);
  ASSERT_TRUE(a.set_text(kCode).ok());
  ASSERT_TRUE(b.set_text(kNotes).ok());
  Log log;
  std::string a_streamed;  // worker only until wait_idle
  std::atomic<int> a_pieces{0};
  std::atomic<bool> b_submitted{false};
  SuggestScheduler sched;
  Release release{b_submitted};
  const uint64_t ta = sched.submit(a, tokens(200), log.callbacks(hold_at(3, a_pieces, b_submitted, &a_streamed)));
  ASSERT_RUNNING(log, ta, a_pieces, 3);
  const uint64_t tb = sched.submit(b, tokens(8), log.callbacks());
  b_submitted = true;
  Bounded([&] { sched.wait_idle(); }).join("wait_idle");
  EXPECT_EQ(log.of(ta), "cancelled");
  // A stopped before its next decode step: it computed exactly the 3 pieces
  // it streamed (a missed cancel runs on towards 200 tokens).
  EXPECT_EQ(a_pieces.load(), 3);
  EXPECT_EQ(log.text[ta], a_streamed);
  EXPECT_EQ(log.of(tb), "done");
  EXPECT_EQ(log.text[tb], fresh(E, kNotes, 8));
}

TEST(SuggestScheduler, DestroyingWithWorkPendingEndsEveryTicket) {
  REQUIRE_MODEL();
  Session a(*E->eng, *E->tok), b(*E->eng, *E->tok);
  ASSERT_TRUE(a.set_text(kCode).ok());
  ASSERT_TRUE(b.set_text(kNotes).ok());
  Log log;
  std::atomic<int> pieces{0};
  std::atomic<bool> go{false};
  // B's submit does not preempt A: only the destructor stops A.
  auto sched = std::make_unique<SuggestScheduler>(SchedulerOptions{.preempt_other_sessions = false});
  Release release{go};
  const uint64_t ta = sched->submit(a, tokens(200), log.callbacks(hold_at(1, pieces, go)));
  ASSERT_RUNNING(log, ta, pieces, 1);
  const uint64_t tb = sched->submit(b, tokens(8), log.callbacks());
  EXPECT_EQ(log.of(tb), "");  // pending behind A
  Bounded destroy([&] { sched.reset(); });
  // The destructor drops the pending request before it waits for the worker.
  EXPECT_TRUE(eventually([&] { return !log.of(tb).empty(); }));
  go = true;
  destroy.join("~SuggestScheduler");
  EXPECT_EQ(log.of(ta), "cancelled");
  EXPECT_EQ(pieces.load(), 1);
  EXPECT_EQ(log.of(tb), "dropped");
}

TEST(SuggestScheduler, ForgetThenDestroySessionIsSafe) {
  REQUIRE_MODEL();
  Log log;
  std::atomic<int> pieces{0};
  std::atomic<bool> forgetting{false}, done_returned{false}, go{false};
  SuggestScheduler sched(SchedulerOptions{.preempt_other_sessions = false});
  Release release{forgetting}, release_b{go};
  // Running: forget cancels it and returns only after its on_done has returned.
  auto a = std::make_unique<Session>(*E->eng, *E->tok);
  ASSERT_TRUE(a->set_text(kCode).ok());
  auto slow_done = [&](const SuggestDone&) {
    std::this_thread::sleep_for(100ms);  // a slow on_done: forget must wait for it
    done_returned = true;
  };
  const uint64_t ta = sched.submit(*a, tokens(200), log.callbacks(hold_at(1, pieces, forgetting), slow_done));
  ASSERT_RUNNING(log, ta, pieces, 1);
  forgetting = true;
  Bounded([&] { sched.forget(*a); }).join("forget (running)");
  EXPECT_TRUE(done_returned.load());
  EXPECT_EQ(log.of(ta), "cancelled");
  a.reset();  // ASan: the worker must not touch it again

  // Pending behind another session's request: dropped, never run. B's
  // on_done forgets B from the worker thread, which must not wait for itself.
  auto b = std::make_unique<Session>(*E->eng, *E->tok);
  auto c = std::make_unique<Session>(*E->eng, *E->tok);
  ASSERT_TRUE(b->set_text(kNotes).ok());
  ASSERT_TRUE(c->set_text(kCode).ok());
  pieces = 0;
  const uint64_t tb = sched.submit(
      *b, tokens(8), log.callbacks(hold_at(1, pieces, go), [&](const SuggestDone& d) { sched.forget(*d.session); }));
  ASSERT_RUNNING(log, tb, pieces, 1);
  const uint64_t tc = sched.submit(*c, tokens(8), log.callbacks());
  Bounded([&] { sched.forget(*c); }).join("forget (pending)");
  EXPECT_EQ(log.of(tc), "dropped");
  c.reset();
  go = true;
  Bounded([&] { sched.wait_idle(); }).join("wait_idle");
  EXPECT_EQ(log.of(tb), "done");
  Bounded([&] { sched.forget(*b); }).join("forget (idle)");
  b.reset();
}

TEST(SuggestScheduler, CancelByTicketAndSessionAndBadOptions) {
  REQUIRE_MODEL();
  Session a(*E->eng, *E->tok), b(*E->eng, *E->tok), c(*E->eng, *E->tok);
  ASSERT_TRUE(a.set_text(kCode).ok());
  ASSERT_TRUE(b.set_text(kNotes).ok());
  ASSERT_TRUE(c.set_text("x = 1\ny = ").ok());
  Log log;
  std::atomic<int> pieces{0};
  std::atomic<bool> go{false};
  SuggestScheduler sched(SchedulerOptions{.preempt_other_sessions = false});
  Release release{go};
  const uint64_t ta = sched.submit(a, tokens(200), log.callbacks(hold_at(1, pieces, go)));
  ASSERT_RUNNING(log, ta, pieces, 1);
  const uint64_t tb = sched.submit(b, tokens(8), log.callbacks());
  const uint64_t tc = sched.submit(c, tokens(8), log.callbacks());  // pending behind b
  EXPECT_TRUE(sched.cancel(tb));  // pending: dropped at once, the one behind it kept
  EXPECT_EQ(log.of(tb), "dropped");
  EXPECT_EQ(log.of(tc), "");
  EXPECT_FALSE(sched.cancel(tb));
  EXPECT_FALSE(sched.cancel(0));
  sched.cancel_session(a);  // running: cancelled
  go = true;
  Bounded([&] { sched.wait_idle(); }).join("wait_idle");
  EXPECT_EQ(log.of(ta), "cancelled");
  EXPECT_EQ(log.of(tc), "done");
  EXPECT_FALSE(sched.cancel(ta));
  const uint64_t bad = sched.submit(b, tokens(0), log.callbacks());
  Bounded([&] { sched.wait_idle(); }).join("wait_idle");
  EXPECT_EQ(log.of(bad).rfind("error: ", 0), 0u) << log.of(bad);
}

// Without preemption (the HTTP server): other sessions' requests keep their
// turn in the order they came; a session's newer request replaces its older
// one; an edit after the submit makes a request stale, so it is dropped when
// its turn comes (the session's cancel count is the one cancellation state).
TEST(SuggestScheduler, WithoutPreemptionSessionsTakeTurnsAndAnEditMakesARequestStale) {
  REQUIRE_MODEL();
  Session a(*E->eng, *E->tok), b(*E->eng, *E->tok), c(*E->eng, *E->tok);
  ASSERT_TRUE(a.set_text(kCode).ok());
  ASSERT_TRUE(b.set_text(kNotes).ok());
  ASSERT_TRUE(c.set_text("x = 1\ny = ").ok());
  Log log;
  std::mutex order_mu;
  std::vector<uint64_t> order;  // tickets in the order their on_done came
  auto note = [&](const SuggestDone& d) {
    std::lock_guard<std::mutex> lock(order_mu);
    order.push_back(d.ticket);
  };
  std::atomic<int> pieces{0};
  std::atomic<bool> go{false};
  SuggestScheduler sched(SchedulerOptions{.preempt_other_sessions = false});
  Release release{go};
  const uint64_t ta = sched.submit(a, tokens(12), log.callbacks(hold_at(1, pieces, go), note));
  ASSERT_RUNNING(log, ta, pieces, 1);
  const uint64_t tb1 = sched.submit(b, tokens(8), log.callbacks({}, note));
  const uint64_t tc = sched.submit(c, tokens(8), log.callbacks({}, note));
  const uint64_t tb2 = sched.submit(b, tokens(8), log.callbacks({}, note));
  EXPECT_EQ(log.of(tb1), "dropped");  // replaced by b's newer request, at once
  ASSERT_TRUE(c.edit(c.cursor(), 0, "2").ok());  // waits for nothing: c is not running
  go = true;
  Bounded([&] { sched.wait_idle(); }).join("wait_idle");
  EXPECT_EQ(log.of(ta), "done");  // not preempted by b's or c's submits
  EXPECT_EQ(log.of(tc), "dropped");  // stale when its turn came: nothing computed
  EXPECT_EQ(log.of(tb2), "done");
  EXPECT_EQ(log.text[tb2], fresh(E, kNotes, 8));
  const std::vector<uint64_t> want = {tb1, ta, tc, tb2};
  EXPECT_EQ(order, want);
}

}  // namespace
}  // namespace laya
