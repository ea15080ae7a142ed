// Tokenizers from hand-built GGUF metadata: a tiny byte-level BPE and a tiny
// SentencePiece vocabulary, and malformed vocabularies → clear errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "format/gguf.h"
#include "gguf_writer.h"
#include "tokenizer/tokenizer.h"

using laya::tok::EncodeOptions;
using laya::tok::Tokenizer;
using laya::test::GgufWriter;

namespace {

struct Loaded {
  std::vector<uint8_t> bytes;
  std::unique_ptr<laya::gguf::File> file;
};

laya::Result<std::unique_ptr<Tokenizer>> load(GgufWriter& w, Loaded* keep) {
  keep->bytes = w.build();
  auto f = laya::gguf::File::parse(laya::MappedFile::borrow(keep->bytes.data(), keep->bytes.size(), "mem.gguf"));
  if (!f.ok()) return f.status();
  keep->file = std::move(f).value();
  return Tokenizer::from_gguf(*keep->file);
}

// Byte-level vocabulary: every byte as its GPT-2 alphabet char, then merges.
std::vector<std::string> byte_tokens() {
  std::vector<std::string> v;
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    uint32_t cp;
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) cp = uint32_t(b);
    else cp = uint32_t(256 + n++);
    std::string s;
    if (cp < 0x80) s.push_back(char(cp));
    else {
      s.push_back(char(0xC0 | (cp >> 6)));
      s.push_back(char(0x80 | (cp & 0x3F)));
    }
    v.push_back(s);
  }
  return v;
}

}  // namespace

TEST(TokenizerGguf, TinyByteLevelBpe) {
  auto toks = byte_tokens();
  const int32_t h = int32_t('h' - 0), e = int32_t('e');
  (void)h;
  (void)e;
  toks.push_back("he");         // 256
  toks.push_back("hel");        // 257
  toks.push_back("\xC4\xA0h");  // 258 "Ġh"
  toks.push_back("<|eot|>");    // 259
  std::vector<int32_t> types(toks.size(), 1);
  types[259] = 3;
  GgufWriter w;
  w.kv_str("tokenizer.ggml.model", "gpt2").kv_str("tokenizer.ggml.pre", "gpt-2");
  w.kv_arr_str("tokenizer.ggml.tokens", toks).kv_arr_i32("tokenizer.ggml.token_type", types);
  w.kv_arr_str("tokenizer.ggml.merges", {"h e", "he l", "\xC4\xA0 h"});
  w.kv_u32("tokenizer.ggml.bos_token_id", 259).kv_u32("tokenizer.ggml.eos_token_id", 259);
  Loaded keep;
  auto r = load(w, &keep);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Tokenizer& t = *r.value();
  auto ids = t.encode("hello he<|eot|>", EncodeOptions{true, false, std::nullopt});
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids.value(), (std::vector<int32_t>{257, 'l', 'o', ' ', 256, 259}));  // (h,e) ranks before (Ġ,h)
  auto ids2 = t.encode("<|eot|>", EncodeOptions{false, false, std::nullopt});
  ASSERT_TRUE(ids2.ok());
  EXPECT_EQ(ids2.value().size(), 7u);  // not parsed as special: bytes
  EXPECT_EQ(t.decode(ids.value()), "hello he<|eot|>");
  EXPECT_TRUE(t.is_eog(259));
}

// An unknown tokenizer.ggml.pre must not fall back to a guessed split (ids
// the model never saw); an absent key is llama.cpp's default.
TEST(TokenizerGguf, UnknownPreTokenizerIsRefused) {
  for (const char* pre : {"no-such-pre", "", "default"}) {
    GgufWriter w;
    w.kv_str("tokenizer.ggml.model", "gpt2").kv_str("tokenizer.ggml.pre", pre);
    w.kv_arr_str("tokenizer.ggml.tokens", byte_tokens());
    w.kv_arr_str("tokenizer.ggml.merges", {});
    Loaded keep;
    auto r = load(w, &keep);
    if (std::string(pre) == "default") {
      EXPECT_TRUE(r.ok()) << r.status().to_string();
      continue;
    }
    ASSERT_FALSE(r.ok()) << pre;
    EXPECT_NE(r.status().message().find("tokenizer.ggml.pre"), std::string::npos) << r.status().to_string();
    EXPECT_NE(r.status().message().find("unknown pre-tokenizer"), std::string::npos) << r.status().to_string();
  }
}

