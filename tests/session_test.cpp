// Session: incremental suggestions equal from-scratch ones and cost a few
// tokens per keystroke; cancel, deadline, single_line, accept, streaming.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/utf8.h"
#include "session/session.h"
#include "test_util.h"

namespace laya {
namespace {

struct Env {
  std::shared_ptr<const Model> model;
  std::unique_ptr<tok::Tokenizer> tok;
  std::unique_ptr<Engine> eng;
};

// One engine for the whole binary: the default model, 2 threads, its trained context.
Env* env() {
  static Env* e = [] {
    auto* r = new Env;
    auto m = Model::load(LAYA_SOURCE_DIR "/models/laya-default-q8_0.gguf");
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

#define REQUIRE_ENV()                                              \
  Env* E = env();                                                  \
  ASSERT_TRUE(E->eng && E->tok) << "default model did not load"

struct Event {
  std::string op, text;
  size_t pos = 0, n = 0;
};

size_t cp_count(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += len;
  }
  return true;
}

std::vector<Event> load_trace(const std::string& path) {
  std::vector<Event> out;
  std::string content = test::read_text_file(path);
  size_t start = 0;
  while (start < content.size()) {
    size_t end = content.find('\n', start);
    if (end == std::string::npos) end = content.size();
    const std::string line = content.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("op")) continue;  // the header
    Event e;
    e.op = j["op"].get<std::string>();
    e.pos = j["pos"].get<size_t>();
    if (j.contains("text")) e.text = j["text"].get<std::string>();
    if (j.contains("n")) e.n = j["n"].get<size_t>();
    out.push_back(std::move(e));
  }
  return out;
}

// A person typing a little Python and Chinese: keystrokes at the end, a typo
// fixed with backspace, a paste, an input-method commit, a move back to fix a
// word and back to the end.
std::vector<Event> synthetic_typing() {
  std::vector<Event> ev;
  size_t cur = 0;
  auto type = [&](std::string_view s) {
    for (size_t i = 0; i < s.size();) {
      size_t len = 1;
      while (i + len < s.size() && (static_cast<unsigned char>(s[i + len]) & 0xC0) == 0x80) ++len;
      ev.push_back({"insert", std::string(s.substr(i, len)), cur, 0});
      ++cur;
      i += len;
    }
  };
  auto paste = [&](std::string_view s) {
    ev.push_back({"insert", std::string(s), cur, 0});
    cur += cp_count(s);
  };
  type("def fib(n):\n    if n < 2:\n        retrun");
  ev.push_back({"delete", "", cur - 3, 3});  // "run" → backspace ×3 as one word delete
  cur -= 3;
  type("urn n\n    return fib(n - 1) + fib(n - 2)\n\n");
  paste("def main():\n    print(fib(10))\n");
  ev.push_back({"move", "", 4, 0});  // click into "fib", rename to "fibo"
  ev.push_back({"insert", "o", 7, 0});
  cur += 1;
  ev.push_back({"move", "", cur, 0});
  type("# 斐波那契");
  paste("数列的");
  type("例子\nx = ");
  return ev;
}

Status apply(Session& s, const Event& e) {
  if (e.op == "insert" || e.op == "accept") return s.edit(e.pos, 0, e.text);
  if (e.op == "delete") return s.edit(e.pos, e.n, "");
  if (e.op == "move") return s.move(e.pos);
  return Status(StatusCode::kInvalidArgument, "unknown op " + e.op);
}

struct ReplayStats {
  int events = 0, mismatches = 0;
  std::vector<int64_t> computed;
  std::vector<double> ms;  // the long-lived session's suggest(), keystroke → 8-token suggestion
};

// After every event: the long-lived session's suggestion equals a fresh
// session's for the same text and cursor.
ReplayStats replay(Env* E, const std::vector<Event>& events, size_t limit, const std::string& name,
                   const SessionOptions& so = {}) {
  ReplayStats r;
  Session live(*E->eng, *E->tok, so);
  SuggestOptions opt;
  for (size_t i = 0; i < events.size() && i < limit; ++i) {
    Status st = apply(live, events[i]);
    EXPECT_TRUE(st.ok()) << name << " event " << i << ": " << st.to_string();
    if (!st.ok()) break;
    auto a = live.suggest(opt);
    EXPECT_TRUE(a.ok()) << a.status().to_string();
    if (!a.ok()) break;
    Session fresh(*E->eng, *E->tok, so);
    EXPECT_TRUE(fresh.set_text(live.text()).ok());
    EXPECT_TRUE(fresh.move(live.cursor()).ok());
    EXPECT_TRUE(fresh.pin_window(live.window_start()).ok());
    auto b = fresh.suggest(opt);
    EXPECT_TRUE(b.ok()) << b.status().to_string();
    if (!b.ok()) break;
    ++r.events;
    r.computed.push_back(a->timings.tokens_computed);
    r.ms.push_back(a->timings.total_ms);
    if (a->tokens != b->tokens) {
      ++r.mismatches;
      ADD_FAILURE() << name << " event " << i << " (" << events[i].op << " at " << events[i].pos << "): incremental \""
                    << a->text << "\" != from scratch \"" << b->text << "\"";
    }
  }
  return r;
}

int64_t percentile(std::vector<int64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

double percentile_ms(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

void print_stats(const std::string& name, const ReplayStats& r) {
  fmt::print(
      "[session] {}: {} events, {} mismatches, tokens computed per event p50 {} p90 {} max {}; "
      "suggest ms p50 {:.2f} p99 {:.2f} (shared machine)\n",
      name, r.events, r.mismatches, percentile(r.computed, 0.5), percentile(r.computed, 0.9),
      percentile(r.computed, 1.0), percentile_ms(r.ms, 0.5), percentile_ms(r.ms, 0.99));
}

TEST(SessionIncremental, SyntheticTypingEqualsFromScratch) {
  REQUIRE_ENV();
  const auto ev = synthetic_typing();
  const size_t n = ::laya::test::sanitizer_scaled(ev.size());
  const ReplayStats r = replay(E, ev, n, "synthetic");
  print_stats("synthetic", r);
  EXPECT_EQ(r.events, static_cast<int>(n));
  EXPECT_EQ(r.mismatches, 0);
  EXPECT_LE(percentile(r.computed, 0.5), 3);
}

// The same with every prompt option the session has: healing and FIM off,
// SPM order, and a context so small that the window moves.
TEST(SessionIncremental, SyntheticTypingEqualsFromScratchWithEveryOption) {
  REQUIRE_ENV();
  const auto ev = synthetic_typing();
  const SessionOptions variants[] = {
      {.heal = false, .fim = FimOrder::kOff},
      {.heal = true, .fim = FimOrder::kOff},
      {.heal = false, .fim = FimOrder::kPsm},
      {.heal = true, .fim = FimOrder::kSpm},
      {.heal = true, .fim = FimOrder::kPsm, .fim_suffix_tokens = 8, .context_tokens = 64},
  };
  for (const SessionOptions& so : variants) {
    const std::string name = fmt::format("synthetic heal={} fim={} ctx={}", so.heal, static_cast<int>(so.fim),
                                         so.context_tokens);
    const ReplayStats r = replay(E, ev, ev.size(), name, so);
    print_stats(name, r);
    EXPECT_EQ(r.events, static_cast<int>(ev.size())) << name;
    EXPECT_EQ(r.mismatches, 0) << name;
  }
}

// Events replayed per trace: a from-scratch suggestion after every event costs
// a whole prefill, so the default keeps the test short;
// LAYA_SESSION_TRACE_EVENTS=0 replays every event.
size_t trace_event_limit() {
  const char* v = std::getenv("LAYA_SESSION_TRACE_EVENTS");
  if (!v) return 150;
  const long n = std::atol(v);
  return n <= 0 ? SIZE_MAX : static_cast<size_t>(n);
}

TEST(SessionIncremental, FixtureTracesEqualFromScratch) {
  REQUIRE_ENV();
  const std::string fx = test::fixtures_dir();
  const std::string dir = fx + "/traces";
  if (fx.empty() || !std::filesystem::is_directory(dir)) GTEST_SKIP() << "no fixture traces at " << dir;
  std::vector<std::string> paths;
  for (const auto& f : std::filesystem::directory_iterator(dir))
    if (f.path().extension() == ".jsonl") paths.push_back(f.path().string());
  std::sort(paths.begin(), paths.end());
  ASSERT_FALSE(paths.empty());
  ReplayStats all;
  for (const auto& p : paths) {
    const auto ev = load_trace(p);
    ASSERT_FALSE(ev.empty()) << p;
    const std::string name = std::filesystem::path(p).stem().string();
    const ReplayStats r = replay(E, ev, trace_event_limit(), name);
    print_stats(name, r);
    all.events += r.events;
    all.mismatches += r.mismatches;
    all.computed.insert(all.computed.end(), r.computed.begin(), r.computed.end());
    all.ms.insert(all.ms.end(), r.ms.begin(), r.ms.end());
  }
  print_stats("all traces", all);
  EXPECT_EQ(all.mismatches, 0);
  EXPECT_LE(percentile(all.computed, 0.5), 3);
}

TEST(SessionApi, ErrorsNameTheProblem) {
  REQUIRE_ENV();
  Session s(*E->eng, *E->tok);
  ASSERT_TRUE(s.set_text("héllo").ok());
  EXPECT_EQ(s.size_cp(), 5u);
  EXPECT_EQ(s.cursor(), 5u);
  test::expect_status(s.edit(6, 0, "x"), StatusCode::kOutOfRange, {"edit at code point 6", "5 code points"});
  test::expect_status(s.edit(3, 3, ""), StatusCode::kOutOfRange, {"deleting 3"});
  test::expect_status(s.edit(0, 0, "\xff"), StatusCode::kInvalidArgument, {"not valid UTF-8"});
  test::expect_status(s.move(9), StatusCode::kOutOfRange, {"move to code point 9"});
  test::expect_status(s.accept(1), StatusCode::kInvalidArgument, {"no suggestion"});
  SuggestOptions o;
  o.max_tokens = 0;
  test::expect_status(s.suggest(o).status(), StatusCode::kInvalidArgument, {"max_tokens 0"});
  // Multi-byte offsets: replace "é" by "e", insert after the cursor's text.
  ASSERT_TRUE(s.edit(1, 1, "e").ok());
  EXPECT_EQ(s.text(), "hello");
  EXPECT_EQ(s.cursor(), 2u);
  ASSERT_TRUE(s.edit(5, 0, "，世界").ok());
  EXPECT_EQ(s.text(), "hello，世界");
  EXPECT_EQ(s.cursor(), 8u);
}

TEST(SessionSuggest, CancelFromAnotherThreadStopsWithinOneStep) {
  REQUIRE_ENV();
  Session s(*E->eng, *E->tok);
  ASSERT_TRUE(s.set_text("import os\nimport sys\n\n\ndef main(argv):").ok());
  std::atomic<int> pieces{0}, after_cancel{0};
  std::atomic<bool> cancelled{false}, done{false};
  Result<Suggestion> res = Status(StatusCode::kInternal, "not run");
  SuggestOptions o;
  o.max_tokens = 200;
  std::thread worker([&] {
    res = s.suggest(o, [&](std::string_view) {
      if (cancelled.load()) ++after_cancel;
      // The third piece waits until the main thread has cancelled: what
      // follows in this call is at most what runs before the next check.
      if (++pieces == 3)
        while (!cancelled.load()) std::this_thread::yield();
    });
    done = true;
  });
  while (pieces.load() < 3 && !done.load()) std::this_thread::yield();
  if (done.load()) {
    worker.join();
    FAIL() << "the suggestion ended before 3 pieces: \"" << (res.ok() ? res->text : res.status().to_string()) << "\"";
  }
  s.cancel();
  cancelled = true;
  worker.join();
  ASSERT_TRUE(res.ok()) << res.status().to_string();
  EXPECT_TRUE(res->cancelled);
  EXPECT_LT(res->tokens.size(), 200u);
  EXPECT_EQ(after_cancel.load(), 0);  // no decode step started after the cancel
  EXPECT_LE(res->timings.decode_ms.size(), res->tokens.size());
  // The session is consistent: its next suggestion equals a fresh one's.
  o.max_tokens = 8;
  auto a = s.suggest(o);
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->cancelled);
  Session f(*E->eng, *E->tok);
  ASSERT_TRUE(f.set_text(s.text()).ok());
  auto b = f.suggest(o);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->tokens, b->tokens);
}

TEST(SessionSuggest, EditDuringSuggestCancelsIt) {
  REQUIRE_ENV();
  Session s(*E->eng, *E->tok);
  ASSERT_TRUE(s.set_text("The meeting notes for today:\n- ").ok());
  std::atomic<int> pieces{0};
  std::atomic<bool> editing{false}, done{false};
  Result<Suggestion> res = Status(StatusCode::kInternal, "not run");
  SuggestOptions o;
  o.max_tokens = 200;
  std::thread worker([&] {
    res = s.suggest(o, [&](std::string_view) {
      if (++pieces == 2) {
        while (!editing.load()) std::this_thread::yield();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // edit() has set the flag by now
      }
    });
    done = true;
  });
  while (pieces.load() < 2 && !done.load()) std::this_thread::yield();
  if (done.load()) {
    worker.join();
    FAIL() << "the suggestion ended before 2 pieces: \"" << (res.ok() ? res->text : res.status().to_string()) << "\"";
  }
  editing = true;
  ASSERT_TRUE(s.edit(s.size_cp(), 0, "A").ok());  // waits for the suggest to stop
  worker.join();
  ASSERT_TRUE(res.ok());
  EXPECT_TRUE(res->cancelled);
  EXPECT_LE(pieces.load(), 3);
  EXPECT_EQ(s.current(), nullptr);
  EXPECT_EQ(s.text(), "The meeting notes for today:\n- A");
}

TEST(SessionSuggest, TinyDeadlineCutsTheSuggestion) {
  REQUIRE_ENV();
  Session s(*E->eng, *E->tok);
  ASSERT_TRUE(s.set_text("for i in range(10):\n    print(").ok());
  SuggestOptions o;
  o.max_tokens = 8;
  o.deadline = std::chrono::nanoseconds(1);
  auto a = s.suggest(o);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->cut_by_deadline);
  EXPECT_LE(a->tokens.size(), 1u);  // the first token comes from the prefill's logits
  EXPECT_TRUE(a->timings.decode_ms.empty());
  // An absolute deadline far away cuts nothing.
  o.deadline = Deadline::Clock::now() + std::chrono::seconds(60);
  auto b = s.suggest(o);
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->cut_by_deadline);
  EXPECT_GT(b->tokens.size(), a->tokens.size());
}

