// Vocabulary sanity: tokenizer.json / tokenizer_config.json and GGUF
// vocabularies that would load into silent nonsense are refused with a message
// naming the file, the field and the value (cut short when it is huge).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "core/shown.h"
#include "format/gguf.h"
#include "gguf_writer.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace laya {
namespace {

namespace fs = std::filesystem;
using tok::Tokenizer;

// A tiny valid byte-level tokenizer.json: a, b, ab, Ġ, then <s> (BOS) and </s>
// as added tokens. `added` replaces the added tokens, `extra` adds top-level fields.
std::string tiny_json(const std::string& vocab = R"({"a": 0, "b": 1, "ab": 2, "Ġ": 3})",
                      const std::string& added = R"([{"id": 4, "content": "<s>", "special": true},
                                                     {"id": 5, "content": "</s>", "special": true}])",
                      const std::string& extra = "") {
  return R"({"model": {"type": "BPE", "vocab": )" + vocab + R"(, "merges": ["a b"]},
             "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
             "decoder": {"type": "ByteLevel"}, "added_tokens": )" + added + extra + "}";
}
const std::string kConfig = R"({"bos_token": "<s>", "eos_token": "</s>"})";

Status load_text(const std::string& tj, const std::string& cfg = kConfig) {
  auto r = Tokenizer::from_hf_json_text(tj, cfg, "dir/tokenizer.json");
  return r.ok() ? Status::Ok() : r.status();
}

TEST(TokenizerHostile, TinyTokenizerLoads) {
  auto r = Tokenizer::from_hf_json_text(tiny_json(), kConfig, "dir/tokenizer.json");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value()->bos_id(), 4);
  EXPECT_EQ(r.value()->eos_id(), 5);
}

TEST(TokenizerHostile, IdsMustBeDense) {
  test::expect_status(load_text(tiny_json(R"({"b": 1, "ab": 2, "a": 6, "Ġ": 3})")), StatusCode::kCorrupt,
                      {"dir/tokenizer.json: id 0 belongs to no token", "1 of ids 0..6"});
  // A gap between the vocabulary and the added tokens.
  test::expect_status(load_text(tiny_json(R"({"a": 0, "b": 1, "ab": 2, "Ġ": 3})",
                                          R"([{"id": 9, "content": "<s>"}, {"id": 5, "content": "</s>"}])")),
                      StatusCode::kCorrupt, {"id 4 belongs to no token", "4 of ids 0..9"});
}

TEST(TokenizerHostile, AddedTokens) {
  test::expect_status(load_text(tiny_json(R"({"a": 0, "b": 1, "ab": 2, "Ġ": 3})",
                                          R"([{"id": 4, "content": "", "special": true},
                                              {"id": 5, "content": "</s>"}])")),
                      StatusCode::kCorrupt, {"added_tokens[0].content: is empty (id 4)"});
  // An added token put on the BOS id: the id would encode as one text and print as another.
  test::expect_status(load_text(tiny_json(R"({"a": 0, "b": 1, "ab": 2, "Ġ": 3})",
                                          R"([{"id": 4, "content": "<s>", "special": true},
                                              {"id": 5, "content": "</s>", "special": true},
                                              {"id": 4, "content": "<evil>", "special": true}])")),
                      StatusCode::kCorrupt, {"added_tokens[2]: id 4 is '<evil>' but added_tokens[0] has '<s>'"});
  test::expect_status(load_text(tiny_json(R"({"a": 0, "b": 1, "ab": 2, "Ġ": 3})",
                                          R"([{"id": 1, "content": "<s>", "special": true},
                                              {"id": 4, "content": "x"}, {"id": 5, "content": "</s>"}])")),
                      StatusCode::kCorrupt, {"added_tokens[0]: id 1 is '<s>' but model.vocab has 'b' at that id"});
  // Restating a vocabulary token (Mistral's "<s>") is fine.
  EXPECT_TRUE(load_text(tiny_json(R"({"a": 0, "b": 1, "ab": 2, "Ġ": 3, "<s>": 4})",
                                  R"([{"id": 4, "content": "<s>", "special": true},
                                      {"id": 5, "content": "</s>", "special": true}])"))
                  .ok());
}

