// Metadata sanity (model/validate.h): every hyper-parameter the forward pass
// uses is range-checked at load and checked against the tensors. The bad files
// are built here: a tiny Llama-family GGUF from scratch (tests/gguf_writer.h),
// and Hugging Face folders from the llama-tiny fixture with an edited
// config.json. Each case checks the status code and that the message names the
// key and the value.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "gguf_writer.h"
#include "model/model.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace laya {
namespace {

namespace fs = std::filesystem;
using test::Bytes;
using test::GgufWriter;
namespace gt = test::gt;

// GPT-2's byte alphabet: token b is byte b (as in tokenizer_gguf_test.cpp).
std::vector<std::string> byte_tokens() {
  std::vector<std::string> v;
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    uint32_t cp;
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) cp = uint32_t(b);
    else cp = uint32_t(256 + n++);
    std::string s;
    if (cp < 0x80) s.push_back(char(cp));
    else s += {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
    v.push_back(s);
  }
  return v;
}

// A valid tiny model of the Llama family, every part of which a test can
// break: its metadata keys (set / erase), its tensors (drop, or the rows of
// the embedding), its vocabulary.
struct TinyGguf {
  std::string arch = "llama";
  int64_t n_embd = 16, n_head = 4, n_head_kv = 2, head_dim = 4, n_ff = 32, n_layer = 2, n_ctx = 256;
  int64_t emb_rows = 260;  // = the vocabulary below
  bool rope_freqs = false;
  std::vector<float> rope_freqs_values;  // default: all 1
  std::vector<std::string> drop;         // tensor names left out

  struct Kv {
    std::string key;
    uint32_t type;
    Bytes payload;
  };
  std::vector<Kv> kvs;

  TinyGguf() { reset_metadata(); }

  void set(const std::string& key, uint32_t type, Bytes payload) {
    for (auto& kv : kvs)
      if (kv.key == key) {
        kv.type = type, kv.payload = std::move(payload);
        return;
      }
    kvs.push_back({key, type, std::move(payload)});
  }
  void set_u32(const std::string& k, uint32_t v) { set(k, gt::U32, Bytes().u32(v)); }
  void set_u64(const std::string& k, uint64_t v) { set(k, gt::U64, Bytes().u64(v)); }
  void set_f32(const std::string& k, float v) { set(k, gt::F32, Bytes().f32(v)); }
  void set_str(const std::string& k, const std::string& v) { set(k, gt::STRING, Bytes().str(v)); }
  void set_strs(const std::string& k, const std::vector<std::string>& v) {
    Bytes p;
    p.arr(gt::STRING, v.size());
    for (const auto& s : v) p.str(s);
    set(k, gt::ARRAY, p);
  }
  void set_i32s(const std::string& k, const std::vector<int32_t>& v) {
    Bytes p;
    p.arr(gt::I32, v.size());
    for (int32_t x : v) p.i32(x);
    set(k, gt::ARRAY, p);
  }
  void erase(const std::string& key) {
    std::erase_if(kvs, [&](const Kv& kv) { return kv.key == key; });
  }
  std::string key(const std::string& suffix) const { return arch + "." + suffix; }

  // What convert_hf_to_gguf.py writes for such a model.
  void reset_metadata() {
    kvs.clear();
    set_str("general.architecture", arch);
    set_u32(key("context_length"), uint32_t(n_ctx));
    set_u32(key("embedding_length"), uint32_t(n_embd));
    set_u32(key("block_count"), uint32_t(n_layer));
    set_u32(key("feed_forward_length"), uint32_t(n_ff));
    set_u32(key("attention.head_count"), uint32_t(n_head));
    set_u32(key("attention.head_count_kv"), uint32_t(n_head_kv));
    set_f32(key("rope.freq_base"), 10000.f);
    set_f32(key("attention.layer_norm_rms_epsilon"), 1e-5f);
    set_u32(key("rope.dimension_count"), uint32_t(head_dim));
    set_u32(key("vocab_size"), uint32_t(emb_rows));
    std::vector<std::string> toks = byte_tokens();
    toks.insert(toks.end(), {"<s>", "</s>", "he", "ll"});
    std::vector<int32_t> types(toks.size(), 1);
    types[256] = types[257] = 3;
    set_str("tokenizer.ggml.model", "gpt2");
    set_str("tokenizer.ggml.pre", "gpt-2");
    set_strs("tokenizer.ggml.tokens", toks);
    set_i32s("tokenizer.ggml.token_type", types);
    set_strs("tokenizer.ggml.merges", {"h e", "l l"});
    set_u32("tokenizer.ggml.bos_token_id", 256);
    set_u32("tokenizer.ggml.eos_token_id", 257);
  }

