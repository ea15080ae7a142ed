// "A decode step allocates nothing": count heap allocations while the engine
// decodes, prefills within its preallocated limits and cuts its cache back.
// "A sequence costs no KV memory before its first token": count the bytes
// 100 new sequences take.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "engine/engine.h"
#include "../test_util.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocs{0};
std::atomic<long long> g_bytes{0};
}  // namespace

// Replaces the global allocator for this test binary; counts only while asked.
void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) {
    g_allocs.fetch_add(1, std::memory_order_relaxed);
    g_bytes.fetch_add(static_cast<long long>(n), std::memory_order_relaxed);
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace laya {
namespace {

TEST(EngineAlloc, DecodeAndPrefillAllocateNothing) {
  LAYA_REQUIRE_FIXTURES(fx);
  for (const char* file : {"llama-tiny/gguf/llama-tiny-Q4_K_M.gguf", "qwen2-tiny/hf", "qwen3-tiny/gguf/qwen3-tiny-q8_0.gguf"}) {
    auto m = Model::load(fx + "/ref-models/" + file);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    std::shared_ptr<const Model> model = std::move(m).value();
    for (DType kv : {DType::F32, DType::F16}) {
      EngineOptions eo;
      eo.n_threads = 2;
      eo.n_ctx = 256;
      eo.n_batch = 32;
      eo.kv_type = kv;
      auto e = Engine::create(model, eo);
      ASSERT_TRUE(e.ok());
      Engine& eng = **e;
      auto seq = eng.new_sequence();
      std::vector<int32_t> prompt(40);
      for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 37) % 500);
      ASSERT_TRUE(eng.prefill(*seq, prompt, 0).ok());
      g_allocs = 0;
      g_counting = true;
      int32_t tok = 1;
      for (int i = 0; i < 50; ++i) {
        (void)eng.decode(*seq, tok);
        tok = static_cast<int32_t>((tok * 31 + 7) % 500);
      }
      (void)eng.truncate(*seq, 20);
      (void)eng.prefill(*seq, std::span<const int32_t>(prompt.data(), 40), 20);  // two chunks of n_batch
      g_counting = false;
      EXPECT_EQ(g_allocs.load(), 0) << file << ": heap allocations during decode/prefill";
    }
  }
}

// 100 documents of a qwen3-0.6b-shaped model (28 layers, 8 KV heads of 128,
// float32 KV: 229 KB per position, 0.94 GB per 4,096-position context) cost
// less than 10 MB before their first token: a sequence is a block table and a
// token list, its KV blocks come from the pool as it grows.
TEST(EngineAlloc, HundredEmptySequencesCostUnderTenMegabytes) {
  auto be = make_backend("cpu", BackendOptions{.n_threads = 1, .lock_memory = false, .on_prepare_progress = {}}, ForwardLimits{});
  ASSERT_TRUE(be.ok()) << be.status().to_string();
  const KvLayout qwen3_06b{28, 8, 128, DType::F32, 64};
  std::shared_ptr<Backend> backend = std::move(be).value();
  auto pool = KvBlockPool::create(backend, qwen3_06b, 2 * qwen3_06b.block_bytes());
  ASSERT_TRUE(pool.ok()) << pool.status().to_string();
  g_bytes = 0;
  g_counting = true;
  std::vector<std::unique_ptr<KvBlockTable>> tables;
  tables.reserve(100);
  for (int i = 0; i < 100; ++i) tables.push_back(std::make_unique<KvBlockTable>(**pool, 4096));
  g_counting = false;
  std::printf("[ measure  ] 100 empty qwen3-0.6b-shaped block tables (4,096 positions): %lld bytes\n", g_bytes.load());
  EXPECT_LT(g_bytes.load(), 10'000'000);
  EXPECT_EQ((*pool)->n_in_use(), 0);

  // Through the engine: a real model, 4,096-position sequences.
  LAYA_REQUIRE_FIXTURES(fx);
  auto m = Model::load(fx + "/ref-models/qwen3-tiny/gguf/qwen3-tiny-q8_0.gguf");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EngineOptions eo;
  eo.n_threads = 1;
  eo.n_ctx = 4096;
  eo.kv_budget_bytes = 1;  // below one block: refused with a message
  auto bad = Engine::create(std::move(m).value(), eo);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("KV budget"), std::string::npos) << bad.status().message();
  m = Model::load(fx + "/ref-models/qwen3-tiny/gguf/qwen3-tiny-q8_0.gguf");
  ASSERT_TRUE(m.ok());
  eo.kv_budget_bytes = 0;
  auto e = Engine::create(std::move(m).value(), eo);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  g_bytes = 0;
  g_counting = true;
  std::vector<std::unique_ptr<Sequence>> seqs;
  seqs.reserve(100);
  for (int i = 0; i < 100; ++i) seqs.push_back((*e)->new_sequence());
  g_counting = false;
  std::printf("[ measure  ] 100 empty engine sequences (4,096 positions): %lld bytes\n", g_bytes.load());
  EXPECT_LT(g_bytes.load(), 10'000'000);
  EXPECT_EQ((*e)->kv_pool().n_in_use(), 0);
}

}  // namespace
}  // namespace laya
