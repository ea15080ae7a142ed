// Hot model swap (issue 12, scope 3): a ModelSlot replaces its model while
// sessions suggest. A suggestion in flight finishes on the old model, the next
// equals a fresh session's on the new one (another vocabulary included); a
// failed swap (missing, truncated, NaN-producing file) leaves the old model
// serving and says why; A -> B -> A finds A's caches; a replaced model is
// freed when its last user lets go.
#include <gtest/gtest.h>

#include <unistd.h>

#include <condition_variable>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include "format/gguf.h"
#include "modelgen/presets.h"
#include "session/model_slot.h"
#include "session/session.h"
#include "test_util.h"

namespace laya {
namespace {

namespace fs = std::filesystem;

const std::string kDefault = LAYA_SOURCE_DIR "/models/laya-default-q8_0.gguf";

// Short texts: every suggest here is a prefill of a few dozen tokens.
constexpr const char* kCode = "def fibonacci(n):\n    if n < 2:\n        return n\n    return ";
// Over one KV block (64 positions) with either tokenizer, so a swap back can adopt cached blocks.
constexpr const char* kLong =
    "import os\nimport sys\n\n\ndef read_lines(path):\n    \"\"\"Return the lines of the file at path.\"\"\"\n"
    "    with open(path) as f:\n        return [line.rstrip() for line in f]\n\n\ndef main(argv):\n"
    "    for name in argv[1:]:\n        for line in read_lines(name):\n            print(";

std::string demo_path() {
  const std::string fx = test::fixtures_dir();
  return fx.empty() ? "" : fx + "/demo-model/demo-q8_0.gguf";
}

#define REQUIRE_DEMO(var)                                                                  \
  const std::string var = demo_path();                                                     \
  if (var.empty()) GTEST_SKIP() << "../shared/fixtures not found: the demo model is the second model"

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("laya_swap_" + std::to_string(::getpid()) + "_" + name)).string();
}

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& n) : path(temp_path(n)) {}
  ~TempFile() { std::remove(path.c_str()); }
};

ModelSlotOptions slot_options() {
  ModelSlotOptions o;
  o.engine.n_threads = 2;
  o.engine.n_ctx = 512;
  o.engine.lock_memory = false;
  return o;
}

std::unique_ptr<ModelSlot> make_slot(const std::string& path, const ModelSlotOptions& o = slot_options()) {
  auto s = ModelSlot::create(path, o);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? std::move(s).value() : nullptr;
}

SuggestOptions opts() {
  SuggestOptions o;
  o.max_tokens = 6;
  return o;
}

// A fresh session's suggestion on bundle b for the live session's text, cursor and window.
Suggestion fresh(const ModelBundle& b, const Session& live) {
  Session s(*b.engine, *b.tokenizer);
  EXPECT_TRUE(s.set_text(live.text()).ok());
  EXPECT_TRUE(s.move(live.cursor()).ok());
  EXPECT_TRUE(s.pin_window(live.window_start()).ok());
  auto r = s.suggest(opts());
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r).value() : Suggestion{};
}

