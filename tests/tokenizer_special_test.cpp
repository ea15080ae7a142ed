// Control-token text typed by a user stays text unless special-token parsing is
// asked for. Expectations come from the rule as llama.cpp states it
// (llama-vocab.cpp: tokenizer_st_partition matches CONTROL / UNKNOWN tokens only
// with parse_special, USER_DEFINED ones always; load() makes end-of-generation
// and fill-in-the-middle texts CONTROL) applied to the token types read straight
// from each file, and from Hugging Face's reference ids; never from laya's own
// token kinds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

using laya::tok::EditTokenizer;
using laya::tok::EncodeOptions;
using laya::tok::Tokenizer;
using json = nlohmann::json;

namespace {

// The texts of the fixture vocabularies that llama.cpp's loader makes CONTROL
// whatever their GGUF type (its end-of-generation list and, with no
// tokenizer.ggml.fim_*_token_id key, its fill-in-the-middle lists).
const std::set<std::string> kMadeControl = {
    "</s>", "<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|end|>", "<|end_of_text|>",
    "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
    "<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>", "<reponame>",
    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>",
    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>"};

enum GgufType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4 };

struct Vocab {
  std::unique_ptr<Tokenizer> tok;
  std::vector<std::string> text;
  std::vector<int> type;     // tokenizer.ggml.token_type as stored
  std::vector<bool> control;  // per the rule: never matched without parse_special
  bool phi3 = false;          // llama.cpp: special tokens eat the whitespace after them
};

const Vocab* load_vocab(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Vocab>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  const std::string path = laya::test::fixtures_dir() + "/tokenizer/llamacpp/ggml-vocab-" + name + ".gguf";
  auto f = laya::gguf::File::open(path);
  if (!f.ok()) {
    ADD_FAILURE() << f.status().to_string();
    return nullptr;
  }
  auto v = std::make_unique<Vocab>();
  auto tok = Tokenizer::from_gguf(*f.value());
  if (!tok.ok()) {
    ADD_FAILURE() << tok.status().to_string();
    return nullptr;
  }
  v->tok = std::move(tok).value();
  auto toks = f.value()->get_string_array("tokenizer.ggml.tokens");
  auto types = f.value()->get_numeric_array("tokenizer.ggml.token_type");
  if (!toks.ok() || !types.ok()) {
    ADD_FAILURE() << path << ": no tokens / token types";
    return nullptr;
  }
  for (size_t i = 0; i < toks.value()->size(); ++i) {
    v->text.emplace_back((*toks.value())[i]);
    v->type.push_back(int(types.value()->array_i64(i)));
    const int t = v->type.back();
    v->control.push_back(t == kControl || t == kUnknown || kMadeControl.count(v->text.back()));
  }
  auto gn = f.value()->get_string("general.name");
  v->phi3 = gn.ok() && (gn.value() == "Phi3");
  auto* p = v.get();
  cache[name] = std::move(v);
  return p;
}

std::vector<int32_t> enc(const Tokenizer& t, const std::string& s, bool special) {
  auto r = t.encode(s, EncodeOptions{special, false, false});
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r.value() : std::vector<int32_t>{};
}

std::vector<int32_t> concat(std::vector<int32_t> a, int32_t id, const std::vector<int32_t>& b) {
  a.push_back(id);
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

bool is_matched_type(int t) { return t == kControl || t == kUnknown || t == kUserDefined; }

const std::vector<std::string> kVocabs = {"llama-bpe", "qwen2", "gpt-2", "llama-spm", "phi-3", "starcoder",
                               "deepseek-coder", "falcon", "refact", "mpt", "gpt-neox"};

}  // namespace

class TokenizerSpecialText : public ::testing::TestWithParam<std::string> {};

// Every control / unknown / user-defined token of the vocabulary, written inside
// a line of code: without parse_special a control token stays text (no control
// id at all, and the text round-trips); a user-defined token is cut out as
// llama.cpp's partition cuts it; with parse_special every one becomes its id.
TEST_P(TokenizerSpecialText, EachTokenAsPlainText) {
  LAYA_REQUIRE_FIXTURES(fx);
  const Vocab* v = load_vocab(GetParam());
  ASSERT_NE(v, nullptr);
  const Tokenizer& t = *v->tok;
  const std::string left = "if (s == \"", right = "\") return;";
  const auto ids_left = enc(t, left, false), ids_right = enc(t, right, false);
  int n_text = 0, n_user = 0, n_special = 0;
  for (size_t id = 0; id < v->text.size(); ++id) {
    if (!is_matched_type(v->type[id]) && !kMadeControl.count(v->text[id])) continue;
    const std::string& tt = v->text[id];
    if (tt.rfind("\xE2\x96\x81", 0) == 0) continue;  // "▁<PRE>" (escaped space): never in raw text
    const std::string text = left + tt + right;
    const auto off = enc(t, text, false);
    if (v->control[id]) {
      ++n_text;
      for (int32_t x : off) ASSERT_FALSE(v->control[size_t(x)]) << GetParam() << " '" << tt << "' gave control id " << x;
      EXPECT_EQ(t.decode(off), text) << GetParam() << " '" << tt << "'";
    } else {
      ++n_user;
      EXPECT_EQ(off, concat(ids_left, int32_t(id), ids_right)) << GetParam() << " user-defined '" << tt << "'";
    }
    if (is_matched_type(v->type[id])) {
      ++n_special;
      EXPECT_EQ(enc(t, text, true), concat(ids_left, int32_t(id), ids_right)) << GetParam() << " '" << tt << "'";
    }
  }
  std::printf("[tokenizer] %s: %d control tokens kept as text, %d user-defined cut out, %d matched with parse_special\n",
              GetParam().c_str(), n_text, n_user, n_special);
  EXPECT_GT(n_text, 0);
}

// The incremental tokenizer agrees with a full tokenization, keystroke by
// keystroke, on code holding the vocabulary's control tokens as text.
TEST_P(TokenizerSpecialText, EditTokenizerAgrees) {
  LAYA_REQUIRE_FIXTURES(fx);
  const Vocab* v = load_vocab(GetParam());
  ASSERT_NE(v, nullptr);
  const Tokenizer& t = *v->tok;
  std::string text = "x = \"<s></s>\"\n";
  int picked = 0;
  for (size_t id = 0; id < v->text.size() && picked < 6; ++id) {
    if (!is_matched_type(v->type[id]) || v->text[id].rfind("\xE2\x96\x81", 0) == 0) continue;
    if (v->text[id].find_first_not_of(' ') == std::string::npos) continue;  // whitespace runs: below
    text += "if tok == '" + v->text[id] + "':  pass\n";
    ++picked;
  }
  text += "y = ' \t '  # end\n";
  for (bool special : {false, true}) {
    EditTokenizer et(t, special);
    ASSERT_TRUE(et.set_text("").ok());
    size_t pos = 0;
    while (pos < text.size()) {
      size_t n = 1;
      while (pos + n < text.size() && (uint8_t(text[pos + n]) & 0xC0) == 0x80) ++n;
      ASSERT_TRUE(et.edit(pos, 0, text.substr(pos, n)).ok());
      pos += n;
      ASSERT_EQ(et.ids(), enc(t, text.substr(0, pos), special))
          << GetParam() << " special=" << special << " after " << json(text.substr(0, pos)).dump();
    }
    if (special) continue;
    for (int32_t x : et.ids()) EXPECT_FALSE(v->control[size_t(x)]) << GetParam() << " control id " << x;
  }
}

INSTANTIATE_TEST_SUITE_P(TokenizerVocabs, TokenizerSpecialText, ::testing::ValuesIn(kVocabs),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (auto& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

// The case of the issue, spelled out: phi-3's GGUF says "</s>" is user-defined,
// llama.cpp makes it control (an end-of-generation text), so "</s>" in code is text.
TEST(TokenizerSpecialText, Phi3EndOfSequenceInCode) {
  LAYA_REQUIRE_FIXTURES(fx);
  const Vocab* v = load_vocab("phi-3");
  ASSERT_NE(v, nullptr);
  ASSERT_EQ(v->text[2], "</s>");
  ASSERT_EQ(v->type[2], kUserDefined);
  const Tokenizer& t = *v->tok;
  const std::string code = "print(\"</s>\")";
  const auto off = enc(t, code, false);
  EXPECT_EQ(std::count(off.begin(), off.end(), 2), 0);
  EXPECT_EQ(t.decode(off), code);
  const auto on = enc(t, code, true);
  EXPECT_EQ(std::count(on.begin(), on.end(), 2), 1);
  EXPECT_TRUE(t.is_control(2));
  EXPECT_TRUE(t.is_eog(2));
  // qwen2: "<|fim_prefix|>" is user-defined in the file, control for llama.cpp; "<think>" stays user-defined.
  const Vocab* q = load_vocab("qwen2");
  ASSERT_NE(q, nullptr);
  const auto qo = enc(*q->tok, "<|fim_prefix|><think>", false);
  EXPECT_EQ(std::count(qo.begin(), qo.end(), 151659), 0);
  EXPECT_EQ(qo.back(), 151667);
  // deepseek-coder: "<|EOT|>" is in no llama.cpp list: user-defined, matched even without parse_special.
  const Vocab* d = load_vocab("deepseek-coder");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(enc(*d->tok, "<|EOT|>", false), (std::vector<int32_t>{32021}));
}

namespace {

// tokenizer.json: control = "special": true, or what convert_hf_to_gguf.py makes
// CONTROL ("<|...|>"), or a text llama.cpp makes control.
std::set<int32_t> hf_control_ids(const json& tj) {
  std::set<int32_t> ids;
  for (const auto& a : tj["added_tokens"]) {
    std::string c = a["content"];
    bool looks = c.size() >= 4 && c.compare(0, 2, "<|") == 0 && c.compare(c.size() - 2, 2, "|>") == 0;
    if (a.value("special", false) || looks || kMadeControl.count(c)) ids.insert(a["id"].get<int32_t>());
  }
  return ids;
}

struct Counts {
  int same = 0, text = 0;
};

// Hugging Face matches every added token (its ids are the parse_special case).
// Without parse_special: a string whose reference ids hold no control id gives
// exactly those ids; one that holds some gives no control id and the same text.
// `skip_nfc`: leave out the strings that Hugging Face's NFC normalizer changed
// (llama.cpp's qwen2 pre-tokenizer has none).
Counts check_against_hf(const Tokenizer& t, const std::string& model, const std::set<int32_t>& control,
                        bool skip_nfc) {
  const std::string dir = laya::test::fixtures_dir() + "/tokenizer";
  std::ifstream in(dir + "/vectors/" + model + ".jsonl");
  EXPECT_TRUE(in) << model;
  Counts c;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json j = json::parse(line);
    const std::string text = j["text"];
    if (skip_nfc && j["decoded"] != j["text"]) continue;
    std::vector<int32_t> want = j["ids"];
    const auto off = enc(t, text, false);
    if (std::none_of(want.begin(), want.end(), [&](int32_t x) { return control.count(x) > 0; })) {
      ++c.same;
      EXPECT_EQ(off, want) << model << " " << json(text).dump();
    } else {
      ++c.text;
      for (int32_t x : off) EXPECT_EQ(control.count(x), 0u) << model << " " << json(text).dump() << " id " << x;
      EXPECT_EQ(t.decode(off), text) << model << " " << json(text).dump();
    }
  }
  return c;
}

}  // namespace

TEST(TokenizerSpecialText, HfVectorsWithoutSpecialParsing) {
  LAYA_REQUIRE_FIXTURES(fx);
  for (const std::string model : {"llama3", "qwen3", "mistral"}) {
    const std::string path = fx + "/tokenizer/hf/" + model + "/tokenizer.json";
    const Tokenizer* tok = laya::test::cached_tokenizer(path);  // the vector tests load the same files
    ASSERT_NE(tok, nullptr);
    Counts c = check_against_hf(*tok, model, hf_control_ids(json::parse(laya::test::read_text_file(path))), false);
    std::printf("[tokenizer] %s without parse_special: %d strings as the reference, %d with control text kept as text\n",
                model.c_str(), c.same, c.text);
    EXPECT_GT(c.text, 0);
  }
}

// The same vocabularies as GGUF files (llama.cpp's qwen2 and llama-bpe hold the
// Qwen 3 and Llama 3 vocabularies) against the same Hugging Face reference, both ways.
TEST(TokenizerSpecialText, GgufAgainstHfVectors) {
  LAYA_REQUIRE_FIXTURES(fx);
  for (const auto& [vocab, model] : {std::pair<std::string, std::string>{"qwen2", "qwen3"}, {"llama-bpe", "llama3"}}) {
    const Vocab* v = load_vocab(vocab);
    ASSERT_NE(v, nullptr);
    std::set<int32_t> control;
    for (size_t id = 0; id < v->control.size(); ++id)
      if (v->control[id]) control.insert(int32_t(id));
    Counts c = check_against_hf(*v->tok, model, control, true);
    // With parse_special: Hugging Face's ids, except where its NFC normalization
    // changed the text, and where the text holds a vocabulary token of type
    // NORMAL that llama.cpp makes control (qwen2's "</s>" is an EOG text): llama.cpp
    // then matches it as one token, Hugging Face does not.
    std::vector<std::string> made_control;
    for (size_t id = 0; id < v->text.size(); ++id)
      if (v->type[id] == kNormal && kMadeControl.count(v->text[id])) made_control.push_back(v->text[id]);
    std::ifstream in(fx + "/tokenizer/vectors/" + model + ".jsonl");
    std::string line;
    int same = 0, n = 0, promoted = 0;
    while (std::getline(in, line)) {
      json j = json::parse(line);
      if (j["decoded"] != j["text"]) continue;
      const std::string text = j["text"];
      auto m = std::find_if(made_control.begin(), made_control.end(),
                            [&](const std::string& c) { return text.find(c) != std::string::npos; });
      if (m != made_control.end()) {
        ++promoted;
        auto ids = enc(*v->tok, text, true);
        auto id = v->tok->find_token(*m);
        EXPECT_TRUE(id && std::count(ids.begin(), ids.end(), *id) > 0) << vocab << " " << json(text).dump();
        continue;
      }
      ++n;
      std::vector<int32_t> want = j["ids"];
      if (enc(*v->tok, j["text"], true) == want) ++same;
      else ADD_FAILURE() << vocab << " with parse_special: " << j["text"].dump();
    }
    std::printf("[tokenizer] %s.gguf vs %s reference: without parse_special %d same + %d as text; with it %d/%d "
                "(+%d holding a NORMAL token llama.cpp makes control)\n",
                vocab.c_str(), model.c_str(), c.same, c.text, same, n, promoted);
  }
}