TEST(SessionSuggest, SingleLineStopsAtTheNewline) {
  REQUIRE_ENV();
  Session s(*E->eng, *E->tok);
  ASSERT_TRUE(s.set_text("import os\nimport sys\nimport re\nimport").ok());
  SuggestOptions o;
  o.max_tokens = 24;
  auto full = s.suggest(o);
  ASSERT_TRUE(full.ok());
  const size_t nl = full->text.find('\n');
  ASSERT_NE(nl, std::string::npos) << "expected a multi-line suggestion, got \"" << full->text << "\"";
  o.single_line = true;
  auto one = s.suggest(o);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->text, full->text.substr(0, nl));
  // The tokens kept are those whose bytes are all in the text.
  // (Healing: the first healed_bytes of the tokens' bytes were before the cursor.)
  const std::string kept =
      E->tok->decode(one->tokens, {.skip_special = true, .strip_leading_space = false}).substr(one->healed_bytes);
  EXPECT_TRUE(one->text.starts_with(kept)) << kept;
}

TEST(SessionSuggest, AcceptCostsNoPrefill) {
  REQUIRE_ENV();
  Session s(*E->eng, *E->tok, SessionOptions{.heal = false});  // the suggestion's tokens are exactly its text
  const std::string prompt = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n";
  ASSERT_TRUE(s.set_text(prompt).ok());
  SuggestOptions o;
  auto a = s.suggest(o);
  ASSERT_TRUE(a.ok());
  ASSERT_FALSE(a->text.empty());
  auto before = E->tok->encode(prompt);
  ASSERT_TRUE(before.ok());
  const size_t n_prompt = before->size();
  ASSERT_TRUE(s.accept(cp_count(a->text)).ok());
  EXPECT_EQ(s.text(), prompt + a->text);
  // The accepted text re-tokenizes to the prompt + the suggestion's tokens.
  auto after = E->tok->encode(s.text());
  ASSERT_TRUE(after.ok());
  std::vector<int32_t> expect = *before;
  expect.insert(expect.end(), a->tokens.begin(), a->tokens.end());
  ASSERT_EQ(*after, expect);
  auto b = s.suggest(o);
  ASSERT_TRUE(b.ok());
  // Every accepted token was reused; only the last is fed again (its logits
  // were never computed: it was sampled, not decoded).
  EXPECT_GE(b->timings.tokens_reused, static_cast<int64_t>(n_prompt + a->tokens.size() - 1));
  EXPECT_LE(b->timings.tokens_computed, 1);
  test::expect_status(s.accept(1000), StatusCode::kOutOfRange, {"accept of 1000"});
}

