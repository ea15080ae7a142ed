// Engine API for interactive use: independent sequences, cutting the cache
// back and re-prefilling, errors at the limits, and an idle engine that
// does not burn CPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <thread>
#include <vector>

#include "backend/cpu/kernels.h"
#include "core/memlock.h"
#include "engine/engine.h"
#include "test_util.h"

namespace laya {
namespace {

std::unique_ptr<Engine> make_engine(const std::string& path, int threads = 2, bool background = false) {
  auto m = Model::load(path);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  if (!m.ok()) return nullptr;
  EngineOptions eo;
  eo.n_threads = threads;
  eo.n_ctx = 128;
  eo.n_batch = 16;
  eo.background = background;
  auto e = Engine::create(std::shared_ptr<const Model>(std::move(m).value()), eo);
  EXPECT_TRUE(e.ok());
  return e.ok() ? std::move(e).value() : nullptr;
}

TEST(EngineApi, DefaultKvBudgetHoldsTheContextsAsked) {
  // The shipped model, F32 cache: 4,096 positions are 64 blocks of 393 KB, past the 16 MiB floor.
  auto m = Model::load(LAYA_SOURCE_DIR "/models/laya-default-q8_0.gguf");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  std::shared_ptr<const Model> model = std::move(m).value();
  int64_t blocks[2] = {0, 0};
  for (int64_t c : {1, 2}) {
    EngineOptions eo;
    eo.n_threads = 1;
    eo.n_ctx = 4096;
    eo.kv_type = DType::F32;
    eo.kv_default_contexts = c;
    auto e = Engine::create(model, eo);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    blocks[c - 1] = (*e)->kv_pool().n_blocks();
  }
  EXPECT_EQ(blocks[0], 4096 / 64);
  EXPECT_EQ(blocks[1], 2 * 4096 / 64);
}

std::vector<float> logits_copy(const Engine& e, const Sequence& s) { return {s.logits(), s.logits() + e.n_vocab()}; }

TEST(EngineApi, SequencesAreIndependentAndTruncateReusesThePrefix) {
  LAYA_REQUIRE_FIXTURES(fx);
  auto e = make_engine(fx + "/ref-models/qwen3-tiny/gguf/qwen3-tiny-q8_0.gguf");
  ASSERT_TRUE(e);
  const std::vector<int32_t> a = {5, 17, 99, 300, 42, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21};
  std::vector<int32_t> b = a;
  b[12] = 400;  // an edit in the middle
  auto s1 = e->new_sequence(), s2 = e->new_sequence(), s3 = e->new_sequence();
  ASSERT_TRUE(e->prefill(*s1, a, 0).ok());
  const auto la = logits_copy(*e, *s1);
  ASSERT_TRUE(e->prefill(*s2, b, 0).ok());
  const auto lb = logits_copy(*e, *s2);
  // Each sequence keeps its own logits: s2's forward left s1's as they were.
  EXPECT_EQ(logits_copy(*e, *s1), la);
  // s1 again: must not have been disturbed by s2.
  ASSERT_TRUE(e->decode(*s1, 77).ok());
  const auto la_next = logits_copy(*e, *s1);
  // Reuse s1's cache up to the edit: cut back to 12, feed b's tail.
  ASSERT_TRUE(e->prefill(*s1, std::span<const int32_t>(b.data() + 12, b.size() - 12), 12).ok());
  const auto lb_reused = logits_copy(*e, *s1);
  for (int64_t i = 0; i < e->n_vocab(); ++i) EXPECT_NEAR(lb_reused[i], lb[i], 1e-4) << i;
  // A fresh sequence fed a + [77] one token at a time equals la_next (s1's
  // last step was a decode too). Decode of a Q8_0 file runs the packed int8
  // kernels (activations to ~15 bits), prefill the float ones: ~1e-3 apart.
  for (size_t i = 0; i < a.size(); ++i) ASSERT_TRUE(e->decode(*s3, a[i]).ok());
  ASSERT_TRUE(e->decode(*s3, 77).ok());
  for (int64_t i = 0; i < e->n_vocab(); ++i) EXPECT_NEAR(s3->logits()[i], la_next[i], 2e-3) << i;
  EXPECT_EQ(s1->n_past(), static_cast<int64_t>(b.size()));
  EXPECT_EQ(s1->tokens(), b);
  (void)la;
}

// A pass of k <= exact_rows() tokens gives each row the bits that decoding
// the tokens one at a time gives: what lets drafted tokens be verified in one
// pass with the output unchanged. Every ISA of this CPU, every weight type
// of the fixtures (float, 32-blocks, K-quants: packed or not).
TEST(EngineApi, SmallPassesGiveEachRowTheBitsOfADecodeStep) {
  LAYA_REQUIRE_FIXTURES(fx);
  const std::vector<std::string> files = {
      LAYA_SOURCE_DIR "/models/laya-default-q8_0.gguf", fx + "/ref-models/llama-tiny/gguf/llama-tiny-f16.gguf",
      fx + "/ref-models/llama-tiny/gguf/llama-tiny-Q4_0.gguf", fx + "/ref-models/llama-tiny/gguf/llama-tiny-Q4_K_M.gguf",
      fx + "/ref-models/qwen3-tiny/gguf/qwen3-tiny-Q6_K.gguf", fx + "/ref-models/qwen2-tiny/gguf/qwen2-tiny-q8_0.gguf"};
  for (const char* isa : {"scalar", "avx2", "avx512"}) {
    cpu::Isa parsed;
    if (!cpu::parse_isa(isa, &parsed) || !cpu::isa_supported(parsed)) continue;
    for (size_t fi = 0; fi < files.size(); fi += static_cast<size_t>(test::sanitizer_stride())) {  // ASan: every 4th file
      const std::string& f = files[fi];
      SCOPED_TRACE(std::string(isa) + " " + f);
      auto m = Model::load(f);
      ASSERT_TRUE(m.ok()) << m.status().to_string();
      EngineOptions eo;
      eo.n_threads = 2;
      eo.n_ctx = 128;
      eo.isa = isa;
      auto created = Engine::create(std::shared_ptr<const Model>(std::move(m).value()), eo);
      ASSERT_TRUE(created.ok()) << created.status().to_string();
      Engine& e = **created;
      const int64_t nv = e.n_vocab();
      const int64_t k_max = e.backend().exact_rows();
      ASSERT_GE(k_max, 8);
      std::vector<int32_t> ids(40);
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7919 + 13) % static_cast<size_t>(nv));
      const std::span<const int32_t> prompt(ids.data(), 20);
      auto one = e.new_sequence(), many = e.new_sequence();
      ASSERT_TRUE(e.prefill(*one, prompt, 0).ok());
      ASSERT_TRUE(e.prefill(*many, prompt, 0).ok());
      std::vector<std::vector<float>> stepped;
      for (int64_t i = 20; i < 20 + k_max; ++i) {
        ASSERT_TRUE(e.decode(*one, ids[static_cast<size_t>(i)]).ok());
        stepped.emplace_back(one->logits(), one->logits() + nv);
      }
      for (int64_t k : {int64_t{2}, int64_t{3}, int64_t{5}, k_max}) {
        std::vector<float> rows(static_cast<size_t>(k * nv));
        ASSERT_TRUE(e.prefill(*many, std::span<const int32_t>(ids.data() + 20, static_cast<size_t>(k)), 20, rows.data()).ok());
        for (int64_t r = 0; r < k; ++r)
          EXPECT_EQ(0, std::memcmp(rows.data() + r * nv, stepped[static_cast<size_t>(r)].data(), static_cast<size_t>(nv) * 4))
              << "k " << k << " row " << r;
      }
    }
  }
}

