// replay --verify's near-tie measure (session/verify.h): the gap of the two
// tokens' from-scratch logits where two suggestions part, checked against a
// prefill made here; a prefix or an equal list is never a near tie.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "session/verify.h"
#include "tokenizer/tokenizer.h"

namespace laya {
namespace {

struct Fixture {
  std::unique_ptr<Engine> eng;
  std::vector<int32_t> prompt;
};

Fixture make() {
  Fixture f;
  auto m = Model::load(LAYA_SOURCE_DIR "/models/laya-default-q8_0.gguf");
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  if (!m.ok()) return f;
  std::shared_ptr<const Model> model = std::move(m).value();
  auto t = tok::Tokenizer::from_gguf(*model->gguf_file());
  EXPECT_TRUE(t.ok());
  if (!t.ok()) return f;
  auto ids = (*t)->encode("def mean(xs):\n    return sum(xs) /");
  EXPECT_TRUE(ids.ok());
  if (!ids.ok()) return f;
  f.prompt = std::move(ids).value();
  EngineOptions eo;
  eo.n_threads = 2;
  eo.n_ctx = 256;
  auto e = Engine::create(model, eo);
  EXPECT_TRUE(e.ok());
  if (e.ok()) f.eng = std::move(e).value();
  return f;
}

// Logits after ctx, from a prefill made here, and the two best ids.
std::vector<float> logits_after(Engine& eng, const std::vector<int32_t>& ctx) {
  auto seq = eng.new_sequence();
  EXPECT_TRUE(eng.prefill(*seq, ctx, 0).ok());
  return {seq->logits(), seq->logits() + eng.n_vocab()};
}
std::pair<int32_t, int32_t> top2(const std::vector<float>& lg) {
  std::vector<int32_t> id(lg.size());
  std::iota(id.begin(), id.end(), 0);
  std::partial_sort(id.begin(), id.begin() + 2, id.end(), [&](int32_t x, int32_t y) { return lg[x] > lg[y]; });
  return {id[0], id[1]};
}
double gap_of(const std::vector<float>& lg, int32_t x, int32_t y) {
  double big = 0;
  for (float v : lg) big = std::max(big, std::fabs(static_cast<double>(v)));
  return std::fabs(static_cast<double>(lg[x]) - lg[y]) / big;
}

TEST(VerifyTie, GapOfTheTwoTokensWhereTheyPart) {
  Fixture f = make();
  ASSERT_TRUE(f.eng);
  // Parting at the first token: the logits after the prompt.
  const std::vector<float> lg0 = logits_after(*f.eng, f.prompt);
  const auto [b0, s0] = top2(lg0);
  auto g = logit_gap_where_they_part(*f.eng, f.prompt, {s0, 7}, {b0, 9});
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_NEAR(*g, gap_of(lg0, s0, b0), 1e-12);
  EXPECT_GT(*g, 0.0);
  // Parting at the third token: the logits after the prompt and the two shared ones (b's, the from-scratch side).
  std::vector<int32_t> ctx = f.prompt;
  ctx.push_back(b0);
  ctx.push_back(s0);
  const std::vector<float> lg2 = logits_after(*f.eng, ctx);
  const auto [b2, s2] = top2(lg2);
  g = logit_gap_where_they_part(*f.eng, f.prompt, {b0, s0, s2}, {b0, s0, b2, 1});
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_NEAR(*g, gap_of(lg2, s2, b2), 1e-12);
  // A different position gives a different gap: the context really is prompt + the shared part.
  EXPECT_NE(*g, gap_of(lg0, s2, b2));
}

TEST(VerifyTie, StoppingEarlyOrEqualIsNoTie) {
  Fixture f = make();
  ASSERT_TRUE(f.eng);
  const double inf = std::numeric_limits<double>::infinity();
  auto g = logit_gap_where_they_part(*f.eng, f.prompt, {5, 6}, {5, 6});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g, inf);
  g = logit_gap_where_they_part(*f.eng, f.prompt, {5}, {5, 6});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g, inf);
  g = logit_gap_where_they_part(*f.eng, f.prompt, {5, 6, 7}, {});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g, inf);
}

TEST(VerifyTie, TokensOutsideTheVocabularyAreRefused) {
  Fixture f = make();
  ASSERT_TRUE(f.eng);
  auto g = logit_gap_where_they_part(*f.eng, f.prompt, {5}, {1 << 30});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("outside the vocabulary"), std::string::npos) << g.status().to_string();
  g = logit_gap_where_they_part(*f.eng, {}, {5}, {6});
  EXPECT_FALSE(g.ok());
}

}  // namespace
}  // namespace laya