TEST(SessionSuggest, PiecesAreCompleteUtf8AndConcatenateToTheText) {
  REQUIRE_ENV();
  Session s(*E->eng, *E->tok);
  ASSERT_TRUE(s.set_text("今天开会要").ok());
  for (const char* more : {"讨论", "项目的进度，", "下周"}) {
    ASSERT_TRUE(s.edit(s.size_cp(), 0, more).ok());
    SuggestOptions o;
    o.max_tokens = 16;
    std::string joined;
    int n = 0;
    auto a = s.suggest(o, [&](std::string_view p) {
      EXPECT_TRUE(valid_utf8(p)) << "piece " << n;
      joined.append(p);
      ++n;
    });
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(joined, a->text);
    EXPECT_TRUE(valid_utf8(a->text));
    EXPECT_FALSE(a->tokens.empty());
    EXPECT_GE(a->timings.total_ms, a->timings.prefill_ms);
  }
}

// Typing what was suggested: the rest of the suggestion comes from the cache
// with no forward pass, and it is what a fresh session computes.
TEST(SessionSuggest, TypingThroughASuggestionIsFreeAndExact) {
  REQUIRE_ENV();
  for (bool heal : {false, true}) {
    Session s(*E->eng, *E->tok, SessionOptions{.heal = heal});
    ASSERT_TRUE(s.set_text("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n").ok());
    auto a = s.suggest();
    ASSERT_TRUE(a.ok());
    ASSERT_GE(cp_count(a->text), 4u) << a->text;
    const std::string predicted = a->text;
    int free = 0;
    for (size_t i = 0, b = 0; i < 4; ++i) {  // type the first 4 characters of it, one by one
      size_t len = 1;
      while (b + len < predicted.size() && (static_cast<unsigned char>(predicted[b + len]) & 0xC0) == 0x80) ++len;
      ASSERT_TRUE(s.edit(s.cursor(), 0, predicted.substr(b, len)).ok());
      b += len;
      auto t = s.suggest();
      ASSERT_TRUE(t.ok());
      if (t->typed_through > 0) {
        ++free;
        EXPECT_EQ(t->timings.tokens_computed, 0) << "heal=" << heal << " char " << i;
      }
      Session fresh(*E->eng, *E->tok, SessionOptions{.heal = heal});
      ASSERT_TRUE(fresh.set_text(s.text()).ok());
      auto f = fresh.suggest();
      ASSERT_TRUE(f.ok());
      EXPECT_EQ(t->tokens, f->tokens) << "heal=" << heal << " char " << i << ": \"" << t->text << "\" vs \"" << f->text << "\"";
      EXPECT_EQ(t->text, f->text);
    }
    // Healing re-generates the cut word, so every character typed into a
    // predicted token is free.
    if (heal) {
      EXPECT_GE(free, 3);
    }
  }
  // Without healing, typing a whole predicted token (when the text then
  // tokenizes to the prompt plus that token) is free.
  Session s(*E->eng, *E->tok, SessionOptions{.heal = false});
  const std::string text = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return";
  ASSERT_TRUE(s.set_text(text).ok());
  auto a = s.suggest();
  ASSERT_TRUE(a.ok());
  ASSERT_GE(a->tokens.size(), 2u);
  const std::string first = E->tok->token_bytes(a->tokens[0]);
  auto joined = E->tok->encode(text + first);
  auto alone = E->tok->encode(text);
  ASSERT_TRUE(joined.ok() && alone.ok());
  alone->push_back(a->tokens[0]);
  if (*joined != *alone) GTEST_SKIP() << "the first token does not re-tokenize to itself here";
  ASSERT_TRUE(s.edit(s.cursor(), 0, first).ok());
  auto t = s.suggest();
  ASSERT_TRUE(t.ok());
  EXPECT_GT(t->typed_through, 0);
  EXPECT_EQ(t->timings.tokens_computed, 0);
  EXPECT_TRUE(std::equal(a->tokens.begin() + 1, a->tokens.end(), t->tokens.begin()));
}

