// The KV block pool (budget, reference counts, copy on write, content keys,
// least-recently-released eviction) and what the engine builds on it:
// sequences that share blocks, resume from cached blocks, stop on a cancel
// flag, and run out of blocks with a clear error. Incremental results are
// compared with from-scratch runs of the same chunking (bit for bit).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>

#include "engine/engine.h"
#include "kv/kv_block_pool.h"

#include "test_util.h"

namespace laya {
namespace {

std::shared_ptr<Backend> cpu_backend() {
  auto be = make_backend("cpu", BackendOptions{.n_threads = 1, .lock_memory = false, .on_prepare_progress = {}}, ForwardLimits{});
  EXPECT_TRUE(be.ok()) << be.status().to_string();
  return std::move(be).value();
}

const KvLayout kSmall{2, 2, 32, DType::F32, 16};  // 16 KB blocks

TEST(KvBlockPool, RefusesABlockPastItsBudget) {
  auto pool = KvBlockPool::create(cpu_backend(), kSmall, 3 * kSmall.block_bytes() + 100);
  ASSERT_TRUE(pool.ok()) << pool.status().to_string();
  KvBlockPool& p = **pool;
  EXPECT_EQ(p.n_blocks(), 3);
  std::vector<int32_t> got;
  for (int i = 0; i < 3; ++i) {
    auto b = p.allocate();
    ASSERT_TRUE(b.ok());
    got.push_back(*b);
  }
  auto full = p.allocate();
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), StatusCode::kOutOfMemory);
  EXPECT_NE(full.status().message().find("KV block pool full"), std::string::npos) << full.status().message();
  p.release(got[1]);
  auto again = p.allocate();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, got[1]);

  auto none = KvBlockPool::create(cpu_backend(), kSmall, kSmall.block_bytes() - 1);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("holds no block"), std::string::npos) << none.status().message();
  KvLayout odd = kSmall;
  odd.block_pos = 24;
  EXPECT_FALSE(KvBlockPool::create(cpu_backend(), odd, 1 << 20).ok());
}

TEST(KvBlockPool, SharedBlockIsCopiedBeforeItIsWritten) {
  auto pool = KvBlockPool::create(cpu_backend(), kSmall, 4 * kSmall.block_bytes());
  ASSERT_TRUE(pool.ok());
  KvBlockPool& p = **pool;
  const size_t bb = kSmall.block_bytes();
  auto a = p.allocate();
  ASSERT_TRUE(a.ok());
  std::memset(p.memory() + static_cast<size_t>(*a) * bb, 0x5A, bb);
  // Sole owner: written in place.
  auto same = p.make_writable(*a);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, *a);
  // Shared: the writer gets a copy, the other holder keeps the original.
  p.retain(*a);
  auto copy = p.make_writable(*a);
  ASSERT_TRUE(copy.ok());
  EXPECT_NE(*copy, *a);
  EXPECT_EQ(p.refcount(*a), 1);
  EXPECT_EQ(p.refcount(*copy), 1);
  EXPECT_EQ(std::memcmp(p.memory() + static_cast<size_t>(*a) * bb, p.memory() + static_cast<size_t>(*copy) * bb, bb), 0);
}

TEST(KvBlockPool, KeyedBlocksStayCachedAndTheLeastRecentlyReleasedGoesFirst) {
  auto pool = KvBlockPool::create(cpu_backend(), kSmall, 3 * kSmall.block_bytes());
  ASSERT_TRUE(pool.ok());
  KvBlockPool& p = **pool;
  int32_t ids[3];
  for (auto& id : ids) id = p.allocate().value();
  p.set_key(ids[0], 111);
  p.set_key(ids[1], 222);
  p.release(ids[1]);  // cached first: least recently released
  p.release(ids[0]);  // cached second
  p.release(ids[2]);  // no key: plain free, taken first
  EXPECT_EQ(p.n_cached(), 2);
  EXPECT_EQ(p.allocate().value(), ids[2]);
  // A cached block is found again by its key (and leaves the free list).
  EXPECT_EQ(p.find_cached(111), ids[0]);
  EXPECT_EQ(p.refcount(ids[0]), 1);
  EXPECT_EQ(p.n_cached(), 1);
  // Out of free blocks: the least recently released cached one is evicted.
  EXPECT_EQ(p.allocate().value(), ids[1]);
  EXPECT_EQ(p.key(ids[1]), 0u);
  EXPECT_EQ(p.find_cached(222), -1);
}

