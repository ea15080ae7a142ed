// Tokenizers against the reference ids of the fixtures: transformers.js vectors
// for tokenizer.json files, llama.cpp's own vocab test cases for GGUF files,
// the tiny reference models' cases, and incremental re-tokenization traces.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using laya::tok::EncodeOptions;
using laya::tok::Tokenizer;
using json = nlohmann::json;

namespace {

const Tokenizer* cached(const std::string& path) { return laya::test::cached_tokenizer(path); }

std::string ids_str(const std::vector<int32_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s + "]";
}

std::vector<int32_t> to_ids(const json& j) {
  std::vector<int32_t> v;
  for (const auto& x : j) v.push_back(x.get<int32_t>());
  return v;
}

void check_vectors(const std::string& fx, const std::string& model) {
  const std::string dir = fx + "/tokenizer";
  const Tokenizer* tok = cached(dir + "/hf/" + model + "/tokenizer.json");
  ASSERT_NE(tok, nullptr);
  std::ifstream in(dir + "/vectors/" + model + ".jsonl");
  ASSERT_TRUE(in) << "missing vectors for " << model;
  std::string line;
  int n = 0, ok_ids = 0, ok_special = 0, ok_decode = 0, n_decode = 0, shown = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json j = json::parse(line);
    std::string text = j["text"];
    auto want = to_ids(j["ids"]);
    auto want_s = to_ids(j["ids_with_special"]);
    ++n;
    auto got = tok->encode(text, EncodeOptions{true, false, std::nullopt});
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    auto got_s = tok->encode(text, EncodeOptions{true, std::nullopt, std::nullopt});
    ASSERT_TRUE(got_s.ok());
    if (got.value() == want) ++ok_ids;
    else if (shown++ < 5)
      ADD_FAILURE() << model << " ids differ for " << json(text).dump() << "\n want " << ids_str(want) << "\n got  "
                    << ids_str(got.value());
    if (got_s.value() == want_s) ++ok_special;
    else if (shown++ < 5)
      ADD_FAILURE() << model << " ids_with_special differ for " << json(text).dump() << "\n want " << ids_str(want_s)
                    << "\n got  " << ids_str(got_s.value());
    if (j.contains("decoded")) {
      ++n_decode;
      std::string dec = tok->decode(want);
      if (dec == j["decoded"].get<std::string>()) ++ok_decode;
      else if (shown++ < 5)
        ADD_FAILURE() << model << " decode differs for " << json(text).dump() << ": got " << json(dec).dump(-1, ' ', false, json::error_handler_t::replace);
    }
  }
  std::printf("[tokenizer] %s vectors: ids %d/%d, ids_with_special %d/%d, decoded %d/%d\n", model.c_str(), ok_ids, n,
              ok_special, n, ok_decode, n_decode);
  EXPECT_GT(n, 0);
  EXPECT_EQ(ok_ids, n);
  EXPECT_EQ(ok_special, n);
  EXPECT_EQ(ok_decode, n_decode);
}

void check_llamacpp(const std::string& fx, const std::string& vocab) {
  const std::string base = fx + "/tokenizer/llamacpp/ggml-vocab-" + vocab + ".gguf";
  const Tokenizer* tok = cached(base);
  ASSERT_NE(tok, nullptr);
  std::string inp = laya::test::read_text_file(base + ".inp");
  std::string out = laya::test::read_text_file(base + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (size_t p = 0;;) {
    size_t q = inp.find(sep, p);
    if (q == std::string::npos) break;
    inputs.push_back(inp.substr(p, q - p));
    p = q + sep.size();
  }
  std::vector<std::vector<int32_t>> outputs;
  std::istringstream os(out);
  std::string line;
  while (std::getline(os, line)) {
    std::istringstream ls(line);
    std::vector<int32_t> v;
    int32_t x;
    while (ls >> x) v.push_back(x);
    outputs.push_back(v);
  }
  ASSERT_GE(outputs.size(), inputs.size());
  int ok = 0, shown = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto got = tok->encode(inputs[i], EncodeOptions{false, false, std::nullopt});
    ASSERT_TRUE(got.ok());
    if (got.value() == outputs[i]) ++ok;
    else if (shown++ < 4)
      ADD_FAILURE() << vocab << " case " << i << " " << json(inputs[i]).dump() << "\n want " << ids_str(outputs[i])
                    << "\n got  " << ids_str(got.value());
  }
  std::printf("[tokenizer] llama.cpp %s: %d/%zu cases\n", vocab.c_str(), ok, inputs.size());
  EXPECT_EQ(ok, int(inputs.size()));
}

}  // namespace