// Idle-time work: a suggestion extended by extend_chain() lets typing
// through all of it cost no decode step, and every later suggestion is still
// the fresh session's; an edit (a cancel) since the suggestion stops it.
TEST(SessionSuggest, ExtendedChainMakesTypingPastItsEndFreeAndExact) {
  REQUIRE_ENV();
  for (bool heal : {false, true}) {
    SCOPED_TRACE(heal ? "healing" : "no healing");
    Session s(*E->eng, *E->tok, SessionOptions{.heal = heal});
    ASSERT_TRUE(s.set_text("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n").ok());
    SuggestOptions opt;
    opt.max_tokens = 4;
    auto a = s.suggest(opt);
    ASSERT_TRUE(a.ok());
    ASSERT_EQ(a->tokens.size(), 4u) << a->text;
    EXPECT_EQ(s.extend_chain(8), 8);
    EXPECT_EQ(s.extend_chain(8), 8);  // again: the chain grows on
    // Type the suggestion's first two tokens: the next 4 come from the chain.
    const std::string typed = E->tok->token_bytes(a->tokens[0]) + E->tok->token_bytes(a->tokens[1]);
    ASSERT_TRUE(s.edit(s.cursor(), 0, typed).ok());
    auto t = s.suggest(opt);
    ASSERT_TRUE(t.ok());
    Session fresh(*E->eng, *E->tok, SessionOptions{.heal = heal});
    ASSERT_TRUE(fresh.set_text(s.text()).ok());
    auto f = fresh.suggest(opt);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(t->tokens, f->tokens) << "\"" << t->text << "\" vs \"" << f->text << "\"";
    if (t->typed_through > 0) {
      EXPECT_EQ(t->timings.tokens_computed, 0);
      EXPECT_TRUE(t->timings.decode_ms.empty()) << t->timings.decode_ms.size() << " decode steps";
    }
    // A cancel (as every edit, move and new request makes) since the last
    // suggestion: nothing is extended.
    s.cancel();
    EXPECT_EQ(s.extend_chain(8), 0);
  }
}