  std::vector<uint8_t> build() const {
    GgufWriter w;
    for (const auto& kv : kvs) w.kv_raw(kv.key, kv.type, kv.payload);
    uint64_t seed = 1;
    auto add = [&](const std::string& name, std::vector<uint64_t> ne, float mean = 0.f) {
      if (std::find(drop.begin(), drop.end(), name) != drop.end()) return;
      uint64_t n = 1;
      for (uint64_t d : ne) n *= d;
      Bytes data;
      for (uint64_t i = 0; i < n; ++i) data.f32(mean + 0.05f * std::sin(float(i) * 0.37f + float(seed)));
      ++seed;
      w.tensor(name, ne, 0, std::nullopt, data.b);
    };
    const uint64_t E = uint64_t(n_embd), Q = uint64_t(n_head * head_dim), KV = uint64_t(n_head_kv * head_dim);
    add("token_embd.weight", {E, uint64_t(emb_rows)});
    if (rope_freqs && std::find(drop.begin(), drop.end(), "rope_freqs.weight") == drop.end()) {
      std::vector<float> f = rope_freqs_values;
      if (f.empty()) f.assign(size_t(head_dim / 2), 1.f);
      Bytes data;
      for (float x : f) data.f32(x);
      w.tensor("rope_freqs.weight", {uint64_t(f.size())}, 0, std::nullopt, data.b);
    }
    for (int64_t l = 0; l < n_layer; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      add(b + "attn_norm.weight", {E}, 1.f);
      add(b + "attn_q.weight", {E, Q});
      add(b + "attn_k.weight", {E, KV});
      add(b + "attn_v.weight", {E, KV});
      if (arch == "qwen2") {
        add(b + "attn_q.bias", {Q});
        add(b + "attn_k.bias", {KV});
        add(b + "attn_v.bias", {KV});
      }
      add(b + "attn_output.weight", {Q, E});
      if (arch == "qwen3") {
        add(b + "attn_q_norm.weight", {uint64_t(head_dim)}, 1.f);
        add(b + "attn_k_norm.weight", {uint64_t(head_dim)}, 1.f);
      }
      add(b + "ffn_norm.weight", {E}, 1.f);
      add(b + "ffn_gate.weight", {E, uint64_t(n_ff)});
      add(b + "ffn_up.weight", {E, uint64_t(n_ff)});
      add(b + "ffn_down.weight", {uint64_t(n_ff), E});
    }
    add("output_norm.weight", {E}, 1.f);
    return w.build();
  }
};

class ModelMetadata : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("laya_meta_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& bytes) {
    fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  std::string write(const TinyGguf& m, const std::string& name = "m.gguf") {
    const std::vector<uint8_t> b = m.build();
    return write(name, std::string(b.begin(), b.end()));
  }
  Status load(const TinyGguf& m) {
    auto r = Model::load(write(m));
    return r.ok() ? Status::Ok() : r.status();
  }
  fs::path dir_;
};

TEST_F(ModelMetadata, TinyModelLoadsWithItsTokenizer) {
  TinyGguf m;
  auto r = Model::load(write(m));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Model& model = *r.value();
  EXPECT_EQ(model.hparams().n_vocab, 260);
  EXPECT_EQ(model.hparams().bos_id, 256);
  auto t = tok::Tokenizer::from_gguf(*model.gguf_file());
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_TRUE(model.check_tokenizer_size(t.value()->n_vocab(), "tok").ok());
  for (const char* arch : {"qwen2", "qwen3"}) {
    TinyGguf q;
    q.arch = arch;
    q.reset_metadata();
    EXPECT_TRUE(load(q).ok()) << arch << ": " << load(q).to_string();
  }
}

