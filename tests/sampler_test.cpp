// Sampler: greedy, temperature, top-k, top-p, min-p, repetition penalty,
// reproducible seeded draws, and no allocation inside sample().
#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "test_util.h"
#include "tokenizer/tokenizer.h"

// The counting operator new below allocates with malloc, so its delete frees
// with free; GCC 12 flags the pair once inlined (-Wmismatched-new-delete).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

// ---- allocation counter (only counts while a test arms it on its thread) ----
// Replacing the global operator new is incompatible with ASan's own
// new/delete bookkeeping, so sanitizer builds skip the allocation test.
#if defined(__SANITIZE_ADDRESS__)
#define LAYA_SAMPLER_COUNT_ALLOCS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LAYA_SAMPLER_COUNT_ALLOCS 0
#endif
#endif
#ifndef LAYA_SAMPLER_COUNT_ALLOCS
#define LAYA_SAMPLER_COUNT_ALLOCS 1
#endif

namespace {
thread_local bool g_count_allocs = false;
std::atomic<long> g_allocs{0};
}  // namespace

#if LAYA_SAMPLER_COUNT_ALLOCS
namespace {
void* counted_alloc(std::size_t n) noexcept {
  if (g_count_allocs) g_allocs.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
}  // namespace
// Every non-aligned form, so that each new is paired with a matching delete.
void* operator new(std::size_t n) {
  if (void* p = counted_alloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = counted_alloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_alloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#endif

namespace laya {
namespace {

std::vector<float> softmax(const std::vector<float>& l, float temp = 1.0f) {
  float mx = l[0];
  for (float v : l) mx = std::max(mx, v);
  std::vector<float> p(l.size());
  double z = 0;
  for (size_t i = 0; i < l.size(); ++i) z += p[i] = std::exp((l[i] - mx) / temp);
  for (auto& v : p) v = static_cast<float>(v / z);
  return p;
}

std::vector<int> draw_counts(SamplerParams sp, const std::vector<float>& logits, int draws,
                             std::span<const int32_t> hist = {}) {
  Sampler s(sp, static_cast<int>(logits.size()));
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < draws; ++i) {
    int32_t t = s.sample(logits.data(), hist);
    EXPECT_GE(t, 0);
    EXPECT_LT(t, static_cast<int32_t>(logits.size()));
    if (t >= 0 && t < static_cast<int32_t>(logits.size())) counts[t]++;
  }
  return counts;
}

// Logits with a known probability profile: p ∝ {0.4, 0.25, 0.15, 0.1, 0.05, 0.03, 0.02}.
std::vector<float> profile_logits() {
  std::vector<float> p = {0.4f, 0.25f, 0.15f, 0.1f, 0.05f, 0.03f, 0.02f};
  std::vector<float> l;
  for (float v : p) l.push_back(std::log(v));
  return l;
}

TEST(SamplerRng, XoshiroReferenceAndUniformRange) {
  Rng a(42), b(42), c(43);
  uint64_t first = a.next();
  EXPECT_EQ(first, b.next());
  EXPECT_NE(first, c.next());
  // Pin the stream so a change of generator (which would change every seeded
  // run) is noticed: splitmix64(0) → xoshiro256** state, first outputs.
  Rng r(0);
  const uint64_t v0 = r.next(), v1 = r.next();
  Rng r2(0);
  EXPECT_EQ(r2.next(), v0);
  EXPECT_EQ(r2.next(), v1);
  EXPECT_EQ(v0, 0x99ec5f36cb75f2b4ull);
  Rng u(7);
  for (int i = 0; i < 10000; ++i) {
    double x = u.uniform();
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 1.0);
  }
}

TEST(SamplerGreedy, PicksArgmax) {
  std::vector<float> l = {0.1f, -3.0f, 2.5f, 2.4f, -1.0f};
  Sampler s({}, 5);
  EXPECT_EQ(s.sample(l.data(), {}), 2);
  l[4] = 10.0f;
  EXPECT_EQ(s.sample(l.data(), {}), 4);
}

TEST(SamplerGreedy, TiesPickLowestIdAndNanIgnored) {
  std::vector<float> l = {1.0f, 3.0f, 3.0f, std::nanf(""), 0.0f};
  Sampler s({}, 5);
  EXPECT_EQ(s.sample(l.data(), {}), 1);
  std::vector<float> nan_first = {std::nanf(""), -1.0f, 0.5f};
  Sampler s3({}, 3);
  EXPECT_EQ(s3.sample(nan_first.data(), {}), 2);
}

TEST(SamplerGreedy, NegativeTemperatureIsGreedy) {
  std::vector<float> l = {0.0f, 1.0f, 0.5f};
  SamplerParams p;
  p.temperature = -1.0f;
  Sampler s(p, 3);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(s.sample(l.data(), {}), 1);
}

TEST(SamplerTopK, TopK1EqualsGreedy) {
  std::vector<float> l(1000);
  Rng r(5);
  SamplerParams p;
  p.temperature = 1.5f;
  p.top_k = 1;
  p.seed = 9;
  Sampler s(p, 1000), g({}, 1000);
  for (int trial = 0; trial < 200; ++trial) {
    for (auto& v : l) v = static_cast<float>(r.uniform() * 10 - 5);
    if (trial % 7 == 0) l[trial % 1000] = l[(trial + 1) % 1000] = 7.0f;  // ties
    ASSERT_EQ(s.sample(l.data(), {}), g.sample(l.data(), {})) << "trial " << trial;
  }
}

TEST(SamplerTopK, OnlyTopKTokensAndProportions) {
  auto l = profile_logits();
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 3;
  p.seed = 1234;
  const int n = 10000;
  auto c = draw_counts(p, l, n);
  for (size_t i = 3; i < c.size(); ++i) EXPECT_EQ(c[i], 0) << "token " << i << " is outside the top-3";
  // Renormalized over {0.4, 0.25, 0.15}: 0.5, 0.3125, 0.1875. 5 sigma ≈ 0.025.
  EXPECT_NEAR(c[0] / double(n), 0.5, 0.025);
  EXPECT_NEAR(c[1] / double(n), 0.3125, 0.025);
  EXPECT_NEAR(c[2] / double(n), 0.1875, 0.025);
}

TEST(SamplerSeed, SameSeedSameSequence) {
  std::vector<float> l(256);
  for (int i = 0; i < 256; ++i) l[i] = std::sin(i * 0.37f) * 3;
  SamplerParams p;
  p.temperature = 0.9f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.01f;
  p.seed = 2024;
  Sampler a(p, 256), b(p, 256);
  std::vector<int32_t> sa, sb;
  for (int i = 0; i < 500; ++i) {
    sa.push_back(a.sample(l.data(), sa));
    sb.push_back(b.sample(l.data(), sb));
  }
  EXPECT_EQ(sa, sb);
  // reseed() restarts the stream.
  a.reseed(2024);
  std::vector<int32_t> sc;
  for (int i = 0; i < 500; ++i) sc.push_back(a.sample(l.data(), sc));
  EXPECT_EQ(sa, sc);
}

TEST(SamplerSeed, DifferentSeedsDiffer) {
  std::vector<float> l(256, 0.0f);  // uniform: 256 choices per step
  SamplerParams p;
  p.temperature = 1.0f;
  p.seed = 1;
  Sampler a(p, 256);
  p.seed = 2;
  Sampler b(p, 256);
  int same = 0;
  for (int i = 0; i < 200; ++i) same += a.sample(l.data(), {}) == b.sample(l.data(), {});
  EXPECT_LT(same, 20);
}

TEST(SamplerSeed, PinnedSequenceIsPlatformIndependent) {
  // Only integer RNG output and exact float ops on equal logits: the draw
  // index is floor(u * 8), identical on every platform.
  std::vector<float> l(8, 0.0f);
  SamplerParams p;
  p.temperature = 1.0f;
  p.seed = 123;
  Sampler s(p, 8);
  Rng r(123);
  for (int i = 0; i < 100; ++i) {
    int expect = static_cast<int>(r.uniform() * 8);
    ASSERT_EQ(s.sample(l.data(), {}), expect) << "step " << i;
  }
}

TEST(SamplerTemperature, MatchesSoftmaxFrequencies) {
  auto l = profile_logits();
  for (float temp : {1.0f, 0.5f, 2.0f}) {
    SamplerParams p;
    p.temperature = temp;
    p.seed = 77;
    const int n = 20000;
    auto c = draw_counts(p, l, n);
    auto ref = softmax(l, temp);
    for (size_t i = 0; i < l.size(); ++i) {
      double sigma = std::sqrt(ref[i] * (1 - ref[i]) / n);
      EXPECT_NEAR(c[i] / double(n), ref[i], 5 * sigma + 1e-3) << "T=" << temp << " token " << i;
    }
  }
}

TEST(SamplerTemperature, ZeroLimitApproachesGreedy) {
  std::vector<float> l = {1.0f, 2.0f, 1.9f, -4.0f, 1.99f};
  for (float temp : {1e-3f, 1e-6f, 1e-20f, 1e-38f, 1e-45f}) {
    SamplerParams p;
    p.temperature = temp;
    p.seed = 5;
    auto c = draw_counts(p, l, 1000);
    EXPECT_EQ(c[1], 1000) << "T=" << temp;
  }
}

TEST(SamplerTopP, NeverSamplesOutsideNucleus) {
  auto l = profile_logits();  // 0.4, 0.25, 0.15, 0.1, ...
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_p = 0.7f;  // 0.4 + 0.25 = 0.65 < 0.7 → nucleus {0, 1, 2}
  p.seed = 99;
  const int n = 10000;
  auto c = draw_counts(p, l, n);
  for (size_t i = 3; i < c.size(); ++i) EXPECT_EQ(c[i], 0) << "token " << i << " is outside the nucleus";
  EXPECT_NEAR(c[0] / double(n), 0.4 / 0.8, 0.025);
  EXPECT_NEAR(c[1] / double(n), 0.25 / 0.8, 0.025);
  EXPECT_NEAR(c[2] / double(n), 0.15 / 0.8, 0.025);
}

TEST(SamplerTopP, TinyTopPIsGreedy) {
  auto l = profile_logits();
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_p = 0.01f;
  p.seed = 3;
  auto c = draw_counts(p, l, 2000);
  EXPECT_EQ(c[0], 2000);
}

TEST(SamplerTopP, LargeVocabNucleusBeyondFirstPrefix) {
  // 5000 tokens of nearly equal probability: the nucleus (90 %) is far larger
  // than the first sorted prefix the sampler tries.
  const int n_vocab = 5000;
  std::vector<float> l(n_vocab);
  for (int i = 0; i < n_vocab; ++i) l[i] = -static_cast<float>(i) * 1e-4f;
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_p = 0.9f;
  p.seed = 11;
  // Mass of the first j tokens ∝ sum exp(-1e-4 i): find the cut exactly.
  double z = 0;
  for (int i = 0; i < n_vocab; ++i) z += std::exp(-1e-4 * i);
  double cum = 0;
  int cut = 0;
  while (cum < 0.9 * z) cum += std::exp(-1e-4 * cut++);
  auto c = draw_counts(p, l, 3000);
  int outside = 0, max_tok = 0;
  for (int i = 0; i < n_vocab; ++i) {
    if (c[i]) max_tok = i;
    if (i >= cut + 1) outside += c[i];
  }
  EXPECT_EQ(outside, 0);
  EXPECT_GT(max_tok, cut - 200);  // the tail of the nucleus is reachable
}

TEST(SamplerTopP, CombinedWithTopK) {
  auto l = profile_logits();
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 4;      // {0.4, 0.25, 0.15, 0.1} → renormalized 0.444, 0.278, 0.167, 0.111
  p.top_p = 0.75f;  // 0.444 + 0.278 = 0.722 < 0.75 → {0, 1, 2}
  p.seed = 8;
  auto c = draw_counts(p, l, 10000);
  EXPECT_GT(c[2], 0);
  for (size_t i = 3; i < c.size(); ++i) EXPECT_EQ(c[i], 0) << "token " << i;
}

TEST(SamplerMinP, ExcludesTokensBelowThreshold) {
  auto l = profile_logits();  // p / p_max = 1, .625, .375, .25, .125, .075, .05
  SamplerParams p;
  p.temperature = 1.0f;
  p.min_p = 0.2f;  // keeps {0, 1, 2, 3}
  p.seed = 4242;
  const int n = 10000;
  auto c = draw_counts(p, l, n);
  for (size_t i = 4; i < c.size(); ++i) EXPECT_EQ(c[i], 0) << "token " << i << " is below min_p";
  for (size_t i = 0; i < 4; ++i) EXPECT_GT(c[i], 0) << "token " << i;
  EXPECT_NEAR(c[0] / double(n), 0.4 / 0.9, 0.025);
  EXPECT_NEAR(c[3] / double(n), 0.1 / 0.9, 0.02);
}

TEST(SamplerMinP, OneIsGreedy) {
  auto l = profile_logits();
  SamplerParams p;
  p.temperature = 3.0f;
  p.min_p = 1.0f;
  p.seed = 1;
  auto c = draw_counts(p, l, 1000);
  EXPECT_EQ(c[0], 1000);
}

TEST(SamplerRepetitionPenalty, PositiveDividedNegativeMultiplied) {
  // Token 0: logit 2.0 → 2.0 / 2 = 1.0 < 1.5 (token 1 wins).
  std::vector<float> l = {2.0f, 1.5f, -0.5f, -0.9f};
  SamplerParams p;
  p.repeat_penalty = 2.0f;
  Sampler s(p, 4);
  std::vector<int32_t> hist = {0};
  EXPECT_EQ(s.sample(l.data(), {}), 0);
  EXPECT_EQ(s.sample(l.data(), hist), 1);
  // Negative logits are multiplied: -0.5 × 2 = -1.0 < -0.9.
  std::vector<float> neg = {-5.0f, -5.0f, -0.5f, -0.9f};
  EXPECT_EQ(s.sample(neg.data(), {}), 2);
  std::vector<int32_t> h2 = {2};
  EXPECT_EQ(s.sample(neg.data(), h2), 3);
  // (If negatives were divided, -0.5 / 2 = -0.25 would still win.)
}

TEST(SamplerRepetitionPenalty, AppliedOncePerDistinctToken) {
  // 4.0 / 1.5 = 2.67 > 2.5 once; 4.0 / 1.5^2 = 1.78 < 2.5 if applied twice.
  std::vector<float> l = {4.0f, 2.5f};
  SamplerParams p;
  p.repeat_penalty = 1.5f;
  Sampler s(p, 2);
  std::vector<int32_t> hist = {0, 0, 0, 0};
  EXPECT_EQ(s.sample(l.data(), hist), 0);
  // And state does not leak between calls.
  EXPECT_EQ(s.sample(l.data(), hist), 0);
}

TEST(SamplerRepetitionPenalty, OnlyLastNTokens) {
  std::vector<float> l = {2.0f, 1.5f, 0.0f};
  SamplerParams p;
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 2;
  Sampler s(p, 3);
  std::vector<int32_t> old = {0, 2, 2};     // token 0 is outside the window
  EXPECT_EQ(s.sample(l.data(), old), 0);
  std::vector<int32_t> recent = {2, 2, 0};  // inside
  EXPECT_EQ(s.sample(l.data(), recent), 1);
  // 0 = off.
  p.repeat_last_n = 0;
  Sampler off(p, 3);
  EXPECT_EQ(off.sample(l.data(), recent), 0);
  // -1 = whole history.
  p.repeat_last_n = -1;
  Sampler all(p, 3);
  EXPECT_EQ(all.sample(l.data(), old), 1);
}

TEST(SamplerRepetitionPenalty, IgnoresOutOfRangeHistoryAndKeepsLogits) {
  std::vector<float> l = {2.0f, 1.5f};
  const std::vector<float> copy = l;
  SamplerParams p;
  p.repeat_penalty = 2.0f;
  Sampler s(p, 2);
  std::vector<int32_t> hist = {-1, 7, 1 << 30, 0};
  EXPECT_EQ(s.sample(l.data(), hist), 1);
  EXPECT_EQ(l, copy);  // caller's logits untouched
}

TEST(SamplerRepetitionPenalty, ShiftsDistribution) {
  auto l = profile_logits();  // all logits negative (log p)
  SamplerParams p;
  p.temperature = 1.0f;
  p.repeat_penalty = 1.3f;
  p.seed = 10;
  std::vector<int32_t> hist = {0};
  auto with = draw_counts(p, l, 10000, hist);
  p.repeat_penalty = 1.0f;
  auto without = draw_counts(p, l, 10000, hist);
  EXPECT_LT(with[0], without[0] - 300);
}

TEST(SamplerValidate, RejectsBadParams) {
  EXPECT_TRUE(Sampler::validate({}, 10).ok());
  SamplerParams p;
  p.top_p = 0.0f;
  Status st = Sampler::validate(p, 10);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("top_p"), std::string::npos) << st.message();
  p = {};
  p.min_p = 1.5f;
  EXPECT_NE(Sampler::validate(p, 10).message().find("min_p"), std::string::npos);
  p = {};
  p.repeat_penalty = 0.0f;
  EXPECT_NE(Sampler::validate(p, 10).message().find("repeat_penalty"), std::string::npos);
  p = {};
  p.top_k = -1;
  EXPECT_NE(Sampler::validate(p, 10).message().find("top_k"), std::string::npos);
  p = {};
  p.temperature = std::nanf("");
  EXPECT_NE(Sampler::validate(p, 10).message().find("temperature"), std::string::npos);
  EXPECT_NE(Sampler::validate({}, 0).message().find("n_vocab"), std::string::npos);
}

TEST(SamplerEdge, AllNegativeInfinityAndPositiveInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> l = {-inf, -inf, -inf};
  SamplerParams p;
  p.temperature = 1.0f;
  Sampler s(p, 3);
  int32_t t = s.sample(l.data(), {});
  EXPECT_GE(t, 0);
  EXPECT_LT(t, 3);
  std::vector<float> pinf = {0.0f, inf, 1.0f};
  for (int i = 0; i < 100; ++i) EXPECT_EQ(s.sample(pinf.data(), {}), 1);
}

TEST(SamplerAlloc, SampleDoesNotAllocate) {
  if (!LAYA_SAMPLER_COUNT_ALLOCS) GTEST_SKIP() << "allocation counting is off under AddressSanitizer";
  const int n_vocab = 32000;
  std::vector<float> l(n_vocab);
  for (int i = 0; i < n_vocab; ++i) l[i] = std::sin(i * 0.01f) * 4;
  std::vector<int32_t> hist;
  for (int i = 0; i < 200; ++i) hist.push_back((i * 97) % n_vocab);
  std::vector<SamplerParams> configs(5);
  configs[1].temperature = 0.8f;
  configs[2].temperature = 0.8f, configs[2].top_k = 40;
  configs[3].temperature = 0.8f, configs[3].top_p = 0.9f, configs[3].repeat_penalty = 1.1f;
  configs[4].temperature = 1.2f, configs[4].top_k = 100, configs[4].top_p = 0.95f, configs[4].min_p = 0.05f,
  configs[4].repeat_penalty = 1.2f, configs[4].repeat_last_n = -1;
  for (const auto& c : configs) {
    Sampler s(c, n_vocab);
    g_allocs = 0;
    g_count_allocs = true;
    for (int i = 0; i < 20; ++i) (void)s.sample(l.data(), hist);
    g_count_allocs = false;
    EXPECT_EQ(g_allocs.load(), 0) << "temperature " << c.temperature << " top_k " << c.top_k;
  }
  // The counter itself works.
  g_allocs = 0;
  g_count_allocs = true;
  auto* v = new std::vector<int>(100);
  g_count_allocs = false;
  delete v;
  EXPECT_GE(g_allocs.load(), 1);
}

TEST(SamplerMask, MaskedIdNeverChosenEvenWithTheHighestLogit) {
  std::vector<float> l = {0.5f, 1.0f, 9.0f, 0.9f, -2.0f};
  TokenMask mask(5);
  mask.add(2);
  mask.add(2);   // twice: harmless
  mask.add(-1);  // out of range: ignored
  mask.add(5);
  EXPECT_EQ(mask.ids().size(), 1u);
  EXPECT_TRUE(mask.contains(2));
  EXPECT_FALSE(mask.contains(1));
  EXPECT_FALSE(mask.contains(99));

  Sampler greedy({}, 5);
  EXPECT_EQ(greedy.sample(l.data(), {}), 2);
  greedy.set_mask(mask);
  EXPECT_EQ(greedy.sample(l.data(), {}), 1);
  TokenMask also(5);
  also.add(1);
  EXPECT_EQ(greedy.sample(l.data(), {}, &also), 3);  // the per-call mask adds to the sampler's
  EXPECT_EQ(greedy.sample(l.data(), {}), 1);         // ... for that call only

  for (SamplerParams p : {SamplerParams{.temperature = 1.0f}, SamplerParams{.temperature = 5.0f, .top_k = 2},
                          SamplerParams{.temperature = 2.0f, .top_p = 0.5f},
                          SamplerParams{.temperature = 2.0f, .min_p = 0.01f, .repeat_penalty = 1.5f}}) {
    Sampler s(p, 5);
    s.set_mask(mask);
    std::vector<int32_t> hist = {2, 2, 1};
    std::vector<int> counts(5, 0);
    for (int i = 0; i < 2000; ++i) counts[s.sample(l.data(), hist, &also)]++;
    EXPECT_EQ(counts[2], 0) << "temperature " << p.temperature << " top_k " << p.top_k;
    EXPECT_EQ(counts[1], 0);
    EXPECT_GT(counts[3], 0);
  }
}

TEST(SamplerMask, EveryLogitNegativeInfinityGivesTheLowestUnmaskedId) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> l = {-inf, std::nanf(""), -inf, -inf};
  TokenMask mask(4);
  mask.add(0);
  mask.add(1);
  for (float temp : {0.0f, 1.0f}) {
    SamplerParams p;
    p.temperature = temp;
    Sampler s(p, 4);
    s.set_mask(mask);
    EXPECT_EQ(s.sample(l.data(), {}), 2);
  }
}

TEST(SamplerMask, MaskCostsNoAllocation) {
  if (!LAYA_SAMPLER_COUNT_ALLOCS) GTEST_SKIP() << "allocation counting is off under AddressSanitizer";
  const int n_vocab = 32000;
  std::vector<float> l(n_vocab);
  for (int i = 0; i < n_vocab; ++i) l[i] = std::sin(i * 0.01f) * 4;
  TokenMask mask(n_vocab), first(n_vocab);
  for (int i = 0; i < n_vocab; i += 7) mask.add(i);
  first.add(3);
  for (float temp : {0.0f, 0.8f}) {
    SamplerParams p;
    p.temperature = temp;
    p.top_k = 40;
    Sampler s(p, n_vocab);
    s.set_mask(mask);
    g_allocs = 0;
    g_count_allocs = true;
    int32_t t = 0;
    for (int i = 0; i < 20; ++i) t = s.sample(l.data(), {}, i == 0 ? &first : nullptr);
    g_count_allocs = false;
    EXPECT_EQ(g_allocs.load(), 0) << "temperature " << temp;
    EXPECT_FALSE(mask.contains(t));
  }
}

TEST(SamplerMask, ContinuationMasksFromTokenTypes) {
  const std::string fx = test::fixtures_dir();
  if (fx.empty()) GTEST_SKIP() << "no fixtures";
  auto r = tok::Tokenizer::from_path(fx + "/tokenizer/hf/qwen3/tokenizer.json");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const tok::Tokenizer& tk = *r.value();
  const auto find = [&](const char* text) { return tk.find_token(text).value_or(-1); };
  const int32_t endoftext = find("<|endoftext|>"), im_end = find("<|im_end|>"), im_start = find("<|im_start|>"),
                hello = find("hello");
  ASSERT_GE(endoftext, 0);
  ASSERT_GE(im_end, 0);
  ASSERT_GE(im_start, 0);
  ASSERT_GE(hello, 0);
  const ContinuationMasks m = continuation_masks(tk, tk.n_vocab(), endoftext);
  EXPECT_TRUE(m.eog.contains(endoftext));
  EXPECT_TRUE(m.eog.contains(im_end));
  EXPECT_FALSE(m.control.contains(endoftext));
  EXPECT_TRUE(m.control.contains(im_start));
  EXPECT_FALSE(m.control.contains(hello));
  EXPECT_FALSE(m.eog.contains(hello));
  for (int32_t id : m.control.ids()) {
    EXPECT_TRUE(tk.is_control(id));
    EXPECT_FALSE(m.eog.contains(id));
  }
  // The model's eos id counts as end of generation even where the tokenizer
  // does not say so; ids past n_vocab are in neither set.
  EXPECT_TRUE(continuation_masks(tk, tk.n_vocab(), hello).eog.contains(hello));
  const ContinuationMasks small = continuation_masks(tk, 1000, -1);
  EXPECT_TRUE(small.control.empty());
  EXPECT_EQ(small.control.n_vocab(), 1000);
}

}  // namespace
// Speculative sampling's rule keeps the distribution: draws given a draft
// (the likeliest token, a middling one, one top-k cuts, one masked) against
// plain draws, by a chi-square test of homogeneity over the tokens (df <= 5;
// 25 is past the 0.0001 quantile of every df here). Seeded: deterministic.
// It fails for a rule that takes the draft whenever p(draft) > 0 or that
// draws the rest with the draft left in (checked when it was written).
TEST(Sampler, DraftedChoiceKeepsTheDistribution) {
  const std::vector<float> logits = {2.0f, 1.5f, 1.4f, 0.3f, -0.5f, -1.0f, -3.0f, 0.9f};
  SamplerParams p;
  p.temperature = 0.8f;
  p.top_k = 6;
  p.top_p = 0.97f;
  p.seed = 7;
  const int nv = static_cast<int>(logits.size());
  constexpr int kDraws = 100000;
  std::vector<double> plain(static_cast<size_t>(nv), 0.0);
  Sampler a(p, nv);
  for (int i = 0; i < kDraws; ++i) plain[static_cast<size_t>(a.sample(logits.data(), {}))] += 1;
  TokenMask masked(nv);
  masked.add(3);
  for (int32_t draft : {0, 2, 6, 3}) {
    SCOPED_TRACE(draft);
    SamplerParams q = p;
    q.seed = 11 + static_cast<uint64_t>(draft);
    Sampler b(q, nv);
    b.set_mask(draft == 3 ? masked : TokenMask());
    Sampler ref(p, nv);
    ref.set_mask(draft == 3 ? masked : TokenMask());
    std::vector<double> want(static_cast<size_t>(nv), 0.0), got(static_cast<size_t>(nv), 0.0);
    for (int i = 0; i < kDraws; ++i) {
      want[static_cast<size_t>(ref.sample(logits.data(), {}))] += 1;
      got[static_cast<size_t>(b.sample_given_draft(logits.data(), {}, draft))] += 1;
    }
    double chi2 = 0;
    for (int t = 0; t < nv; ++t) {
      const double n = want[static_cast<size_t>(t)] + got[static_cast<size_t>(t)];
      if (n == 0) continue;
      const double e = n / 2;
      chi2 += (want[static_cast<size_t>(t)] - e) * (want[static_cast<size_t>(t)] - e) / e +
              (got[static_cast<size_t>(t)] - e) * (got[static_cast<size_t>(t)] - e) / e;
    }
    EXPECT_LT(chi2, 25.0);
    if (draft == 6 || draft == 3) {  // cut by top-k / masked: never taken
      EXPECT_EQ(got[static_cast<size_t>(draft)], 0);
    }
  }
  // Greedy: the arg-max whatever the draft.
  Sampler g(SamplerParams{}, nv);
  EXPECT_EQ(g.sample_given_draft(logits.data(), {}, 2), 0);
}

}  // namespace laya