TEST(TokenizerVectors, Llama3) {
  LAYA_REQUIRE_FIXTURES(fx);
  check_vectors(fx, "llama3");
}
TEST(TokenizerVectors, Qwen3) {
  LAYA_REQUIRE_FIXTURES(fx);
  check_vectors(fx, "qwen3");
}
TEST(TokenizerVectors, Mistral) {
  LAYA_REQUIRE_FIXTURES(fx);
  check_vectors(fx, "mistral");
}

class TokenizerLlamaCpp : public ::testing::TestWithParam<std::string> {};
TEST_P(TokenizerLlamaCpp, Cases) {
  LAYA_REQUIRE_FIXTURES(fx);
  check_llamacpp(fx, GetParam());
}
INSTANTIATE_TEST_SUITE_P(TokenizerVocabs, TokenizerLlamaCpp,
                         ::testing::Values("llama-bpe", "qwen2", "gpt-2", "llama-spm", "phi-3", "starcoder",
                                           "deepseek-coder", "falcon", "refact", "mpt"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (auto& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

TEST(TokenizerGguf, GptNeoxLoads) {
  LAYA_REQUIRE_FIXTURES(fx);
  const Tokenizer* tok = cached(fx + "/tokenizer/llamacpp/ggml-vocab-gpt-neox.gguf");
  ASSERT_NE(tok, nullptr);
  auto ids = tok->encode("Hello world", EncodeOptions{false, false, std::nullopt});
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(tok->decode(ids.value()), "Hello world");
}

// The tiny reference models: tokenizer.json and the GGUF conversion agree with the cases.
TEST(TokenizerRefModels, Cases) {
  LAYA_REQUIRE_FIXTURES(fx);
  for (const std::string m : {"llama-tiny", "qwen2-tiny", "qwen3-tiny"}) {
    std::string dir = fx + "/ref-models/" + m;
    json cases = json::parse(laya::test::read_text_file(dir + "/tokenizer_cases.json"));
    std::vector<std::string> paths = {dir + "/hf/tokenizer.json"};
    for (const auto& e : fs::directory_iterator(dir + "/gguf"))
      if (e.path().filename().string().find("f16") != std::string::npos) paths.push_back(e.path().string());
    for (const auto& p : paths) {
      const Tokenizer* tok = cached(p);
      ASSERT_NE(tok, nullptr);
      int n = 0, ok = 0;
      for (const auto& c : cases["cases"]) {
        std::string text = c["text"];
        auto want = to_ids(c["ids_no_special"]);
        auto want_s = to_ids(c["ids_with_special"]);
        auto got = tok->encode(text, EncodeOptions{true, false, std::nullopt});
        auto got_s = tok->encode(text, EncodeOptions{true, std::nullopt, std::nullopt});
        ASSERT_TRUE(got.ok() && got_s.ok());
        ++n;
        bool good = got.value() == want && got_s.value() == want_s;
        if (good) ++ok;
        else
          ADD_FAILURE() << p << " " << json(text).dump() << "\n want " << ids_str(want) << " / " << ids_str(want_s)
                        << "\n got  " << ids_str(got.value()) << " / " << ids_str(got_s.value());
        if (c.contains("decoded")) {
          EXPECT_EQ(tok->decode(want), c["decoded"].get<std::string>()) << p << " " << text;
        }
      }
      std::printf("[tokenizer] %s: %d/%d cases\n", fs::path(p).filename().string().c_str(), ok, n);
    }
  }
}

TEST(TokenizerDemoModel, GgufMatchesTokenizerJson) {
  LAYA_REQUIRE_FIXTURES(fx);
  const Tokenizer* a = cached(fx + "/demo-model/demo-q8_0.gguf");
  const Tokenizer* b = cached(fx + "/demo-model/hf/tokenizer.json");
  ASSERT_TRUE(a && b);
  json corpus = json::parse(laya::test::read_text_file(fx + "/tokenizer/vectors/corpus.json"));
  int n = 0, ok = 0;
  for (const auto& s : corpus) {
    std::string text = s;
    auto x = a->encode(text, EncodeOptions{false, false, std::nullopt});
    auto y = b->encode(text, EncodeOptions{false, false, std::nullopt});
    ASSERT_TRUE(x.ok() && y.ok());
    ++n;
    if (x.value() == y.value()) ++ok;
    EXPECT_EQ(a->decode(x.value()), text);
  }
  std::printf("[tokenizer] demo-model gguf vs tokenizer.json: %d/%d\n", ok, n);
  EXPECT_EQ(ok, n);
  EXPECT_EQ(a->bos_id(), b->bos_id());
}