TEST_F(ModelMetadata, RmsEpsMustBeFinitePositive) {
  for (float eps : {std::nanf(""), std::numeric_limits<float>::infinity(), -1e-5f, 0.f, 2.f}) {
    TinyGguf m;
    m.set_f32(m.key("attention.layer_norm_rms_epsilon"), eps);
    const Status st = load(m);
    test::expect_status(st, StatusCode::kCorrupt, {"llama.attention.layer_norm_rms_epsilon = ", "m.gguf"});
    EXPECT_NE(st.message().find(fmt::format("= {:g}", eps)), std::string::npos) << st.message();
  }
  TinyGguf q;  // the key is the architecture's
  q.arch = "qwen3";
  q.reset_metadata();
  q.set_f32(q.key("attention.layer_norm_rms_epsilon"), std::nanf(""));
  test::expect_status(load(q), StatusCode::kCorrupt, {"qwen3.attention.layer_norm_rms_epsilon = nan"});
}

TEST_F(ModelMetadata, RopeBaseMustBeFiniteAboveOne) {
  for (float theta : {0.f, std::nanf(""), -1.f, std::numeric_limits<float>::infinity(), 1.f}) {
    TinyGguf m;
    m.set_f32(m.key("rope.freq_base"), theta);
    test::expect_status(load(m), StatusCode::kCorrupt,
                        {fmt::format("llama.rope.freq_base = {:g}, expected a finite number > 1", theta).c_str()});
  }
}

TEST_F(ModelMetadata, LinearRopeScalingFactorMustBeFinitePositive) {
  TinyGguf m;
  m.set_str(m.key("rope.scaling.type"), "linear");
  m.set_f32(m.key("rope.scaling.factor"), std::nanf(""));
  test::expect_status(load(m), StatusCode::kCorrupt, {"llama.rope.scaling.factor = nan"});
  m.set_f32(m.key("rope.scaling.factor"), 4.f);
  ASSERT_TRUE(load(m).ok()) << load(m).to_string();
  m.set_str(m.key("rope.scaling.type"), "yarn");
  test::expect_status(load(m), StatusCode::kUnsupported, {"llama.rope.scaling.type = 'yarn' is not supported"});
}

// Llama 3 rope scaling is a tensor in GGUF; metadata that calls for it and a
// file without it is refused, not run with unscaled frequencies.
TEST_F(ModelMetadata, Llama3RopeScalingNeedsItsTensor) {
  TinyGguf m;
  m.set_str(m.key("rope.scaling.type"), "llama3");
  test::expect_status(load(m), StatusCode::kNotFound,
                      {"tensor 'rope_freqs.weight' is missing", "llama.rope.scaling.type = 'llama3'"});
  m.rope_freqs = true;
  m.rope_freqs_values = {1.f, 8.f};
  auto r = Model::load(write(m));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value()->hparams().rope_freq_factors, (std::vector<float>{1.f, 8.f}));

  // The Llama 3.1 signature (base 500000, context past 8192) with no tensor
  // and no type: the file lost its scaling (llama-tiny without the tensor ran
  // with logits off by 0.37).
  TinyGguf s;
  s.set_f32(s.key("rope.freq_base"), 500000.f);
  s.set_u32(s.key("context_length"), 131072);
  test::expect_status(load(s), StatusCode::kNotFound,
                      {"tensor 'rope_freqs.weight' is missing", "llama.rope.freq_base = 500000",
                       "llama.context_length = 131072", "llama.rope.scaling.type = 'none'"});
  s.set_str(s.key("rope.scaling.type"), "none");  // the file says it has none
  EXPECT_TRUE(load(s).ok()) << load(s).to_string();
  s.erase(s.key("rope.scaling.type"));
  s.set_u32(s.key("context_length"), 8192);  // Llama 3.0: no scaling
  EXPECT_TRUE(load(s).ok()) << load(s).to_string();

  TinyGguf bad;  // the divisors themselves
  bad.rope_freqs = true;
  bad.rope_freqs_values = {1.f, std::nanf("")};
  test::expect_status(load(bad), StatusCode::kCorrupt, {"tensor 'rope_freqs.weight'[1] = nan"});
  bad.rope_freqs_values = {0.f, 1.f};
  test::expect_status(load(bad), StatusCode::kCorrupt, {"tensor 'rope_freqs.weight'[0] = 0"});
}