TEST(EngineApi, ErrorsAtTheLimits) {
  LAYA_REQUIRE_FIXTURES(fx);
  auto e = make_engine(fx + "/ref-models/llama-tiny/gguf/llama-tiny-f16.gguf");
  ASSERT_TRUE(e);
  auto s = e->new_sequence();
  std::vector<int32_t> t(10, 3);
  EXPECT_EQ(e->prefill(*s, t, 5).code(), StatusCode::kOutOfRange);  // past n_past
  EXPECT_EQ(e->prefill(*s, {}, 0).code(), StatusCode::kInvalidArgument);
  std::vector<int32_t> big(129, 3);
  Status st = e->prefill(*s, big, 0);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_NE(st.message().find("exceeds the context of 128"), std::string::npos) << st.message();
  std::vector<int32_t> bad = {1, 512};
  st = e->prefill(*s, bad, 0);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e->truncate(*s, 1).code(), StatusCode::kOutOfRange);  // nothing cached yet
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

TEST(EngineApi, IdleEngineUsesNoCpu) {
  LAYA_REQUIRE_FIXTURES(fx);
  auto e = make_engine(fx + "/ref-models/llama-tiny/gguf/llama-tiny-f16.gguf", 2);
  ASSERT_TRUE(e);
  auto s = e->new_sequence();
  ASSERT_TRUE(e->decode(*s, 1).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // workers stop spinning
  const double c0 = process_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double used = process_cpu_seconds() - c0;
  // A spinning worker would use ~0.5 s here.
  EXPECT_LT(used, 0.02) << "idle engine used " << used << " s of CPU in 0.5 s";
  ASSERT_TRUE(e->decode(*s, 2).ok());  // and wakes up again
}

int thread_count() {
  int n = 0;
  for ([[maybe_unused]] const auto& d : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// Background mode (hot swap's preparation): no worker thread is started,
// forward passes run on the calling thread alone and give the same logits;
// switched off, the workers start at the next forward pass, on the thread
// that runs it.
TEST(EngineApi, BackgroundModeUsesTheCallingThreadOnly) {
  LAYA_REQUIRE_FIXTURES(fx);
  const std::string path = fx + "/ref-models/llama-tiny/gguf/llama-tiny-f16.gguf";
  auto full = make_engine(path, 2);
  ASSERT_TRUE(full);
  const int before = thread_count();
  auto bg = make_engine(path, 2, /*background=*/true);
  ASSERT_TRUE(bg);
  EXPECT_EQ(thread_count(), before) << "a background engine started a thread";
  const std::vector<int32_t> ids = {1, 5, 9, 200, 31, 7};
  auto sf = full->new_sequence();
  auto sb = bg->new_sequence();
  ASSERT_TRUE(full->prefill(*sf, ids, 0).ok());
  ASSERT_TRUE(bg->prefill(*sb, ids, 0).ok());
  EXPECT_EQ(thread_count(), before);
  EXPECT_EQ(logits_copy(*full, *sf), logits_copy(*bg, *sb));
  bg->set_background(false);
  ASSERT_TRUE(full->decode(*sf, 42).ok());
  ASSERT_TRUE(bg->decode(*sb, 42).ok());
  EXPECT_EQ(thread_count(), before + 1) << "the worker starts at the first full-width pass";
  EXPECT_EQ(logits_copy(*full, *sf), logits_copy(*bg, *sb));
  bg->set_background(true);  // and back: the worker sleeps, results unchanged
  ASSERT_TRUE(full->decode(*sf, 43).ok());
  ASSERT_TRUE(bg->decode(*sb, 43).ok());
  EXPECT_EQ(logits_copy(*full, *sf), logits_copy(*bg, *sb));
}

// Locking: what decode reads is locked (VmLck grows by at least the weights
// and the KV cache), or the note says what was refused and how to allow it.
TEST(EngineApi, LocksWhatDecodeReadsOrSaysWhy) {
  LAYA_REQUIRE_FIXTURES(fx);
  const long long before = locked_bytes();
  if (before < 0) GTEST_SKIP() << "no VmLck in /proc/self/status on this system";
  auto m = Model::load(fx + "/ref-models/llama-tiny/gguf/llama-tiny-q8_0.gguf");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  std::shared_ptr<const Model> model = std::move(m).value();
  EngineOptions eo;
  eo.n_threads = 2;
  eo.n_ctx = 256;
  auto e = Engine::create(model, eo);
  ASSERT_TRUE(e.ok());
  auto s = (*e)->new_sequence();
  const std::string& note = (*e)->memory_lock_note();
  if (note.empty()) {
    const long long grew = locked_bytes() - before;
    const long long weights = static_cast<long long>(model->weights().output.nbytes);  // the largest matrix
    EXPECT_GE(grew, weights) << "VmLck grew by " << grew << " bytes, less than the output matrix";
  } else {
    EXPECT_NE(note.find("ulimit -l"), std::string::npos) << note;
    EXPECT_NE(note.find("refused"), std::string::npos) << note;
  }
  EngineOptions off = eo;
  off.lock_memory = false;
  const long long mid = locked_bytes();
  auto e2 = Engine::create(model, off);
  ASSERT_TRUE(e2.ok());
  auto s2 = (*e2)->new_sequence();
  EXPECT_EQ(locked_bytes(), mid) << "lock_memory = false locked something";
  EXPECT_TRUE((*e2)->memory_lock_note().empty());
}

// Preparing the weights reports its progress (the CLI's bar for a large
// model) on the calling thread, in bytes that only grow, and always ends with
// done == total == every distinct weight's bytes.
TEST(EngineApi, PrepareProgressEndsAtTheWeightBytes) {
  LAYA_REQUIRE_FIXTURES(fx);
  auto m = Model::load(fx + "/ref-models/llama-tiny/gguf/llama-tiny-q8_0.gguf");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  std::shared_ptr<const Model> model = std::move(m).value();
  uint64_t weights = 0;
  for (const Tensor* t : model->weights().all()) weights += t->nbytes;
  struct Call {
    uint64_t done, total;
    std::thread::id thread;
  };
  std::vector<Call> calls;
  EngineOptions eo;
  eo.n_threads = 2;
  eo.n_ctx = 128;
  eo.lock_memory = false;
  eo.on_prepare_progress = [&](uint64_t done, uint64_t total) { calls.push_back({done, total, std::this_thread::get_id()}); };
  auto e = Engine::create(model, eo);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  ASSERT_FALSE(calls.empty());
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].thread, std::this_thread::get_id()) << i;
    EXPECT_EQ(calls[i].total, weights) << i;
    EXPECT_LE(calls[i].done, calls[i].total) << i;
    if (i > 0) {
      EXPECT_GE(calls[i].done, calls[i - 1].done) << i;
    }
  }
  EXPECT_EQ(calls.back().done, weights);
  EXPECT_GT(calls.size(), 2u);  // not only the end: per tensor
}

}  // namespace
}  // namespace laya
