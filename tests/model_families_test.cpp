// The families beside Llama (phi3, granite, ...) against Hugging Face
// transformers' float32 logits of tiny random-weight models, on every CPU
// instruction set this machine has. The fixtures are in the repository
// (tests/fixtures/families/<family>, made by tools/refmodels/make_families.py
// on a GPU host: the golden logits come from transformers, not from laya).
// Tolerances are the issue's: F16/BF16/HF 7e-4 relative L2, Q8_0 1.5e-2
// and the other quantized types (K-quants' 2e-2) against the logits of that
// file's dequantized weights. The other types are in <family>/mix: the family
// at hidden 256 (K-quant rows are 256 values), its matrices in Q4_K, Q5_K,
// Q6_K, Q4_0, Q4_1, Q5_0 and Q5_1 in turn.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>
#include <vector>

#include "backend/cpu/kernels.h"
#include "engine/engine.h"
#include "session/session.h"
#include "logits_check.h"
#include "test_util.h"
#include "gguf_writer.h"
#include "tokenizer/tokenizer.h"

namespace laya {
namespace {

std::string family_dir(const std::string& fam) { return std::string(LAYA_SOURCE_DIR) + "/tests/fixtures/families/" + fam; }

using Err = test::LogitsError;

// Every prompt of the model in `dir` (all positions) through a fresh
// sequence, in one prefill or token by token through the KV cache, compared
// with dir/ref/<prefix>_p{i}.npy.
Err measure(const std::string& dir, const std::string& file, const std::string& prefix, const std::string& isa,
            bool incremental = false) {
  auto m = Model::load(dir + "/" + file);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  if (!m.ok()) return {};
  std::shared_ptr<const Model> model = std::move(m).value();
  EngineOptions eo;
  // LAYA_TEST_BACKEND=cuda runs the families through another backend (same tolerances).
  if (const char* b = std::getenv("LAYA_TEST_BACKEND"); b && *b) eo.backend = b;
  eo.n_threads = 2;
  eo.n_ctx = 128;
  eo.isa = isa;
  auto e = Engine::create(model, eo);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  if (!e.ok()) return {};
  Engine& eng = **e;
  const auto j = nlohmann::json::parse(test::read_text_file(dir + "/prompts.json"));
  const auto prompts = j["prompts"].get<std::vector<std::vector<int32_t>>>();
  return test::logits_error(eng, prompts, incremental, [&](size_t i) {
    return dir + "/ref/" + prefix + "_p" + std::to_string(i) + ".npy";
  });
}

// Every CPU instruction set this machine and build have ("" alone for another backend).
std::vector<std::string> isas() {
  if (const char* b = std::getenv("LAYA_TEST_BACKEND"); b && *b && std::string(b) != "cpu") return {""};
  std::vector<std::string> out;
  for (cpu::Isa i : {cpu::Isa::kScalar, cpu::Isa::kAvx2, cpu::Isa::kAvx512, cpu::Isa::kNeon})
    if (cpu::isa_supported(i)) out.push_back(cpu::isa_name(i));
  return out;
}

class FamilyLogits : public ::testing::TestWithParam<std::string> {};

struct File { std::string dir, path, prefix; double tol; };

// Each file on every ISA, then token by token: within the tolerance of its reference.
void expect_files_match(const std::string& fam, const std::vector<File>& files) {
  for (const File& f : files) {
    for (const std::string& isa : isas()) {
      const Err e = measure(f.dir, f.path, f.prefix, isa);
      std::printf("[ measure  ] %s %s (%s): rel L2 %.3e, max |d| %.3e\n", fam.c_str(), f.path.c_str(),
                  isa.empty() ? std::getenv("LAYA_TEST_BACKEND") : isa.c_str(), e.rel_l2, e.max_abs);
      EXPECT_LE(e.rel_l2, f.tol) << fam << " " << f.path << " " << isa;
    }
    // Token by token through the KV cache (the decode path a typist meets).
    const Err e = measure(f.dir, f.path, f.prefix, "", true);
    std::printf("[ measure  ] incremental %s %s: rel L2 %.3e, max |d| %.3e\n", fam.c_str(), f.path.c_str(), e.rel_l2,
                e.max_abs);
    EXPECT_LE(e.rel_l2, f.tol) << fam << " " << f.path << " incremental";
  }
}

// The HF folder (bf16), the F16 GGUF and the Q8_0 GGUF of the family.
TEST_P(FamilyLogits, MatchTransformersOnEveryIsa) {
  const std::string fam = GetParam(), dir = family_dir(fam);
  expect_files_match(fam, {{dir, "hf", "logits", 7e-4},
                           {dir, fam + "-f16.gguf", "logits", 7e-4},
                           {dir, fam + "-q8_0.gguf", "logits_q8_0", 1.5e-2}});
}

// The family with its matrices in Q4_K, Q5_K, Q6_K, Q4_0, Q4_1, Q5_0 and Q5_1
// (the embedding, and the output where untied, among them): the K-quants'
// tolerance, which ModelLogits holds Q4_0 files to as well.
TEST_P(FamilyLogits, QuantizedTypesMatchTransformersOnEveryIsa) {
  const std::string fam = GetParam();
  expect_files_match(fam, {{family_dir(fam) + "/mix", fam + "-mix.gguf", "logits_mix", 2e-2}});
}

// The reference the logits are compared with is not trivially close to
// anything: the float logits of the Q8_0 weights differ from the float32
// ones by more than the F16 tolerance (so a test that read the wrong
// reference, or a model that ignored a multiplier, would fail); the
// mixed-types file's by more than its 2e-2.
TEST_P(FamilyLogits, ReferencesAreDistinct) {
  const std::string fam = GetParam(), dir = family_dir(fam);
  // rel L2 between two reference files (-1 where one cannot be read).
  auto distance = [](const std::string& x, const std::string& y) {
    test::NpyArray a, b;
    std::string err;
    EXPECT_TRUE(test::read_npy_f32(x, &a, &err)) << err;
    EXPECT_TRUE(test::read_npy_f32(y, &b, &err)) << err;
    EXPECT_EQ(a.data.size(), b.data.size()) << x << " " << y;
    if (a.data.empty() || a.data.size() != b.data.size()) return -1.0;
    double num = 0, den = 0;
    for (size_t k = 0; k < a.data.size(); ++k) {
      num += (a.data[k] - b.data[k]) * (a.data[k] - b.data[k]);
      den += a.data[k] * a.data[k];
    }
    return std::sqrt(num / den);
  };
  const double q8 = distance(dir + "/ref/logits_p2.npy", dir + "/ref/logits_q8_0_p2.npy");
  std::printf("[ measure  ] %s: Q8_0 weights' reference vs float32's, rel L2 %.3e\n", fam.c_str(), q8);
  EXPECT_GT(q8, 7e-4);
  // The same for the quantized types' model, against their tolerance.
  const double mix = distance(dir + "/mix/ref/logits_p2.npy", dir + "/mix/ref/logits_mix_p2.npy");
  std::printf("[ measure  ] %s: mixed types' reference vs float32's, rel L2 %.3e\n", fam.c_str(), mix);
  EXPECT_GT(mix, 2e-2);
}

// The family's tokenizer (tokenizer.json, and the GGUF's vocabulary) gives
// transformers' ids on the fixture strings.
TEST_P(FamilyLogits, TokenizerMatchesTransformers) {
  const std::string fam = GetParam();
  const auto cases = nlohmann::json::parse(test::read_text_file(family_dir(fam) + "/tokenizer_cases.json"));
  for (const std::string& src : {std::string("/hf/tokenizer.json"), "/" + fam + "-f16.gguf"}) {
    const tok::Tokenizer* t = test::cached_tokenizer(family_dir(fam) + src);
    ASSERT_NE(t, nullptr) << src;
    int n = 0, ok = 0;
    for (const auto& c : cases["cases"]) {
      const std::string text = c["text"];
      const auto want = c["ids_no_special"].get<std::vector<int32_t>>();
      const auto want_s = c["ids_with_special"].get<std::vector<int32_t>>();
      auto got = t->encode(text, tok::EncodeOptions{true, false, std::nullopt});
      auto got_s = t->encode(text, tok::EncodeOptions{true, std::nullopt, std::nullopt});
      ASSERT_TRUE(got.ok() && got_s.ok());
      ++n;
      const bool good = got.value() == want && got_s.value() == want_s;
      ok += good;
      EXPECT_TRUE(good) << fam << src << " " << nlohmann::json(text).dump();
      EXPECT_EQ(t->decode(want), c["decoded"].get<std::string>()) << fam << src << " " << text;
    }
    std::printf("[tokenizer] %s%s: %d/%d cases\n", fam.c_str(), src.c_str(), ok, n);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyLogits,
                         ::testing::Values("phi3", "granite", "starcoder2", "gemma", "gemma2", "gemma3"));

// A session on each family's tiny model: where the vocabulary has the FIM
// markers (StarCoder2 and Granite "<fim_prefix>", CodeGemma "<|fim_prefix|>")
// the prompt is [BOS] <prefix-marker> before <suffix-marker> after
// <middle-marker> and the suggestion follows it; Phi-3 has none and gets the
// plain prompt.
TEST(FamilyFim, SessionsUseTheFamilysMarkers) {
  struct Want { const char* fam; const char* pre; };
  const Want wants[] = {{"starcoder2", "<fim_prefix>"}, {"granite", "<fim_prefix>"}, {"gemma", "<|fim_prefix|>"},
                        {"gemma2", "<|fim_prefix|>"}, {"gemma3", "<|fim_prefix|>"}, {"phi3", nullptr}};
  const std::string before = "def area(r):\n    return ", after = "\n\nprint(area(2.0))\n";
  for (const Want& w : wants) {
    SCOPED_TRACE(w.fam);
    auto m = Model::load(family_dir(w.fam) + "/hf");
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    auto tok = tok::Tokenizer::from_path(family_dir(w.fam) + "/hf");
    ASSERT_TRUE(tok.ok()) << tok.status().to_string();
    EngineOptions eo;
    eo.n_threads = 1;
    eo.n_ctx = 256;
    auto e = Engine::create(std::shared_ptr<const Model>(std::move(m).value()), eo);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    Session s(**e, **tok);
    ASSERT_TRUE(s.set_text(before + after).ok());
    ASSERT_TRUE(s.move(before.size()).ok());  // ASCII: code points are bytes
    auto a = s.suggest();
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    const auto fim = (*tok)->fim_tokens();
    const std::vector<int32_t>& c = s.cached_tokens();
    if (!w.pre) {
      EXPECT_FALSE(fim.complete());
      EXPECT_FALSE(a->fim);
      continue;
    }
    ASSERT_TRUE(fim.complete());
    EXPECT_EQ((*tok)->decode(std::vector<int32_t>{fim.prefix}), w.pre);
    EXPECT_TRUE(a->fim);
    const auto at = [&](int32_t id) { return std::find(c.begin(), c.end(), id) - c.begin(); };
    const bool bos = (*tok)->encode("", tok::EncodeOptions{}).value().size() == 1;
    EXPECT_EQ(at(fim.prefix), bos ? 1 : 0);  // PSM: [BOS] <pre> before <suf> after <mid> suggestion
    EXPECT_LT(at(fim.prefix), at(fim.suffix));
    EXPECT_LT(at(fim.suffix), at(fim.middle));
    ASSERT_LT(at(fim.middle), static_cast<ptrdiff_t>(c.size()));
    const std::vector<int32_t> mid(c.begin() + at(fim.suffix) + 1, c.begin() + at(fim.middle));
    EXPECT_EQ((*tok)->decode(mid), after.substr(0, (*tok)->decode(mid).size()));
  }
}

// The variants laya does not run are refused by name, before any tensor is read.
TEST(FamilyVariants, RefusedByName) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("laya_family_variant_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto base = nlohmann::json::parse(test::read_text_file(family_dir("phi3") + "/hf/config.json"));
  auto refused = [&](nlohmann::json cfg, std::initializer_list<const char*> words) {
    std::ofstream(dir / "config.json") << cfg.dump();
    auto m = Model::load(dir.string());
    ASSERT_FALSE(m.ok());
    test::expect_status(m.status(), StatusCode::kUnsupported, words);
  };
  nlohmann::json moe = base;
  moe["num_local_experts"] = 16;
  refused(moe, {"mixture-of-experts", "num_local_experts"});
  nlohmann::json vision = base;
  vision["vision_config"] = nlohmann::json::object();
  vision["text_config"] = base;
  refused(vision, {"vision tower", "vision_config"});
  nlohmann::json moe_type = base;
  moe_type["model_type"] = "phimoe";
  refused(moe_type, {"phimoe", "not supported"});
  nlohmann::json longrope = base;
  longrope["rope_parameters"] = {{"rope_type", "longrope"}, {"rope_theta", 10000.0}, {"long_factor", {1.0}},
                                 {"short_factor", {1.0}}};  // Phi-3 128k
  refused(longrope, {"longrope"});
  fs::remove_all(dir);
}

// A sliding window (Phi-3 mini's 2047, StarCoder2's 4096) no longer stops
// the context: every layer reads its last sliding_window positions.
TEST(FamilyVariants, SlidingWindowKeepsTheContext) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("laya_family_window_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto cfg = nlohmann::json::parse(test::read_text_file(family_dir("starcoder2") + "/hf/config.json"));
  cfg["sliding_window"] = 48;
  std::ofstream(dir / "config.json") << cfg.dump();
  fs::copy_file(family_dir("starcoder2") + "/hf/model.safetensors", dir / "model.safetensors");
  auto m = Model::load(dir.string());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const HParams& h = (*m)->hparams();
  EXPECT_EQ(h.sliding_window, 48);
  EXPECT_EQ(h.window(0), 48);
  EXPECT_EQ(h.window(h.n_layer - 1), 48);
  EngineOptions eo;
  eo.n_threads = 1;
  eo.n_ctx = 256;
  auto e = Engine::create(std::shared_ptr<const Model>(std::move(m).value()), eo);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ((*e)->options().n_ctx, 256);
  EXPECT_EQ((*e)->new_sequence()->n_ctx(), 256);
  fs::remove_all(dir);
}

// What Gemma 2 and 3 read beside the Llama block, from the fixtures' GGUF
// files and folders (transformers 5's config.json: layer_types,
// rope_parameters per layer type) and from a transformers 4 config.json of
// the same model (sliding_window_pattern, rope_local_base_freq, rope_scaling).
void expect_gemma_attention(const HParams& h, const std::string& fam, const std::string& what) {
  SCOPED_TRACE(fam + " " + what);
  EXPECT_EQ(h.sliding_window, 16);
  // query_pre_attn_scalar = head_dim: said in config.json, GGUF's default (0).
  EXPECT_FLOAT_EQ(h.attn_scale > 0 ? h.attn_scale : 1.0f / std::sqrt(static_cast<float>(h.head_dim)),
                  1.0f / std::sqrt(32.0f));
  for (int64_t il = 0; il < h.n_layer; ++il) {
    const bool local = fam == "gemma2" ? il % 2 == 0 : il % 6 != 5;
    EXPECT_EQ(h.window(il), local ? 16 : 0) << "layer " << il;
  }
  if (fam == "gemma2") {
    EXPECT_EQ(h.attn_softcap, 5.0f);
    EXPECT_EQ(h.final_softcap, 8.0f);
    EXPECT_EQ(h.rope_theta_local, 0.0);  // one RoPE table
    EXPECT_TRUE(h.rope_freq_factors.empty());
  } else {
    EXPECT_EQ(h.attn_softcap, 0.0f);
    EXPECT_EQ(h.final_softcap, 0.0f);
    EXPECT_EQ(h.rope_theta, 1e6);
    EXPECT_EQ(h.rope_theta_local, 10000.0);
    EXPECT_TRUE(h.rope_freq_factors.empty());
  }
}

TEST(FamilyVariants, GemmaAttentionParameters) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("laya_family_gemma_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const std::string fam : {"gemma2", "gemma3"}) {
    for (const std::string& file : {std::string("/hf"), "/" + fam + "-f16.gguf"}) {
      auto m = Model::load(family_dir(fam) + file);
      ASSERT_TRUE(m.ok()) << m.status().to_string();
      expect_gemma_attention((*m)->hparams(), fam, file);
    }
    // The same model as transformers 4 wrote it.
    auto cfg = nlohmann::json::parse(test::read_text_file(family_dir(fam) + "/hf/config.json"));
    cfg.erase("layer_types");
    cfg.erase("rope_parameters");
    if (fam == "gemma2") {
      cfg["rope_theta"] = 10000.0;
    } else {
      cfg["sliding_window_pattern"] = 6;
      cfg["rope_theta"] = 1e6;
      cfg["rope_local_base_freq"] = 10000.0;
    }
    std::ofstream(dir / "config.json") << cfg.dump();
    fs::copy_file(family_dir(fam) + "/hf/model.safetensors", dir / "model.safetensors",
                  fs::copy_options::overwrite_existing);
    auto m = Model::load(dir.string());
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    expect_gemma_attention((*m)->hparams(), fam, "transformers 4 config");
    // Gemma 2 27B's query_pre_attn_scalar (n_embd / n_head = 144, not head_dim).
    cfg["query_pre_attn_scalar"] = 144;
    std::ofstream(dir / "config.json") << cfg.dump();
    auto m27 = Model::load(dir.string());
    ASSERT_TRUE(m27.ok()) << m27.status().to_string();
    EXPECT_FLOAT_EQ((*m27)->hparams().attn_scale, 1.0f / 12.0f);
  }
  // Gemma 3 4B-27B's linear RoPE scaling, the global layers' only (the
  // engine's local table is made without rope_freq_factors), in both forms.
  auto cfg = nlohmann::json::parse(test::read_text_file(family_dir("gemma3") + "/hf/config.json"));
  cfg["rope_parameters"]["full_attention"] = {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1e6}};
  nlohmann::json old = cfg;
  old.erase("rope_parameters");
  old["rope_theta"] = 1e6;
  old["rope_local_base_freq"] = 20000.0;
  old["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  for (const auto& [c, local] : {std::pair{cfg, 10000.0}, std::pair{old, 20000.0}}) {
    std::ofstream(dir / "config.json") << c.dump();
    auto m = Model::load(dir.string());
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    const HParams& h = (*m)->hparams();
    EXPECT_EQ(h.rope_theta, 1e6);
    EXPECT_EQ(h.rope_theta_local, local);
    ASSERT_EQ(h.rope_freq_factors.size(), 16u);
    EXPECT_EQ(h.rope_freq_factors[0], 8.0f);
  }
  fs::remove_all(dir);
}

// A value that would poison the attention is refused, naming its key.
TEST(FamilyVariants, GemmaBadAttentionValuesNamed) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("laya_family_gemma_bad_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto base = nlohmann::json::parse(test::read_text_file(family_dir("gemma2") + "/hf/config.json"));
  fs::copy_file(family_dir("gemma2") + "/hf/model.safetensors", dir / "model.safetensors");
  auto corrupt = [&](const nlohmann::json& cfg, std::initializer_list<const char*> words) {
    std::ofstream(dir / "config.json") << cfg.dump();
    auto m = Model::load(dir.string());
    ASSERT_FALSE(m.ok());
    test::expect_status(m.status(), StatusCode::kCorrupt, words);
  };
  nlohmann::json c = base;
  c["attn_logit_softcapping"] = -50.0;
  corrupt(c, {"attn_logit_softcapping", "-50"});
  c = base;
  c["query_pre_attn_scalar"] = 0;
  corrupt(c, {"query_pre_attn_scalar"});
  c = base;
  c["layer_types"].push_back("full_attention");
  corrupt(c, {"layer_types", "3", "2 layers"});
  fs::remove_all(dir);
}

// Gemma 3 with its vision tower (Gemma3ForConditionalGeneration) is refused
// by its class name; so are a layer type laya does not run and a GGUF vision
// projector (llama.cpp's mmproj, general.architecture "clip").
TEST(FamilyVariants, GemmaVisionRefusedByName) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("laya_family_vision_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto text = nlohmann::json::parse(test::read_text_file(family_dir("gemma3") + "/hf/config.json"));
  auto refused = [&](const nlohmann::json& cfg, std::initializer_list<const char*> words) {
    std::ofstream(dir / "config.json") << cfg.dump();
    auto m = Model::load(dir.string());
    ASSERT_FALSE(m.ok());
    test::expect_status(m.status(), StatusCode::kUnsupported, words);
  };
  const nlohmann::json multimodal = {{"architectures", {"Gemma3ForConditionalGeneration"}},
                                     {"model_type", "gemma3"},
                                     {"text_config", text},
                                     {"vision_config", {{"model_type", "siglip_vision_model"}}}};
  refused(multimodal, {"Gemma3ForConditionalGeneration", "vision tower"});
  nlohmann::json chunked = text;
  chunked["layer_types"][0] = "chunked_attention";
  refused(chunked, {"layer_types", "chunked_attention"});

  test::GgufWriter w;
  w.kv_str("general.architecture", "clip");
  const std::vector<uint8_t> bytes = w.build();
  const fs::path mmproj = dir / "mmproj.gguf";
  std::ofstream(mmproj, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                static_cast<std::streamsize>(bytes.size()));
  auto m = Model::load(mmproj.string());
  ASSERT_FALSE(m.ok());
  test::expect_status(m.status(), StatusCode::kUnsupported, {"clip", "mmproj", "vision"});
  fs::remove_all(dir);
}

}  // namespace
}  // namespace laya