TEST_F(ModelMetadata, RopeDimensionMustBeTheHeadSize) {
  TinyGguf m;
  m.set_u32(m.key("rope.dimension_count"), 2);
  test::expect_status(load(m), StatusCode::kUnsupported,
                      {"llama.rope.dimension_count = 2 but the head size is 4", "partial rotary"});
  m.set_u32(m.key("rope.dimension_count"), 8);
  test::expect_status(load(m), StatusCode::kCorrupt, {"llama.rope.dimension_count = 8 but the head size is 4"});
  m.set_u32(m.key("rope.dimension_count"), 0);
  test::expect_status(load(m), StatusCode::kCorrupt, {"llama.rope.dimension_count = 0"});
  m.erase(m.key("rope.dimension_count"));
  EXPECT_TRUE(load(m).ok());
  m.set_u32(m.key("attention.value_length"), 2);
  test::expect_status(load(m), StatusCode::kUnsupported, {"llama.attention.value_length = 2"});
}

TEST_F(ModelMetadata, VocabularySizeMatchesTheEmbedding) {
  TinyGguf m;
  m.set_u32(m.key("vocab_size"), 300);
  test::expect_status(load(m), StatusCode::kCorrupt,
                      {"llama.vocab_size = 300 but tensor 'token_embd.weight' has 260 rows"});
  m.set_u32(m.key("vocab_size"), 259);
  test::expect_status(load(m), StatusCode::kCorrupt, {"llama.vocab_size = 259"});
  // The token list against the embedding (llama.cpp requires them equal).
  TinyGguf s;
  s.emb_rows = 270;
  s.reset_metadata();
  test::expect_status(load(s), StatusCode::kCorrupt,
                      {"tokenizer.ggml.tokens has 260 entries but tensor 'token_embd.weight' has 270 rows"});
  s.emb_rows = 250;
  s.reset_metadata();
  test::expect_status(load(s), StatusCode::kCorrupt, {"tokenizer.ggml.tokens has 260 entries", "250 rows"});
  // A tokenizer with more ids than the embedding has rows, against a model.
  TinyGguf ok;
  auto r = Model::load(write(ok));
  ASSERT_TRUE(r.ok());
  test::expect_status(r.value()->check_tokenizer_size(261, "big/tokenizer.json"), StatusCode::kCorrupt,
                      {"big/tokenizer.json", "261 token ids", "260 rows", "ids 260..260"});
  EXPECT_TRUE(r.value()->check_tokenizer_size(200, "small").ok());  // padding, as Hugging Face models have
}

TEST_F(ModelMetadata, SpecialIdsAreRowsOfTheEmbedding) {
  TinyGguf m;
  m.set_u32("tokenizer.ggml.bos_token_id", 9999);
  test::expect_status(load(m), StatusCode::kCorrupt, {"tokenizer.ggml.bos_token_id = 9999 is not a token id"});
  TinyGguf e;
  e.set_u64("tokenizer.ggml.eos_token_id", uint64_t{1} << 40);  // would wrap to 0 as an int32
  test::expect_status(load(e), StatusCode::kCorrupt, {"tokenizer.ggml.eos_token_id = 1099511627776"});
}

