// "A decode step allocates nothing": count heap allocations while the engine
// decodes, prefills within its preallocated limits and cuts its cache back.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "engine/engine.h"
#include "../test_util.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocs{0};
}  // namespace

// Replaces the global allocator for this test binary; counts only while asked.
void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
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

}  // namespace
}  // namespace laya