// ---- through the engine, on the shipped default model ------------------------------------

std::shared_ptr<const Model> default_model() {
  static std::shared_ptr<const Model> m = [] {
    auto r = Model::load(std::string(LAYA_SOURCE_DIR) + "/models/laya-default-q8_0.gguf");
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return std::shared_ptr<const Model>(std::move(r).value());
  }();
  return m;
}

std::unique_ptr<Engine> make_engine(EngineOptions eo) {
  eo.n_threads = test::sanitizer_threads(2);
  eo.lock_memory = false;
  auto e = Engine::create(default_model(), eo);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return std::move(e).value();
}

std::vector<int32_t> tokens(int n, int salt) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = (i * 37 + salt * 101 + 3) % 8000;
  return t;
}

std::vector<float> logits_of(const Engine& e, const Sequence& s) { return {s.logits(), s.logits() + e.n_vocab()}; }

std::span<const int32_t> part(const std::vector<int32_t>& t, size_t b, size_t e) { return {t.data() + b, e - b}; }

TEST(EngineKv, ForkSharesBlocksAndBothBranchesMatchFromScratch) {
  EngineOptions eo;
  eo.n_ctx = 512;
  eo.kv_budget_bytes = 0;
  auto e = make_engine(eo);
  const auto t = tokens(150, 1);
  auto s1 = e->new_sequence();
  ASSERT_TRUE(e->prefill(*s1, part(t, 0, 100), 0).ok());
  const int64_t used = e->kv_pool().n_in_use();
  auto fork = e->fork(*s1, 100);
  ASSERT_TRUE(fork.ok()) << fork.status().to_string();
  Sequence& s2 = **fork;
  EXPECT_EQ(e->kv_pool().n_in_use(), used) << "a fork shares blocks, it takes none";
  EXPECT_EQ(s2.tokens(), s1->tokens());
  // The branches diverge inside the shared second block (positions 64..127).
  const auto u = tokens(50, 2);
  ASSERT_TRUE(e->prefill(*s1, part(t, 100, 150), 100).ok());
  ASSERT_TRUE(e->prefill(s2, part(u, 0, 50), 100).ok());
  // From scratch, same chunking.
  auto r1 = e->new_sequence(), r2 = e->new_sequence();
  ASSERT_TRUE(e->prefill(*r1, part(t, 0, 100), 0).ok());
  ASSERT_TRUE(e->prefill(*r1, part(t, 100, 150), 100).ok());
  ASSERT_TRUE(e->prefill(*r2, part(t, 0, 100), 0).ok());
  ASSERT_TRUE(e->prefill(*r2, part(u, 0, 50), 100).ok());
  EXPECT_EQ(logits_of(*e, *s1), logits_of(*e, *r1));
  EXPECT_EQ(logits_of(*e, s2), logits_of(*e, *r2));
  // And decode on both, one step further.
  ASSERT_TRUE(e->decode(*s1, 42).ok());
  ASSERT_TRUE(e->decode(*r1, 42).ok());
  EXPECT_EQ(logits_of(*e, *s1), logits_of(*e, *r1));
}