TEST(TokenizerHostile, UnknownComponentTypes) {
  const std::string v = R"({"a": 0, "b": 1, "ab": 2, "Ġ": 3})";
  const std::string a = R"([{"id": 4, "content": "<s>"}, {"id": 5, "content": "</s>"}])";
  auto with = [&](const std::string& field, const std::string& value) {
    std::string tj = tiny_json(v, a);
    const std::string key = "\"" + field + "\": ";
    const size_t at = tj.find(key);
    if (at == std::string::npos) return load_text(tiny_json(v, a, ", " + key + value));
    const size_t end = tj.find('}', at) + 1;
    return load_text(tj.replace(at, end - at, key + value));
  };
  test::expect_status(with("decoder", R"({"type": "Bogus"})"), StatusCode::kUnsupported,
                      {"dir/tokenizer.json: decoder.type: unknown decoder 'Bogus'"});
  test::expect_status(with("decoder", R"({"type": "WordPiece", "prefix": "##"})"), StatusCode::kUnsupported,
                      {"decoder.type: decoder 'WordPiece' is not supported"});
  test::expect_status(with("decoder", R"({"type": "Sequence", "decoders": [{"type": "ByteLevel"}, {"type": "CTC"}]})"),
                      StatusCode::kUnsupported, {"decoder.decoders[1].type"});
  test::expect_status(with("decoder", R"({"type": "Replace", "pattern": {"String": "x"}, "content": "y"})"),
                      StatusCode::kUnsupported, {"decoder: only a Replace"});
  test::expect_status(with("decoder", R"("ByteLevel")"), StatusCode::kCorrupt, {"decoder: expected an object"});
  test::expect_status(with("pre_tokenizer", R"({"type": "BertPreTokenizer"})"), StatusCode::kUnsupported,
                      {"pre_tokenizer.type: pre-tokenizer 'BertPreTokenizer' is not supported"});
  test::expect_status(with("normalizer", R"({"type": "Precompiled"})"), StatusCode::kUnsupported,
                      {"normalizer.type: normalizer 'Precompiled' is not supported"});
  test::expect_status(with("post_processor", R"({"type": "BertProcessing", "sep": ["</s>", 5], "cls": ["<s>", 4]})"),
                      StatusCode::kUnsupported, {"post_processor.type: post-processor 'BertProcessing'"});
  test::expect_status(with("post_processor", R"({"type": "Wat"})"), StatusCode::kUnsupported,
                      {"unknown post-processor 'Wat'"});
  // Literal splits (Metaspace, Split on a String) compile: PCRE2 refused them
  // with PCRE2_UCP set beside PCRE2_LITERAL.
  EXPECT_TRUE(with("pre_tokenizer", R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first"})").ok());
  EXPECT_TRUE(with("pre_tokenizer", R"({"type": "Split", "pattern": {"String": "b"}, "behavior": "Isolated"})").ok());
  // The decoders real SentencePiece-style files use are accepted.
  EXPECT_TRUE(with("decoder", R"({"type": "Sequence", "decoders": [
                                  {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                                  {"type": "ByteFallback"}, {"type": "Fuse"},
                                  {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})")
                  .ok());
}

TEST(TokenizerHostile, ConfigTokensMustExist) {
  test::expect_status(load_text(tiny_json(), R"({"bos_token": "<|nope|>"})"), StatusCode::kCorrupt,
                      {"dir/tokenizer_config.json: bos_token: '<|nope|>' names no token of dir/tokenizer.json"});
  test::expect_status(load_text(tiny_json(), R"({"eos_token": {"content": "<|nope|>"}})"), StatusCode::kCorrupt,
                      {"tokenizer_config.json: eos_token: '<|nope|>' names no token"});
  test::expect_status(load_text(tiny_json(), R"({"bos_token": 7})"), StatusCode::kCorrupt,
                      {"tokenizer_config.json: bos_token: expected a token's text", "found number"});
  test::expect_status(load_text(tiny_json(), R"([1, 2])"), StatusCode::kCorrupt,
                      {"tokenizer_config.json: (root): expected a JSON object"});
  EXPECT_TRUE(load_text(tiny_json(), R"({"bos_token": null, "eos_token": "</s>"})").ok());
}

class TokenizerFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("laya_tok_hostile_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& bytes) {
    std::ofstream((dir_ / name).string(), std::ios::binary) << bytes;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

// A broken tokenizer_config.json is reported as itself, not as tokenizer.json.
TEST_F(TokenizerFiles, BrokenConfigIsNamed) {
  const std::string tj = write("tokenizer.json", tiny_json());
  const std::string cfg = write("tokenizer_config.json", R"({"bos_token": "<s>",,})");
  auto r = Tokenizer::from_hf_json(tj);
  ASSERT_FALSE(r.ok());
  test::expect_status(r.status(), StatusCode::kCorrupt, {(cfg + ": malformed JSON at byte").c_str()});
  EXPECT_EQ(r.status().message().find("tokenizer.json:"), std::string::npos) << r.status().message();
  // Present but unreadable (here a folder) is an error too, not silently ignored.
  fs::remove(cfg);
  fs::create_directory(cfg);
  auto d = Tokenizer::from_hf_json(tj);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("tokenizer_config.json"), std::string::npos) << d.status().message();
}

// A 10 MB token in a message is cut to a line.
TEST(TokenizerHostile, HugeValuesAreCutInMessages) {
  const std::string huge(10'000'000, 'x');
  auto st = load_text(tiny_json(R"({"a": 0, "b": 1, "ab": 2, "Ġ": 3, ")" + huge + R"(": 2})"));
  test::expect_status(st, StatusCode::kCorrupt, {"model.vocab: id 2 is assigned to both 'ab' and 'xxxx", "(10000000 bytes)"});
  EXPECT_LT(st.message().size(), 300u);
  auto m = load_text(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [")" + huge + R"("]}})", "");
  test::expect_status(m, StatusCode::kCorrupt, {"model.merges[0]", "(10000000 bytes)"});
  EXPECT_LT(m.message().size(), 300u);
}

