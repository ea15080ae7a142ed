// The shipped default model (models/laya-default-q8_0.gguf): it loads with its
// tokenizer, the tokenizer round-trips code, English and Chinese text, and a
// greedy completion of "def " (as bench-typing makes it) is non-empty text.
// Skipped when the file is absent.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <string>

#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

namespace laya {
namespace {

std::string shipped_path() { return std::string(LAYA_SOURCE_DIR) + "/models/laya-default-q8_0.gguf"; }

class DefaultModel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(shipped_path())) GTEST_SKIP() << "no " << shipped_path();
    auto m = Model::load(shipped_path());
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    model_ = std::move(m).value();
    ASSERT_NE(model_->gguf_file(), nullptr);
    auto t = tok::Tokenizer::from_gguf(*model_->gguf_file());
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    tk_ = std::move(t).value();
  }
  std::shared_ptr<const Model> model_;
  std::unique_ptr<tok::Tokenizer> tk_;
};

TEST_F(DefaultModel, LoadsWithExpectedShape) {
  const HParams& hp = model_->hparams();
  EXPECT_EQ(hp.n_vocab, tk_->n_vocab());
  EXPECT_GE(hp.n_ctx_train, 1024);
  EXPECT_GE(hp.n_vocab, 8192);
  EXPECT_LE(hp.n_vocab, 16384);
  EXPECT_LE(std::filesystem::file_size(shipped_path()), 40u << 20);
  // End-of-text and the three fill-in-the-middle markers are control tokens.
  for (const char* s : {"<|endoftext|>", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"}) {
    auto id = tk_->find_token(s);
    ASSERT_TRUE(id.has_value()) << s;
    EXPECT_TRUE(tk_->is_control(*id)) << s;
  }
  EXPECT_EQ(tk_->eos_id(), *tk_->find_token("<|endoftext|>"));
}

TEST_F(DefaultModel, TokenizerRoundTrips) {
  tok::DecodeOptions d;
  d.skip_special = true;
  d.strip_leading_space = false;
  for (const std::string& text : {
           std::string("def bisect_left(a, x, lo=0, hi=None):\n    \"\"\"Return the index.\"\"\"\n    if lo < 0:\n"
                       "        raise ValueError('lo must be non-negative')\n"),
           std::string("Meeting notes, 3 March: we agreed to ship the release on Friday.  Action items follow."),
           std::string("#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }\n"),
           std::string("会议纪要：下周三发布新版本。\t tabs\tand   spaces\r\n"),
       }) {
    auto ids = tk_->encode(text);
    ASSERT_TRUE(ids.ok()) << ids.status().to_string();
    ASSERT_FALSE(ids.value().empty());
    EXPECT_EQ(tk_->decode(ids.value(), d), text);
  }
  // The FIM markers are parsed as single tokens when special parsing is on.
  tok::EncodeOptions eo;
  eo.parse_special = true;
  eo.add_bos = false;
  auto ids = tk_->encode("<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>", eo);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids.value().front(), *tk_->find_token("<|fim_prefix|>"));
  EXPECT_EQ(ids.value().back(), *tk_->find_token("<|fim_middle|>"));
}

// As bench-typing suggests: the context's last token is taken back and the
// first token must start with its bytes (token healing); FIM markers are never
// chosen. Plain greedy decoding after a trailing space tends to pick
// <|fim_suffix|> (see models/README.md).
TEST_F(DefaultModel, GreedyCompletionOfDefIsNonEmpty) {
  EngineOptions eo;
  eo.n_threads = 2;
  eo.n_ctx = 64;
  auto e = Engine::create(model_, eo);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  Engine& eng = **e;
  auto seq = eng.new_sequence();
  auto enc = tk_->encode("def ");
  ASSERT_TRUE(enc.ok());
  std::vector<int32_t> ids = enc.value();
  ASSERT_GE(ids.size(), 2u);  // <|endoftext|> first
  EXPECT_EQ(ids.front(), tk_->eos_id());
  const std::string heal = tk_->token_bytes(ids.back());
  ids.pop_back();
  ASSERT_TRUE(eng.prefill(*seq, ids, 0).ok());
  std::string text;
  for (int i = 0; i < 12; ++i) {
    const float* lg = seq->logits();
    int32_t best = -1;
    for (int64_t v = 0; v < eng.n_vocab(); ++v) {
      const int32_t id = static_cast<int32_t>(v);
      if (tk_->is_control(id) && (i == 0 || id != tk_->eos_id())) continue;
      if (i == 0 && tk_->token_bytes(id).rfind(heal, 0) != 0) continue;
      if (best < 0 || lg[v] > lg[best]) best = id;
    }
    ASSERT_GE(best, 0);
    if (best == tk_->eos_id()) break;
    text += i == 0 ? tk_->token_bytes(best).substr(heal.size()) : tk_->token_bytes(best);
    ASSERT_TRUE(eng.decode(*seq, best).ok());
  }
  EXPECT_NE(text.find_first_not_of(" \n\t"), std::string::npos) << "empty or only whitespace: '" << text << "'";
  // It reads like a Python function name: starts with an identifier character.
  ASSERT_FALSE(text.empty());
  EXPECT_TRUE(std::isalpha(static_cast<unsigned char>(text[0])) || text[0] == '_') << text;
}

}  // namespace
}  // namespace laya