TEST(ModelSwap, SuggestionInFlightFinishesOnTheOldModelTheNextUsesTheNew) {
  REQUIRE_DEMO(demo);
  auto slot = make_slot(kDefault);
  ASSERT_TRUE(slot);
  const auto old_bundle = slot->current();
  Session live(*slot);
  ASSERT_TRUE(live.set_text(kCode).ok());

  // The suggest pauses in its first piece (the session's lock held, mid
  // generation) until the swap has completed on this thread.
  std::mutex mu;
  std::condition_variable cv;
  bool paused = false, resume = false, done = false;
  std::optional<Result<Suggestion>> in_flight;
  std::thread t([&] {
    auto r = live.suggest(opts(), [&](std::string_view) {
      std::unique_lock<std::mutex> lock(mu);
      if (paused) return;
      paused = true;
      cv.notify_all();
      cv.wait(lock, [&] { return resume; });
    });
    std::lock_guard<std::mutex> lock(mu);
    in_flight.emplace(std::move(r));
    done = true;
    cv.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return paused || done; });
  }
  const Status st = slot->swap_model(demo);  // while the suggestion is in flight
  {
    std::lock_guard<std::mutex> lock(mu);
    resume = true;
  }
  cv.notify_all();
  t.join();
  ASSERT_TRUE(paused) << "the suggestion produced no text to pause in";
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(slot->current()->path, demo);
  EXPECT_EQ(slot->swaps(), 1);

  ASSERT_TRUE(in_flight && in_flight->ok()) << in_flight->status().to_string();
  EXPECT_FALSE((*in_flight)->rebound);
  EXPECT_EQ(live.bundle()->id, old_bundle->id);  // it held the old model to its end
  const Suggestion want_old = fresh(*old_bundle, live);
  EXPECT_EQ((*in_flight)->tokens, want_old.tokens);
  EXPECT_EQ((*in_flight)->text, want_old.text);

  auto next = live.suggest(opts());
  ASSERT_TRUE(next.ok()) << next.status().to_string();
  EXPECT_TRUE(next->rebound);
  EXPECT_EQ(live.bundle()->path, demo);
  const Suggestion want_new = fresh(*slot->current(), live);
  EXPECT_EQ(next->tokens, want_new.tokens);
  EXPECT_EQ(next->text, want_new.text);
}

// A model with output_norm.weight set to NaN: it loads (the metadata and
// shapes are right) and only the probe catches it. A copy of `source`, or
// else the tiny mkmodel model.
void write_nan_model(const std::string& path, const std::string& source = "") {
  if (!source.empty()) {
    fs::copy_file(source, path, fs::copy_options::overwrite_existing);
  } else {
    const ModelPreset* p = find_preset("test-tiny");
    ASSERT_NE(p, nullptr);
    MkModelOptions mo;
    mo.type = MkType::kF32;
    mo.n_threads = 2;
    auto rep = make_random_model(*p, mo, path);
    ASSERT_TRUE(rep.ok()) << rep.status().to_string();
  }
  size_t offset = 0, nbytes = 0;
  {
    auto f = gguf::File::open(path);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    const gguf::TensorInfo* t = (*f)->find_tensor("output_norm.weight");
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->type, DType::F32);
    offset = static_cast<size_t>(t->data - (*f)->mapping().data());
    nbytes = t->nbytes;
  }
  std::fstream out(path, std::ios::in | std::ios::out | std::ios::binary);
  out.seekp(static_cast<std::streamoff>(offset));
  const float nan = std::nanf("");
  for (size_t i = 0; i < nbytes / sizeof(float); ++i) out.write(reinterpret_cast<const char*>(&nan), sizeof nan);
  ASSERT_TRUE(out.good());
}

TEST(ModelSwap, FailedSwapKeepsTheOldModelServingAndSaysWhy) {
  auto slot = make_slot(kDefault);
  ASSERT_TRUE(slot);
  const uint64_t id = slot->current_id();
  Session live(*slot);
  ASSERT_TRUE(live.set_text(kCode).ok());
  auto before = live.suggest(opts());
  ASSERT_TRUE(before.ok());

  const std::string missing = temp_path("missing.gguf");
  test::expect_status(slot->swap_model(missing), StatusCode::kNotFound, {"swap to", "missing.gguf", "keeps serving"});

  TempFile truncated("truncated.gguf");
  fs::copy_file(kDefault, truncated.path);
  fs::resize_file(truncated.path, fs::file_size(kDefault) / 2);
  Status st = slot->swap_model(truncated.path);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("swap to " + truncated.path + ": load:"), std::string::npos) << st.message();

  TempFile nan_model("nan.gguf");
  write_nan_model(nan_model.path);
  test::expect_status(slot->swap_model(nan_model.path), StatusCode::kCorrupt,
                      {"swap to", "nan.gguf", "probe:", "nan", "expected finite"});

  EXPECT_EQ(slot->current_id(), id);
  EXPECT_EQ(slot->swaps(), 0);
  ASSERT_TRUE(live.edit(live.cursor(), 0, "f").ok());
  ASSERT_TRUE(live.edit(live.cursor() - 1, 1, "").ok());
  auto after = live.suggest(opts());
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->rebound);
  EXPECT_EQ(after->tokens, before->tokens);
}