TEST_F(ModelMetadata, HeadCounts) {
  struct Case {
    const char* key;
    uint32_t value;
    const char* fragment;
  };
  const Case cases[] = {
      {"attention.head_count", 0, "llama.attention.head_count = 0, expected a positive count"},
      {"attention.head_count_kv", 3, "llama.attention.head_count_kv = 3 does not divide llama.attention.head_count = 4"},
      {"attention.head_count_kv", 8, "llama.attention.head_count_kv = 8 does not divide"},
      {"attention.head_count_kv", 0, "llama.attention.head_count_kv = 0"},
      {"attention.key_length", 5, "head size 5 (llama.attention.key_length = 5) is odd"},
      {"embedding_length", 0, "llama.embedding_length = 0"},
  };
  for (const Case& c : cases) {
    TinyGguf m;
    m.set_u32(m.key(c.key), c.value);
    test::expect_status(load(m), StatusCode::kCorrupt, {c.fragment});
  }
  // Without key_length the head size is n_embd / n_head, which must divide.
  TinyGguf d;
  d.set_u32(d.key("attention.head_count"), 5);
  d.set_u32(d.key("attention.head_count_kv"), 5);
  test::expect_status(load(d), StatusCode::kCorrupt,
                      {"llama.embedding_length = 16 is not a multiple of llama.attention.head_count = 5",
                       "llama.attention.key_length is absent"});
  // A head count from another model shows in the tensor shapes.
  TinyGguf s;
  s.set_u32(s.key("attention.head_count"), 2);
  s.set_u32(s.key("attention.head_count_kv"), 2);
  s.set_u32(s.key("rope.dimension_count"), 8);
  test::expect_status(load(s), StatusCode::kCorrupt, {"tensor 'blk.0.attn_k.weight'", "n_head_kv mismatch?"});
}

TEST_F(ModelMetadata, ContextLength) {
  TinyGguf m;
  m.set_u32(m.key("context_length"), 0);
  test::expect_status(load(m), StatusCode::kCorrupt, {"llama.context_length = 0, expected a positive count"});
  m.set_u64(m.key("context_length"), uint64_t{1} << 30);
  test::expect_status(load(m), StatusCode::kCorrupt, {"llama.context_length = 1073741824 is past 67108864"});
  m.set_u64(m.key("context_length"), uint64_t{1} << 40);
  test::expect_status(load(m), StatusCode::kCorrupt, {"llama.context_length = 1099511627776"});
}

// The block count against the layers the file holds: fewer is a missing
// tensor, more is layers silently skipped, two billion is no allocation.
TEST_F(ModelMetadata, BlockCountMatchesTheLayerTensors) {
  TinyGguf m;
  m.set_u32(m.key("block_count"), 1);
  test::expect_status(load(m), StatusCode::kCorrupt,
                      {"llama.block_count = 1 but the weights have tensors of 2 layers (blk.0 … blk.1)"});
  m.set_u32(m.key("block_count"), 3);
  test::expect_status(load(m), StatusCode::kNotFound,
                      {"tensor 'blk.2.attn_norm.weight' is missing", "llama.block_count = 3"});
  m.set_u32(m.key("block_count"), 2000000000);
  test::expect_status(load(m), StatusCode::kNotFound, {"llama.block_count = 2000000000"});
  TinyGguf gap;  // a layer in the middle without its tensors
  gap.drop = {"blk.0.attn_norm.weight"};
  test::expect_status(load(gap), StatusCode::kNotFound, {"tensor 'blk.0.attn_norm.weight' is missing"});
}

// ---- Hugging Face folders: config.json beside the llama-tiny weights ----------------------------

class HfMetadata : public ModelMetadata {
 protected:
  // The llama-tiny folder with `edit` applied to its config.json (as text
  // after the edit, so a test can write what JSON libraries will not).
  Status load_edited(const std::function<void(nlohmann::json&)>& edit, const std::string& raw_from = "",
                     const std::string& raw_to = "") {
    const std::string src = fx_ + "/ref-models/llama-tiny/hf";
    nlohmann::json cfg = nlohmann::json::parse(test::read_text_file(src + "/config.json"));
    edit(cfg);
    std::string text = cfg.dump(1);
    if (!raw_from.empty()) text.replace(text.find(raw_from), raw_from.size(), raw_to);
    const fs::path d = dir_ / "hf";
    fs::remove_all(d);
    write("hf/config.json", text);
    fs::create_symlink(src + "/model.safetensors", d / "model.safetensors");
    auto r = Model::load(d.string());
    return r.ok() ? Status::Ok() : r.status();
  }
  std::string fx_ = test::fixtures_dir();
};