// Healing: a cursor inside a word re-generates the word's last tokens, and
// the suggestion continues the word instead of starting a new one.
TEST(SessionSuggest, HealingConstrainsTheFirstTokens) {
  REQUIRE_ENV();
  Session s(*E->eng, *E->tok);
  ASSERT_TRUE(s.set_text("import os\nimport sys\n\ndef main():\n    print(os.getc").ok());
  auto a = s.suggest();
  ASSERT_TRUE(a.ok());
  ASSERT_GT(a->healed_bytes, 0u);
  const std::string all = E->tok->decode(a->tokens, {.skip_special = true, .strip_leading_space = false});
  ASSERT_GE(all.size(), a->healed_bytes);
  const std::string healed = all.substr(0, a->healed_bytes);
  EXPECT_TRUE(s.text().ends_with(healed)) << "healed \"" << healed << "\"";
  EXPECT_TRUE(all.substr(a->healed_bytes).starts_with(a->text) || a->text.starts_with(all.substr(a->healed_bytes)));
  Session off(*E->eng, *E->tok, SessionOptions{.heal = false});
  ASSERT_TRUE(off.set_text(s.text()).ok());
  auto b = off.suggest();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->healed_bytes, 0u);
}

// FIM: a suffix after the cursor is in the prompt (and changes the
// suggestion's inputs); blank suffixes and FIM off give the plain prompt.
TEST(SessionSuggest, FimUsesABoundedSuffix) {
  REQUIRE_ENV();
  const std::string before = "def area(r):\n    return ";
  const std::string after = "\n\n\nprint(area(2.0))\n";
  Session s(*E->eng, *E->tok);
  ASSERT_TRUE(s.set_text(before + after).ok());
  ASSERT_TRUE(s.move(cp_count(before)).ok());
  auto a = s.suggest();
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->fim);
  const auto fim = E->tok->fim_tokens();
  ASSERT_TRUE(fim.complete());
  const auto& c = s.cached_tokens();
  EXPECT_NE(std::find(c.begin(), c.end(), fim.middle), c.end());
  EXPECT_LE(c.size(), 1 + 3 + 32 + E->tok->encode(before)->size() + 8);
  Session off(*E->eng, *E->tok, SessionOptions{.fim = FimOrder::kOff});
  ASSERT_TRUE(off.set_text(before + after).ok());
  ASSERT_TRUE(off.move(cp_count(before)).ok());
  auto b = off.suggest();
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->fim);
  Session blank(*E->eng, *E->tok);
  ASSERT_TRUE(blank.set_text(before + "\n  \n").ok());
  ASSERT_TRUE(blank.move(cp_count(before)).ok());
  auto d = blank.suggest();
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->fim);
  // Typing at the cursor leaves the suffix's text alone: in PSM order only the
  // new prefix tokens, the markers and the suffix are computed.
  ASSERT_TRUE(s.edit(s.cursor(), 0, "3").ok());
  auto e = s.suggest();
  ASSERT_TRUE(e.ok());
  EXPECT_LE(e->timings.tokens_computed, 3 + 3 + 32);
}