TEST(ModelSwap, SwapBackAndForthGivesFreshSuggestionsAndFindsTheCaches) {
  REQUIRE_DEMO(demo);
  auto slot = make_slot(kDefault);
  ASSERT_TRUE(slot);
  const uint64_t a_id = slot->current_id();
  Session live(*slot);
  ASSERT_TRUE(live.set_text(kLong).ok());
  for (int round = 0; round < 3; ++round) {  // A, B, A
    SCOPED_TRACE(round);
    if (round > 0) {
      ASSERT_TRUE(slot->swap_model(round == 1 ? demo : kDefault).ok());
    }
    auto s = live.suggest(opts());
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(s->rebound, round > 0);
    EXPECT_EQ(s->tokens, fresh(*slot->current(), live).tokens);
    if (round == 2) {
      EXPECT_EQ(slot->current_id(), a_id);  // the kept bundle, not a reload
      EXPECT_GE(s->timings.tokens_reused, 64) << "A's pool still held this prompt's blocks";
    }
    ASSERT_TRUE(live.edit(live.cursor(), 0, "x").ok());  // typing goes on between swaps
  }
}

TEST(ModelSwap, OtherVocabularySessionsAreRetokenized) {
  REQUIRE_DEMO(demo);
  auto slot = make_slot(kDefault);
  ASSERT_TRUE(slot);
  const auto a = slot->current();
  const std::string text = "The meeting notes:\n- review the budget\n- def parse(s): ";
  const auto ids_a = a->tokenizer->encode(text);
  Session live(*slot);
  ASSERT_TRUE(live.set_text(text).ok());
  ASSERT_TRUE(live.suggest(opts()).ok());
  ASSERT_TRUE(slot->swap_model(demo).ok());
  const auto b = slot->current();
  const auto ids_b = b->tokenizer->encode(text);
  ASSERT_TRUE(ids_a.ok() && ids_b.ok());
  ASSERT_NE(ids_a.value(), ids_b.value()) << "the two models must tokenize differently for this test to mean anything";

  // Edits made before the next suggest (on the old tokenizer's state) are kept.
  ASSERT_TRUE(live.edit(live.cursor(), 0, "ret").ok());
  auto s = live.suggest(opts());
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_TRUE(s->rebound);
  EXPECT_EQ(&live.tokenizer(), b->tokenizer.get());
  Session f(*b->engine, *b->tokenizer);
  ASSERT_TRUE(f.set_text(live.text()).ok());
  auto fs_ = f.suggest(opts());
  ASSERT_TRUE(fs_.ok());
  EXPECT_EQ(s->tokens, fs_->tokens);
  EXPECT_EQ(live.cached_tokens(), f.cached_tokens());  // the prompt in B's ids, nothing of A's
  // And typing goes on incrementally on B.
  ASSERT_TRUE(live.edit(live.cursor(), 0, "urn").ok());
  auto s2 = live.suggest(opts());
  ASSERT_TRUE(s2.ok());
  EXPECT_FALSE(s2->rebound);
  EXPECT_EQ(s2->tokens, fresh(*b, live).tokens);
}