TEST_F(HfMetadata, ConfigValuesAreRangeChecked) {
  if (fx_.empty()) GTEST_SKIP() << "no fixtures";
  ASSERT_TRUE(load_edited([](nlohmann::json&) {}).ok());
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    StatusCode code;
    const char* fragment;
  };
  const Case cases[] = {
      {[](auto& c) { c["rms_norm_eps"] = -1e-5; }, StatusCode::kCorrupt, "config.json: rms_norm_eps = -1e-05"},
      {[](auto& c) { c["rms_norm_eps"] = 0; }, StatusCode::kCorrupt, "rms_norm_eps = 0"},
      {[](auto& c) { c["rms_norm_eps"] = 1e-50; }, StatusCode::kCorrupt, "rms_norm_eps = 1e-50"},
      {[](auto& c) { c["rope_parameters"]["rope_theta"] = 0; }, StatusCode::kCorrupt, "rope_theta = 0"},
      {[](auto& c) { c["rope_parameters"]["rope_theta"] = -1; }, StatusCode::kCorrupt, "rope_theta = -1"},
      {[](auto& c) { c["rope_parameters"]["factor"] = -1; }, StatusCode::kCorrupt, "llama3 rope scaling: factor = -1"},
      {[](auto& c) { c["rope_parameters"]["high_freq_factor"] = 0.5; }, StatusCode::kCorrupt, "high_freq_factor = 0.5"},
      {[](auto& c) { c["partial_rotary_factor"] = 0.5; }, StatusCode::kUnsupported, "partial_rotary_factor = 0.5"},
      {[](auto& c) { c["vocab_size"] = 600; }, StatusCode::kCorrupt,
       "vocab_size = 600 but tensor 'model.embed_tokens.weight' has 512 rows"},
      {[](auto& c) { c["num_hidden_layers"] = 3; }, StatusCode::kCorrupt,
       "num_hidden_layers = 3 but the weights have tensors of 4 layers (model.layers.0 … model.layers.3)"},
      {[](auto& c) { c["eos_token_id"] = 9999; }, StatusCode::kCorrupt, "eos_token_id = 9999 is not a token id"},
      {[](auto& c) { c["bos_token_id"] = "x"; }, StatusCode::kCorrupt, "bos_token_id\" = \"x\", expected a token id"},
      {[](auto& c) { c["num_key_value_heads"] = 3; }, StatusCode::kCorrupt, "num_key_value_heads = 3 does not divide"},
      {[](auto& c) { c["head_dim"] = 31; }, StatusCode::kCorrupt, "head size 31 (head_dim = 31) is odd"},
      {[](auto& c) { c["max_position_embeddings"] = 1 << 30; }, StatusCode::kCorrupt,
       "max_position_embeddings = 1073741824 is past"},
  };
  for (const Case& c : cases) test::expect_status(load_edited(c.edit), c.code, {c.fragment});
  // JSON has no NaN or infinity; a number past double is a parse error that names the file and the number.
  test::expect_status(load_edited([](auto& c) { c["rms_norm_eps"] = 12345; }, "12345", "1e999"), StatusCode::kCorrupt,
                      {"config.json: invalid JSON", "number overflow parsing '1e999'"});
}

// ---- the CLI: the message reaches the user, with a failing exit code ------------------------------

struct CliResult {
  int code = -1;
  std::string out;
};
CliResult run_cli(const std::string& args) {
  CliResult r;
  FILE* p = popen((std::string(LAYA_CLI_PATH) + " " + args + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

TEST_F(ModelMetadata, CompleteRefusesNanEpsInsteadOfPrintingGarbage) {
  LAYA_REQUIRE_CLI();
  TinyGguf m;
  CliResult ok = run_cli("complete -m " + write(m, "ok.gguf") + " -t 1 -n 3 --ids --tokens 1,2,3");
  ASSERT_EQ(ok.code, 0) << ok.out;
  m.set_f32(m.key("attention.layer_norm_rms_epsilon"), std::nanf(""));
  CliResult bad = run_cli("complete -m " + write(m, "nan.gguf") + " -t 1 -n 3 --ids --tokens 1,2,3");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("laya complete: error: "), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("llama.attention.layer_norm_rms_epsilon = nan"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace laya