TEST(EngineKv, AClosedDocumentsBlocksAreReusedByTheNextWithTheSamePrefix) {
  EngineOptions eo;
  eo.n_ctx = 512;
  auto e = make_engine(eo);
  const auto t = tokens(150, 3);
  {
    auto s = e->new_sequence();
    ASSERT_TRUE(e->prefill(*s, t, 0).ok());
  }  // closed: its two full blocks stay cached
  EXPECT_EQ(e->kv_pool().n_in_use(), 0);
  EXPECT_EQ(e->kv_pool().n_cached(), 2);
  auto s = e->new_sequence();
  const int64_t reused = e->reuse_cached_prefix(*s, t);
  EXPECT_EQ(reused, 128);
  ASSERT_TRUE(e->prefill(*s, part(t, 128, 150), 128).ok());
  auto r = e->new_sequence();
  ASSERT_TRUE(e->prefill(*r, part(t, 0, 128), 0).ok());
  ASSERT_TRUE(e->prefill(*r, part(t, 128, 150), 128).ok());
  EXPECT_EQ(logits_of(*e, *s), logits_of(*e, *r));
  // Another prefix finds nothing.
  auto o = e->new_sequence();
  EXPECT_EQ(e->reuse_cached_prefix(*o, tokens(150, 4)), 0);
}

TEST(EngineKv, CancelStopsBetweenChunksAndLeavesAConsistentSequence) {
  EngineOptions eo;
  eo.n_ctx = 512;
  eo.n_batch = 16;
  auto e = make_engine(eo);
  const auto t = tokens(100, 5);
  std::atomic<bool> cancel{true};
  auto s = e->new_sequence();
  Status st = e->prefill(*s, t, 0, nullptr, &cancel);
  EXPECT_EQ(st.code(), StatusCode::kCancelled) << st.to_string();
  EXPECT_EQ(s->n_past(), 16) << "the first chunk completes, the flag is checked before the next";
  // Resume from where it stopped: the same as an uncancelled run of the same chunks.
  ASSERT_TRUE(e->prefill(*s, part(t, 16, 100), 16).ok());
  auto r = e->new_sequence();
  ASSERT_TRUE(e->prefill(*r, part(t, 0, 16), 0).ok());
  ASSERT_TRUE(e->prefill(*r, part(t, 16, 100), 16).ok());
  EXPECT_EQ(logits_of(*e, *s), logits_of(*e, *r));
}

TEST(EngineKv, OutOfBlocksIsAClearErrorAndTheSequenceKeepsItsPrefix) {
  EngineOptions eo;
  eo.n_ctx = 512;
  eo.n_batch = 32;
  eo.kv_block_positions = 32;
  auto probe = make_engine(eo);
  eo.kv_budget_bytes = 3 * probe->kv_pool().layout().block_bytes();  // 96 positions
  probe.reset();
  auto e = make_engine(eo);
  auto s = e->new_sequence();
  const auto t = tokens(200, 6);
  ASSERT_TRUE(e->prefill(*s, part(t, 0, 40), 0).ok());
  const auto before = logits_of(*e, *s);
  Status st = e->prefill(*s, part(t, 40, 200), 40);
  EXPECT_EQ(st.code(), StatusCode::kOutOfMemory) << st.to_string();
  EXPECT_NE(st.message().find("KV block pool full"), std::string::npos) << st.message();
  EXPECT_EQ(s->n_past(), 72) << "whole chunks that fitted are kept ([40, 72) did, [72, 104) did not)";
  // Cut back and continue differently: the cache is consistent.
  ASSERT_TRUE(e->truncate(*s, 40).ok());
  ASSERT_TRUE(e->decode(*s, t[40]).ok());
  auto r = e->new_sequence();
  EXPECT_EQ(r->n_past(), 0);
  (void)before;
}

TEST(EngineKv, ASequenceOfAnotherEngineIsRefused) {
  EngineOptions eo;
  eo.n_ctx = 128;
  auto e1 = make_engine(eo), e2 = make_engine(eo);
  auto s = e1->new_sequence();
  Status st = e2->prefill(*s, tokens(4, 7), 0);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("another engine"), std::string::npos) << st.message();
  EXPECT_FALSE(e2->truncate(*s, 0).ok());
  // A sequence may outlive its engine (it keeps the pool alive).
  ASSERT_TRUE(e1->prefill(*s, tokens(4, 7), 0).ok());
  e1.reset();
  EXPECT_EQ(s->n_past(), 4);
}

}  // namespace
}  // namespace laya