TEST(ModelSwap, ReplacedModelIsFreedWhenItsLastUserLetsGo) {
  REQUIRE_DEMO(demo);
  {  // No LRU: the session is the last user of A.
    ModelSlotOptions o = slot_options();
    o.keep_previous = false;
    auto slot = make_slot(kDefault, o);
    ASSERT_TRUE(slot);
    std::weak_ptr<const ModelBundle> a = slot->current();
    Session live(*slot);
    ASSERT_TRUE(live.set_text(kCode).ok());
    ASSERT_TRUE(live.suggest(opts()).ok());
    ASSERT_TRUE(slot->swap_model(demo).ok());
    EXPECT_FALSE(a.expired()) << "the session still holds A until its next suggest";
    ASSERT_TRUE(live.suggest(opts()).ok());
    EXPECT_TRUE(a.expired());
  }
  {  // LRU of one: A -> B -> C frees A (no session holds it); memory holds two models.
    TempFile copy("demo_copy.gguf");
    fs::copy_file(demo, copy.path);
    auto slot = make_slot(kDefault);
    ASSERT_TRUE(slot);
    std::weak_ptr<const ModelBundle> a = slot->current();
    ASSERT_TRUE(slot->swap_model(demo).ok());
    EXPECT_FALSE(a.expired()) << "kept for a swap back";
    std::weak_ptr<const ModelBundle> b = slot->current();
    ASSERT_TRUE(slot->swap_model(copy.path).ok());
    EXPECT_TRUE(a.expired());
    EXPECT_FALSE(b.expired());
    ASSERT_TRUE(slot->swap_model(copy.path).ok());  // the file already serving: nothing to do
    EXPECT_EQ(slot->swaps(), 2);
  }
}

TEST(ModelSwap, PrewarmedSessionComputesOnlyWhatChangedAfterTheSwap) {
  REQUIRE_DEMO(demo);
  for (const int prewarm : {4, 0}) {
    SCOPED_TRACE(prewarm);
    ModelSlotOptions o = slot_options();
    o.prewarm_sessions = prewarm;
    auto slot = make_slot(kDefault, o);
    ASSERT_TRUE(slot);
    Session live(*slot);
    Session idle(*slot);  // never suggested: not prewarmed (and no harm)
    ASSERT_TRUE(live.set_text(kLong).ok());
    ASSERT_TRUE(idle.set_text(kCode).ok());
    ASSERT_TRUE(live.suggest(opts()).ok());
    ASSERT_TRUE(slot->swap_model(demo).ok());
    auto s = live.suggest(opts());
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_TRUE(s->rebound);
    if (prewarm > 0) {
      EXPECT_LE(s->timings.tokens_computed, 1) << "the swap computed the prompt on the new model already";
    } else {
      EXPECT_GT(s->timings.tokens_computed, 64) << "no prewarm: the whole re-tokenized prompt";
    }
    EXPECT_EQ(s->tokens, fresh(*slot->current(), live).tokens);
    auto i = idle.suggest(opts());
    ASSERT_TRUE(i.ok());
    EXPECT_EQ(i->tokens, fresh(*slot->current(), idle).tokens);
  }
}

double rss_mb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return -1;
}

// Memory stays bounded: swaps back and forth and failed swaps (a model that
// loads, is prepared and fails the probe) leave the resident size where one
// swap left it (± 5 %).
TEST(ModelSwap, RepeatedSwapsAndFailuresDoNotGrowMemory) {
  REQUIRE_DEMO(demo);
  TempFile nan_model("nan_rss.gguf");
  write_nan_model(nan_model.path, demo);  // as large as the models served
  auto slot = make_slot(kDefault);
  ASSERT_TRUE(slot);
  Session live(*slot);
  ASSERT_TRUE(live.set_text(kCode).ok());
  double after_first = 0;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(slot->swap_model(i % 2 == 0 ? demo : kDefault).ok());
    EXPECT_FALSE(slot->swap_model(nan_model.path).ok());
    ASSERT_TRUE(live.suggest(opts()).ok());
    if (i == 0) after_first = rss_mb();
  }
  const double end = rss_mb();
  if (after_first <= 0) GTEST_SKIP() << "no /proc/self/status";
  EXPECT_LE(end, after_first * 1.05) << "RSS " << after_first << " MB after one swap, " << end << " MB after ten";
}

}  // namespace
}  // namespace laya