// A document longer than the context: the window starts at a line start,
// stays put while typing, and moves in large steps.
TEST(SessionSuggest, WindowHoldsStillWhileTyping) {
  REQUIRE_ENV();
  SessionOptions so{.fim = FimOrder::kOff, .context_tokens = 128};
  Session s(*E->eng, *E->tok, so);
  std::string doc;
  for (int i = 0; i < 40; ++i) doc += fmt::format("value_{} = compute({}, {})\n", i, i, i * 7);
  ASSERT_TRUE(s.set_text(doc).ok());
  auto a = s.suggest();
  ASSERT_TRUE(a.ok());
  const size_t w = s.window_start();
  EXPECT_GT(w, 0u);
  EXPECT_EQ(doc[utf8::offset_of(doc, w) - 1], '\n');  // a line start
  int moves = 0;
  const std::string line = "total = value_1 + value_2 + value_3\n";
  for (char ch : line) {
    ASSERT_TRUE(s.edit(s.cursor(), 0, std::string(1, ch)).ok());
    auto t = s.suggest();
    ASSERT_TRUE(t.ok());
    moves += t->window_moved;
    if (!t->window_moved) {
      EXPECT_LE(t->timings.tokens_computed, 3);
    }
  }
  EXPECT_LE(moves, 1) << "the window should move in large steps";
  EXPECT_EQ(s.window_moves(), moves + (a->window_moved ? 1 : 0));
}

}  // namespace
}  // namespace laya

