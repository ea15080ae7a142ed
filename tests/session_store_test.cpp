// Session files (session/session_store.h): a saved and loaded session gives
// the same next suggestion and bit-identical logits as one that was never
// saved, and resumes computing nothing; every damaged or foreign file is
// refused with a message saying what is wrong; a failed save leaves the old file.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <xxhash.h>

#include "session/session_store.h"
#include "test_util.h"

namespace laya {
namespace {

namespace fs = std::filesystem;
using test::expect_status;

struct Env {
  std::shared_ptr<const Model> model;
  std::unique_ptr<tok::Tokenizer> tok;
  std::unique_ptr<Engine> eng, eng2, eng_f16;
};

std::unique_ptr<Engine> make_engine(std::shared_ptr<const Model> m, DType kv) {
  EngineOptions eo;
  eo.n_threads = test::sanitizer_threads(2);
  eo.n_ctx = 1024;
  eo.kv_type = kv;
  auto e = Engine::create(std::move(m), eo);
  return e.ok() ? std::move(e).value() : nullptr;
}

// The default model: an engine the sessions are saved from, a second one of
// the same model and options (a "restarted process": nothing resident), and
// one with an F16 cache (another KV type).
Env* env() {
  static Env* e = [] {
    auto* r = new Env;
    auto m = Model::load(LAYA_SOURCE_DIR "/models/laya-default-q8_0.gguf");
    if (!m.ok()) return r;
    r->model = std::move(m).value();
    auto t = tok::Tokenizer::from_gguf(*r->model->gguf_file());
    if (!t.ok()) return r;
    r->tok = std::move(t).value();
    r->eng = make_engine(r->model, DType::F32);
    r->eng2 = make_engine(r->model, DType::F32);
    r->eng_f16 = make_engine(r->model, DType::F16);
    return r;
  }();
  return e;
}

#define REQUIRE_ENV()                                                        \
  Env* E = env();                                                            \
  ASSERT_TRUE(E->eng && E->eng2 && E->eng_f16 && E->tok) << "default model did not load"

// A few hundred tokens of code: long enough for several 64-position blocks
// and a partial last one (180 tokens, 3 blocks with a suggestion, under the sanitizer,
// whose forward passes were most of its SessionStore tests' 150 s).
std::string doc(int variant) {
  std::string s = "# Licence: MIT. Copyright the laya authors. Permission is granted to use this file.\n";
  const int functions = test::kSanitizerBuild ? 6 : 12;
  for (int i = 0; i < functions; ++i) {
    s += fmt::format("def f{}_{}(x, y):\n    total = x * {} + y\n    return total - {}\n\n", variant, i, i + variant,
                     i * 3);
  }
  return s;
}

std::string tmp_path(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / fmt::format("laya_store_test_{}", getpid());
  fs::create_directories(d);
  return (d / name).string();
}

std::string read_all(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void write_all(const std::string& p, const std::string& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(b.data(), static_cast<std::streamsize>(b.size()));
}

// A session with a suggestion made: cursor in the middle (FIM suffix) or at the end.
std::unique_ptr<Session> typed_session(Engine& eng, const tok::Tokenizer& tok, const std::string& text, bool middle) {
  auto s = std::make_unique<Session>(eng, tok);
  EXPECT_TRUE(s->set_text(text).ok());
  if (middle) {
    EXPECT_TRUE(s->move(s->size_cp() * 2 / 3).ok());
  }
  auto r = s->suggest();
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return s;
}

// The next step of a user: type one character, then a suggestion.
Suggestion next_step(Session& s) {
  EXPECT_TRUE(s.edit(s.cursor(), 0, "q").ok());
  auto r = s.suggest();
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r.value() : Suggestion{};
}

void expect_same_logits(const Session& a, const Session& b, int64_t n_vocab) {
  ASSERT_NE(a.prompt_logits(), nullptr);
  ASSERT_NE(b.prompt_logits(), nullptr);
  EXPECT_EQ(std::memcmp(a.prompt_logits(), b.prompt_logits(), static_cast<size_t>(n_vocab) * sizeof(float)), 0)
      << "logits differ";
}

TEST(SessionStore, RoundTripResumesWarmWithIdenticalSuggestionsAndLogits) {
  REQUIRE_ENV();
  for (bool middle : {false, true}) {
    SCOPED_TRACE(middle ? "cursor in the middle" : "cursor at the end");
    auto a = typed_session(*E->eng, *E->tok, doc(middle ? 1 : 5), middle);
    const std::string first = a->current()->text;
    const std::string path = tmp_path("one.laya");
    ASSERT_TRUE(save_session(*a, path).ok());
    // Into the same engine (full blocks shared with `a`) and into a fresh one
    // (a restarted process: every block copied).
    E->eng2->forget_cached_kv();
    auto r1 = load_sessions(*E->eng, *E->tok, path);
    auto r2 = load_sessions(*E->eng2, *E->tok, path);
    ASSERT_TRUE(r1.ok()) << r1.status().to_string();
    ASSERT_TRUE(r2.ok()) << r2.status().to_string();
    EXPECT_GT(r1->blocks_shared, 0);
    EXPECT_EQ(r2->blocks_shared, 0);
    EXPECT_EQ(r2->blocks_copied, a->kv_blocks().n_blocks());
    for (auto* r : {&r1.value(), &r2.value()}) {
      ASSERT_EQ(r->sessions.size(), 1u);
      EXPECT_TRUE(r->warm) << r->note;
      Session& b = *r->sessions[0];
      EXPECT_EQ(b.text(), a->text());
      EXPECT_EQ(b.cursor(), a->cursor());
      EXPECT_EQ(b.window_start(), a->window_start());
      EXPECT_EQ(b.cached_tokens(), a->cached_tokens());
      // The same suggestion again: nothing recomputed, not even the last token.
      auto again = b.suggest();
      ASSERT_TRUE(again.ok());
      EXPECT_EQ(again->text, first);
      EXPECT_EQ(again->timings.tokens_computed, 0);
      EXPECT_TRUE(again->timings.decode_ms.empty());
    }
    // The next keystroke: the same suggestion and bit-identical logits as the never-saved session.
    const Suggestion an = next_step(*a);
    for (auto* r : {&r1.value(), &r2.value()}) {
      Session& b = *r->sessions[0];
      const Suggestion bn = next_step(b);
      EXPECT_EQ(bn.text, an.text);
      EXPECT_EQ(bn.tokens, an.tokens);
      EXPECT_EQ(bn.timings.tokens_computed, an.timings.tokens_computed);
      expect_same_logits(*a, b, E->eng->n_vocab());
    }
  }
}

TEST(SessionStore, SetWithSharedHeadStoresItOnce) {
  REQUIRE_ENV();
  // Two documents with the same head (several blocks) and different tails.
  const std::string head = doc(7);
  auto a = typed_session(*E->eng, *E->tok, head + "def tail_a():\n    return 1\n", false);
  auto b = typed_session(*E->eng, *E->tok, head + "class TailB:\n    pass\n", false);
  // The blocks the second document adopted: those its ids share with the first's.
  const auto ia = a->kv_blocks().ids(), ib = b->kv_blocks().ids();
  int shared = 0;
  while (shared < int(ia.size()) && shared < int(ib.size()) && ia[size_t(shared)] == ib[size_t(shared)]) ++shared;
  ASSERT_GT(shared, 0);
  EXPECT_EQ(a->kv_blocks().ids()[0], b->kv_blocks().ids()[0]) << "the second document adopts the head's blocks";
  const std::string dir = tmp_path("store");
  const Session* both[] = {a.get(), b.get()};
  ASSERT_TRUE(save_session_dir(both, dir).ok());
  const size_t bb = E->eng->kv_pool().layout().block_bytes();
  const size_t file = fs::file_size(fs::path(dir) / kSessionFileName);
  const size_t all_blocks = static_cast<size_t>(a->kv_blocks().n_blocks() + b->kv_blocks().n_blocks()) * bb;
  EXPECT_LT(file, all_blocks) << "shared blocks are written once";
  E->eng2->forget_cached_kv();
  auto r = load_session_dir(*E->eng2, *E->tok, dir);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->sessions.size(), 2u);
  EXPECT_GE(r->blocks_shared, shared);
  EXPECT_EQ(r->sessions[0]->kv_blocks().ids()[0], r->sessions[1]->kv_blocks().ids()[0]);
  for (int i = 0; i < 2; ++i) {
    auto s = r->sessions[static_cast<size_t>(i)]->suggest();
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->text, (i == 0 ? a : b)->current()->text);
    EXPECT_EQ(s->timings.tokens_computed, 0);
  }
}

// The file with its header checksum recomputed after `edit` (a hostile or
// newer file that is not merely damaged).
std::string with_header(std::string bytes, const std::function<void(char*)>& edit) {
  edit(bytes.data());
  const uint64_t h = XXH3_64bits(bytes.data(), 248);
  std::memcpy(bytes.data() + 248, &h, 8);
  return bytes;
}

TEST(SessionStore, DamagedFilesAreRefusedWithTheirReason) {
  REQUIRE_ENV();
  auto a = typed_session(*E->eng, *E->tok, doc(2), true);
  const std::string good = tmp_path("good.laya");
  ASSERT_TRUE(save_session(*a, good).ok());
  const std::string bytes = read_all(good);
  ASSERT_GT(bytes.size(), 1000u);
  const std::string bad = tmp_path("bad.laya");
  auto expect_refused = [&](const std::string& b, StatusCode code, std::initializer_list<const char*> frag) {
    write_all(bad, b);
    const int64_t in_use = E->eng2->kv_pool().n_in_use();
    auto r = load_sessions(*E->eng2, *E->tok, bad);
    ASSERT_FALSE(r.ok());
    expect_status(r.status(), code, frag);
    EXPECT_EQ(E->eng2->kv_pool().n_in_use(), in_use) << "a refused file takes no block";
  };
  for (size_t cut : {size_t{1}, size_t{100}, size_t{255}}) {
    SCOPED_TRACE(cut);
    expect_refused(bytes.substr(0, cut), StatusCode::kCorrupt, {"bad.laya", "truncated", "the header alone"});
  }
  for (size_t cut : {size_t{256}, size_t{300}, bytes.size() / 2, bytes.size() - 1}) {
    SCOPED_TRACE(cut);
    expect_refused(bytes.substr(0, cut), StatusCode::kCorrupt, {"truncated: the header says"});
  }
  expect_refused(bytes + "x", StatusCode::kCorrupt, {"trailing bytes"});
  auto flip = [&](size_t at) {
    std::string b = bytes;
    b[at] = static_cast<char>(b[at] ^ 0x10);
    return b;
  };
  expect_refused(flip(0), StatusCode::kCorrupt, {"not a laya session file"});
  expect_refused(flip(40), StatusCode::kCorrupt, {"header checksum"});
  expect_refused(flip(260), StatusCode::kCorrupt, {"payload checksum"});                  // a session record
  expect_refused(flip(bytes.size() - 7), StatusCode::kCorrupt, {"payload checksum"});     // KV bytes
  expect_refused(with_header(bytes, [](char* h) { h[8] = 2; }), StatusCode::kUnsupported, {"version 2", "reads version 1"});
  expect_refused(flip(8), StatusCode::kUnsupported, {"version 17", "or the header is damaged"});
  // A hostile count with a valid header checksum: refused before any allocation.
  expect_refused(with_header(bytes, [](char* h) { const uint64_t n = uint64_t{1} << 60; std::memcpy(h + 80, &n, 8); }),
                 StatusCode::kCorrupt, {"sessions cannot fit"});
  // The good file still loads.
  auto r = load_sessions(*E->eng2, *E->tok, good);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  expect_status(load_sessions(*E->eng2, *E->tok, tmp_path("absent.laya")).status(), StatusCode::kNotFound, {"absent.laya"});
}

TEST(SessionStore, AnotherModelOrKvTypeIsRefusedOrRestoredFromText) {
  REQUIRE_ENV();
  LAYA_REQUIRE_FIXTURES(fx);
  auto a = typed_session(*E->eng, *E->tok, doc(3), false);
  const std::string path = tmp_path("f32.laya");
  ASSERT_TRUE(save_session(*a, path).ok());
  LoadOptions strict;
  strict.text_fallback = false;
  // Another KV type.
  expect_status(load_sessions(*E->eng_f16, *E->tok, path, strict).status(), StatusCode::kInvalidArgument,
                {"KV type f32 in the file", "engine's is f16"});
  auto r = load_sessions(*E->eng_f16, *E->tok, path);  // text fallback: recomputes
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FALSE(r->warm);
  EXPECT_NE(r->note.find("KV type"), std::string::npos) << r->note;
  EXPECT_EQ(r->sessions[0]->text(), a->text());
  EXPECT_TRUE(r->sessions[0]->cached_tokens().empty());
  auto s = r->sessions[0]->suggest();
  ASSERT_TRUE(s.ok());
  EXPECT_GT(s->timings.tokens_computed, 0);
  // Another model (the fixtures' llama-tiny).
  auto m = Model::load(fx + "/ref-models/llama-tiny/gguf/llama-tiny-f16.gguf");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  std::shared_ptr<const Model> other = std::move(m).value();
  auto eo = make_engine(other, DType::F32);
  ASSERT_TRUE(eo);
  auto ot = tok::Tokenizer::from_gguf(*other->gguf_file());
  ASSERT_TRUE(ot.ok());
  expect_status(load_sessions(*eo, *ot.value(), path, strict).status(), StatusCode::kInvalidArgument,
                {"written with another model", "laya-default-q8_0.gguf", "llama-tiny-f16.gguf"});
  auto r2 = load_sessions(*eo, *ot.value(), path);
  ASSERT_TRUE(r2.ok()) << r2.status().to_string();
  EXPECT_FALSE(r2->warm);
  EXPECT_EQ(r2->sessions[0]->text(), a->text());
  r2->sessions.clear();
}

TEST(SessionStore, AFullPoolRestoresTheTextAndSaysWhy) {
  REQUIRE_ENV();
  auto a = typed_session(*E->eng, *E->tok, doc(6), false);
  ASSERT_GT(a->kv_blocks().n_blocks(), 2);
  const std::string path = tmp_path("big.laya");
  ASSERT_TRUE(save_session(*a, path).ok());
  EngineOptions eo;
  eo.n_threads = 1;
  eo.n_ctx = 1024;
  eo.kv_budget_bytes = 2 * E->eng->kv_pool().layout().block_bytes();
  auto small = Engine::create(E->model, eo);
  ASSERT_TRUE(small.ok()) << small.status().to_string();
  auto r = load_sessions(*small.value(), *E->tok, path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_FALSE(r->warm);
  EXPECT_NE(r->note.find("restored from its text"), std::string::npos) << r->note;
  EXPECT_NE(r->note.find("pool full"), std::string::npos) << r->note;
  EXPECT_EQ(r->sessions[0]->text(), a->text());
  EXPECT_TRUE(r->sessions[0]->cached_tokens().empty());
  EXPECT_EQ(small.value()->kv_pool().n_in_use(), 0) << "the blocks taken before the failure are given back";
  r->sessions.clear();
}

// release_kv: the full blocks stay cached, so the next suggest adopts them and
// recomputes less than one block, with the suggestion of a session that kept
// its KV; a new session of the same text adopts them too (an empty sequence
// looks for its prompt's blocks).
TEST(SessionStore, ReleasedKvComesBackFromTheCache) {
  REQUIRE_ENV();
  E->eng->forget_cached_kv();
  auto a = typed_session(*E->eng, *E->tok, doc(8), false);
  const int64_t n = static_cast<int64_t>(a->cached_tokens().size());
  const int64_t bp = E->eng->kv_pool().layout().block_pos;
  ASSERT_GT(n, 2 * bp);
  const int64_t in_use = E->eng->kv_pool().n_in_use();
  ASSERT_TRUE(a->release_kv().ok());
  EXPECT_TRUE(a->cached_tokens().empty());
  EXPECT_EQ(a->kv_blocks().n_blocks(), 0);
  EXPECT_LT(E->eng->kv_pool().n_in_use(), in_use);
  EXPECT_GE(E->eng->kv_pool().n_cached(), n / bp) << "the full blocks stay cached";
  ASSERT_TRUE(a->edit(a->cursor(), 0, "x").ok());
  auto s = a->suggest();
  ASSERT_TRUE(s.ok());
  EXPECT_GE(s->timings.tokens_reused, (n / bp) * bp);
  EXPECT_LE(s->timings.tokens_computed, bp + 2) << "only the last, partial block is recomputed";
  // A new session of the same text adopts the same blocks, and suggests the same.
  Session fresh(*E->eng, *E->tok);
  ASSERT_TRUE(fresh.set_text(doc(8) + "x").ok());
  auto f = fresh.suggest();
  ASSERT_TRUE(f.ok());
  EXPECT_GT(f->timings.tokens_reused, 0);
  EXPECT_EQ(fresh.kv_blocks().ids()[0], a->kv_blocks().ids()[0]) << "the first block is shared";
  EXPECT_EQ(f->text, s->text);
}

TEST(SessionStore, FailedSaveLeavesTheOldFile) {
  REQUIRE_ENV();
  auto a = typed_session(*E->eng, *E->tok, doc(4), false);
  const std::string path = tmp_path("keep.laya");
  ASSERT_TRUE(save_session(*a, path).ok());
  const std::string before = read_all(path);
  // A folder where the file should go.
  const std::string dir = tmp_path("a_folder");
  fs::create_directories(dir);
  EXPECT_FALSE(save_session(*a, dir).ok());
  EXPECT_TRUE(fs::is_directory(dir));
  // Sessions of two engines in one file: refused before anything is written.
  auto b = typed_session(*E->eng2, *E->tok, doc(4), false);
  const Session* mixed[] = {a.get(), b.get()};
  expect_status(save_sessions(mixed, path), StatusCode::kInvalidArgument, {"another engine"});
  EXPECT_EQ(read_all(path), before);
  // A file that is not a session file is not replaced.
  const std::string text = tmp_path("notes.txt");
  write_all(text, "my notes\n");
  EXPECT_FALSE(save_session(*a, text).ok());
  EXPECT_EQ(read_all(text), "my notes\n");
  // No temporary file is left beside them.
  for (const auto& ent : fs::directory_iterator(fs::path(path).parent_path()))
    EXPECT_EQ(ent.path().filename().string().find(".tmp"), std::string::npos) << ent.path();
  // Replacing a session file is allowed, and the result loads.
  ASSERT_TRUE(save_session(*b, path).ok());
  EXPECT_TRUE(load_sessions(*E->eng2, *E->tok, path).ok());
}

}  // namespace
}  // namespace laya