TEST(TokenizerGguf, TinySentencePieceWithByteFallback) {
  std::vector<std::string> toks = {"<unk>", "<s>", "</s>"};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    toks.push_back(buf);
  }
  const int base = int(toks.size());
  toks.push_back("\xE2\x96\x81");      // base+0 "▁"
  toks.push_back("a");                 // base+1
  toks.push_back("b");                 // base+2
  toks.push_back("\xE2\x96\x81" "a");  // base+3
  toks.push_back("ab");                // base+4
  toks.push_back("\xE2\x96\x81" "ab"); // base+5
  std::vector<int32_t> types(toks.size(), 1);
  types[0] = 2;
  types[1] = types[2] = 3;
  for (int b = 0; b < 256; ++b) types[size_t(3 + b)] = 6;
  std::vector<float> scores(toks.size(), 0.f);
  scores[size_t(base + 3)] = -1.f;
  scores[size_t(base + 4)] = -2.f;
  scores[size_t(base + 5)] = -0.5f;
  scores[size_t(base)] = -3.f;
  GgufWriter w;
  w.kv_str("tokenizer.ggml.model", "llama");
  w.kv_arr_str("tokenizer.ggml.tokens", toks).kv_arr_i32("tokenizer.ggml.token_type", types);
  w.kv_arr_f32("tokenizer.ggml.scores", scores);
  w.kv_u32("tokenizer.ggml.bos_token_id", 1).kv_u32("tokenizer.ggml.eos_token_id", 2);
  Loaded keep;
  auto r = load(w, &keep);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Tokenizer& t = *r.value();
  auto ids = t.encode("ab a\xC3\xA9", EncodeOptions{});
  ASSERT_TRUE(ids.ok());
  // BOS, "▁ab", "▁a", then é as byte fallback C3 A9
  EXPECT_EQ(ids.value(), (std::vector<int32_t>{1, base + 5, base + 3, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(t.decode(ids.value(), {true, true}), "ab a\xC3\xA9");
}

TEST(TokenizerGguf, MalformedVocabularies) {
  {
    GgufWriter w;
    w.kv_str("tokenizer.ggml.model", "gpt2").kv_arr_str("tokenizer.ggml.tokens", byte_tokens());
    Loaded keep;
    auto r = load(w, &keep);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("tokenizer.ggml.merges"), std::string::npos) << r.status().message();
  }
  {
    GgufWriter w;
    w.kv_str("tokenizer.ggml.model", "gpt2").kv_arr_str("tokenizer.ggml.tokens", byte_tokens());
    w.kv_arr_str("tokenizer.ggml.merges", {"h e"}).kv_u32("tokenizer.ggml.eos_token_id", 99999);
    Loaded keep;
    auto r = load(w, &keep);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("eos_token_id"), std::string::npos) << r.status().message();
  }
  {
    GgufWriter w;
    w.kv_str("tokenizer.ggml.model", "gpt2").kv_arr_str("tokenizer.ggml.tokens", byte_tokens());
    w.kv_arr_str("tokenizer.ggml.merges", {"h e"}).kv_arr_i32("tokenizer.ggml.token_type", {1, 1});
    Loaded keep;
    auto r = load(w, &keep);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("token_type"), std::string::npos) << r.status().message();
  }
  {
    GgufWriter w;
    w.kv_str("tokenizer.ggml.model", "bert").kv_arr_str("tokenizer.ggml.tokens", {"a"});
    Loaded keep;
    auto r = load(w, &keep);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("tokenizer.ggml.model"), std::string::npos) << r.status().message();
  }
  {
    GgufWriter w;
    w.kv_str("general.name", "x");
    Loaded keep;
    auto r = load(w, &keep);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("tokenizer.ggml.model"), std::string::npos) << r.status().message();
  }
  {
    GgufWriter w;
    w.kv_str("tokenizer.ggml.model", "llama").kv_arr_str("tokenizer.ggml.tokens", {"<unk>", "<0xZZ>"});
    w.kv_arr_i32("tokenizer.ggml.token_type", {2, 6});
    Loaded keep;
    auto r = load(w, &keep);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("tokenizer.ggml.tokens[1]"), std::string::npos) << r.status().message();
  }
}