// The C API's session calls over the default model.
#include "laya/laya.h"

namespace {

TEST(SessionCApi, EditSuggestAcceptCancel) {
  laya_model* m = nullptr;
  ASSERT_EQ(laya_model_load(LAYA_SOURCE_DIR "/models/laya-default-q8_0.gguf", &m), LAYA_OK) << laya_last_error();
  laya_engine* e = nullptr;
  ASSERT_EQ(laya_engine_create(m, 2, 512, &e), LAYA_OK) << laya_last_error();
  laya_tokenizer* t = nullptr;
  ASSERT_EQ(laya_tokenizer_from_model(m, &t), LAYA_OK) << laya_last_error();
  laya_session* s = nullptr;
  EXPECT_EQ(laya_session_new(nullptr, t, &s), LAYA_INVALID_ARGUMENT);
  ASSERT_EQ(laya_session_new(e, t, &s), LAYA_OK) << laya_last_error();
  const std::string text = "def square(x):\n    return";
  ASSERT_EQ(laya_session_set_text(s, text.data(), text.size()), LAYA_OK);
  EXPECT_EQ(laya_session_edit(s, 99, 0, "x", 1), LAYA_OUT_OF_RANGE);
  EXPECT_NE(std::string(laya_last_error()).find("code point 99"), std::string::npos) << laya_last_error();
  EXPECT_EQ(laya_session_edit(s, text.size(), 0, " ", 1), LAYA_OK);
  char buf[256];
  size_t len = 0;
  ASSERT_EQ(laya_session_suggest(s, 8, 1, 0, buf, sizeof buf, &len), LAYA_OK) << laya_last_error();
  EXPECT_EQ(std::strlen(buf), len);
  EXPECT_EQ(std::string(buf).find('\n'), std::string::npos);
  if (len > 0) {
    EXPECT_EQ(laya_session_suggest(s, 8, 1, 0, buf, len, &len), LAYA_OUT_OF_RANGE);
  }
  EXPECT_EQ(laya_session_suggest(s, 0, 0, 0, buf, sizeof buf, &len), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_session_accept(s, 100000), LAYA_OUT_OF_RANGE);
  ASSERT_EQ(laya_session_suggest(s, 8, 0, 1e-6, buf, sizeof buf, &len), LAYA_OK);  // a tiny budget: cut, still OK
  EXPECT_EQ(laya_session_move(s, 3), LAYA_OK);
  laya_session_cancel(s);
  laya_session_cancel(nullptr);
  laya_session_free(s);
  // Options: defaults round-trip, bad values are named, FIM/healing off works.
  laya_session_options o;
  laya_session_options_default(&o);
  EXPECT_EQ(o.heal, 1);
  EXPECT_EQ(o.fim, LAYA_FIM_PSM);
  o.fim_suffix_tokens = 0;
  EXPECT_EQ(laya_session_new_with_options(e, t, &o, &s), LAYA_INVALID_ARGUMENT);
  EXPECT_NE(std::string(laya_last_error()).find("fim_suffix_tokens"), std::string::npos) << laya_last_error();
  laya_session_options_default(&o);
  const int bad_fim = 7;  // as a C caller could pass it (copied: not a valid enum value in C++)
  std::memcpy(&o.fim, &bad_fim, sizeof bad_fim);
  EXPECT_EQ(laya_session_new_with_options(e, t, &o, &s), LAYA_INVALID_ARGUMENT);
  o.fim = LAYA_FIM_OFF;
  o.heal = 0;
  ASSERT_EQ(laya_session_new_with_options(e, t, &o, &s), LAYA_OK) << laya_last_error();
  ASSERT_EQ(laya_session_set_text(s, text.data(), text.size()), LAYA_OK);
  ASSERT_EQ(laya_session_suggest(s, 8, 0, 0, buf, sizeof buf, &len), LAYA_OK) << laya_last_error();
  laya_session_free(s);
  laya_tokenizer_free(t);
  laya_engine_free(e);
  laya_model_free(m);
}

}  // namespace