TEST(TokenizerHostile, ShownValues) {
  const std::string a40(40, 'a');
  EXPECT_EQ(shown("abc"), "'abc'");
  EXPECT_EQ(shown(a40), fmt::format("'{}'", a40));
  EXPECT_EQ(shown(a40 + "a"), fmt::format("'{}\xE2\x80\xA6' (41 bytes)", a40));
  // Cut on a character boundary, control bytes and bad UTF-8 escaped.
  std::string e;
  for (int i = 0; i < 50; ++i) e += "\xC3\xA9";
  EXPECT_EQ(shown(e), fmt::format("'{}\xE2\x80\xA6' (100 bytes)", e.substr(0, 80)));
  EXPECT_EQ(shown(std::string("a\n\x1b[2J\xff'", 8)), "'a\\x0A\\x1B[2J\\xFF\\''");
}

// ---- GGUF vocabularies ------------------------------------------------------------------------

Result<std::unique_ptr<Tokenizer>> load_gguf(test::GgufWriter& w, std::vector<uint8_t>* keep) {
  *keep = w.build();
  auto f = gguf::File::parse(MappedFile::borrow(keep->data(), keep->size(), "v.gguf"));
  if (!f.ok()) return f.status();
  static std::unique_ptr<gguf::File> held;  // the tokenizer keeps views into the file
  held = std::move(f).value();
  return Tokenizer::from_gguf(*held);
}

TEST(TokenizerHostile, GgufTokenTypesAndScores) {
  const std::vector<std::string> toks = {"<unk>", "<s>", "</s>", "\xE2\x96\x81" "a", "b"};
  auto spm = [&](const std::vector<int32_t>& types, const std::vector<float>& scores) {
    test::GgufWriter w;
    w.kv_str("tokenizer.ggml.model", "llama").kv_arr_str("tokenizer.ggml.tokens", toks);
    w.kv_arr_i32("tokenizer.ggml.token_type", types).kv_arr_f32("tokenizer.ggml.scores", scores);
    std::vector<uint8_t> keep;
    auto r = load_gguf(w, &keep);
    return r.ok() ? Status::Ok() : r.status();
  };
  EXPECT_TRUE(spm({2, 3, 3, 1, 1}, {0, 0, 0, -1, -2}).ok());
  EXPECT_TRUE(spm({0, 3, 3, 1, 1}, {0, 0, 0, -1, -2}).ok());  // 0 = undefined, as llama.cpp reads it
  test::expect_status(spm({2, 3, 3, 99, 1}, {0, 0, 0, -1, -2}), StatusCode::kCorrupt,
                      {"v.gguf: tokenizer.ggml.token_type[3] = 99 (token '\xE2\x96\x81" "a'), expected 0..6"});
  test::expect_status(spm({2, 3, 3, 1, -1}, {0, 0, 0, -1, -2}), StatusCode::kCorrupt,
                      {"tokenizer.ggml.token_type[4] = -1"});
  test::expect_status(spm({2, 3, 3, 1, 1}, {0, 0, 0, std::nanf(""), -2}), StatusCode::kCorrupt,
                      {"tokenizer.ggml.scores[3] = nan"});
  test::GgufWriter f;  // types as floats
  f.kv_str("tokenizer.ggml.model", "llama").kv_arr_str("tokenizer.ggml.tokens", toks);
  f.kv_arr_f32("tokenizer.ggml.token_type", {2, 3, 3, 1, 1});
  std::vector<uint8_t> keep;
  auto r = load_gguf(f, &keep);
  ASSERT_FALSE(r.ok());
  test::expect_status(r.status(), StatusCode::kCorrupt, {"tokenizer.ggml.token_type is an array of f32"});
}

}  // namespace
}  // namespace laya
