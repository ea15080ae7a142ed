// The families beside Llama (phi3, granite, ...) against Hugging Face
// transformers' float32 logits of tiny random-weight models, on every CPU
// instruction set this machine has. The fixtures are in the repository
// (tests/fixtures/families/<family>, made by tools/refmodels/make_families.py
// on a GPU host: the golden logits come from transformers, not from laya).
// Tolerances are the issue's: F16/BF16/HF 7e-4 relative L2, Q8_0 1.5e-2
// against the logits of that file's dequantized weights.
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
#include "tokenizer/tokenizer.h"

namespace laya {
namespace {

std::string family_dir(const std::string& fam) { return std::string(LAYA_SOURCE_DIR) + "/tests/fixtures/families/" + fam; }

using Err = test::LogitsError;

// Every prompt of the family (all positions) through a fresh sequence, in
// one prefill or token by token through the KV cache, compared with
// ref/<prefix>_p{i}.npy.
Err measure(const std::string& fam, const std::string& file, const std::string& prefix, const std::string& isa,
            bool incremental = false) {
  auto m = Model::load(family_dir(fam) + "/" + file);
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
  const auto j = nlohmann::json::parse(test::read_text_file(family_dir(fam) + "/prompts.json"));
  const auto prompts = j["prompts"].get<std::vector<std::vector<int32_t>>>();
  return test::logits_error(eng, prompts, incremental, [&](size_t i) {
    return family_dir(fam) + "/ref/" + prefix + "_p" + std::to_string(i) + ".npy";
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

// The HF folder (bf16), the F16 GGUF and the Q8_0 GGUF of the family, each
// on every ISA: within the tolerance of its reference.
TEST_P(FamilyLogits, MatchTransformersOnEveryIsa) {
  const std::string fam = GetParam();
  struct File { std::string path, prefix; double tol; };
  const File files[] = {{"hf", "logits", 7e-4}, {fam + "-f16.gguf", "logits", 7e-4},
                        {fam + "-q8_0.gguf", "logits_q8_0", 1.5e-2}};
  for (const File& f : files) {
    for (const std::string& isa : isas()) {
      const Err e = measure(fam, f.path, f.prefix, isa);
      std::printf("[ measure  ] %s %s (%s): rel L2 %.3e, max |d| %.3e\n", fam.c_str(), f.path.c_str(),
                  isa.empty() ? std::getenv("LAYA_TEST_BACKEND") : isa.c_str(), e.rel_l2, e.max_abs);
      EXPECT_LE(e.rel_l2, f.tol) << fam << " " << f.path << " " << isa;
    }
    // Token by token through the KV cache (the decode path a typist meets).
    const Err e = measure(fam, f.path, f.prefix, "", true);
    std::printf("[ measure  ] incremental %s %s: rel L2 %.3e, max |d| %.3e\n", fam.c_str(), f.path.c_str(), e.rel_l2,
                e.max_abs);
    EXPECT_LE(e.rel_l2, f.tol) << fam << " " << f.path << " incremental";
  }
}

// The reference the logits are compared with is not trivially close to
// anything: the float logits of the Q8_0 weights differ from the float32
// ones by more than the F16 tolerance (so a test that read the wrong
// reference, or a model that ignored a multiplier, would fail).
TEST_P(FamilyLogits, ReferencesAreDistinct) {
  const std::string fam = GetParam();
  test::NpyArray a, b;
  std::string err;
  ASSERT_TRUE(test::read_npy_f32(family_dir(fam) + "/ref/logits_p2.npy", &a, &err)) << err;
  ASSERT_TRUE(test::read_npy_f32(family_dir(fam) + "/ref/logits_q8_0_p2.npy", &b, &err)) << err;
  ASSERT_EQ(a.data.size(), b.data.size());
  double num = 0, den = 0;
  for (size_t k = 0; k < a.data.size(); ++k) {
    num += (a.data[k] - b.data[k]) * (a.data[k] - b.data[k]);
    den += a.data[k] * a.data[k];
  }
  EXPECT_GT(std::sqrt(num / den), 7e-4);
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

INSTANTIATE_TEST_SUITE_P(Families, FamilyLogits, ::testing::Values("phi3", "granite", "starcoder2", "gemma"));

// A session on each family's tiny model: where the vocabulary has the FIM
// markers (StarCoder2 and Granite "<fim_prefix>", CodeGemma "<|fim_prefix|>")
// the prompt is [BOS] <prefix-marker> before <suffix-marker> after
// <middle-marker> and the suggestion follows it; Phi-3 has none and gets the
// plain prompt.
TEST(FamilyFim, SessionsUseTheFamilysMarkers) {
  struct Want { const char* fam; const char* pre; };
  const Want wants[] = {{"starcoder2", "<fim_prefix>"}, {"granite", "<fim_prefix>"}, {"gemma", "<|fim_prefix|>"},
                        {"phi3", nullptr}};
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

// A sliding window (Phi-3 mini's 2047, StarCoder2's 4096) stops the context
// there: past it laya would attend to positions the model never saw.
TEST(FamilyVariants, SlidingWindowCapsTheContext) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("laya_family_window_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto cfg = nlohmann::json::parse(test::read_text_file(family_dir("starcoder2") + "/hf/config.json"));
  cfg["sliding_window"] = 48;
  std::ofstream(dir / "config.json") << cfg.dump();
  fs::copy_file(family_dir("starcoder2") + "/hf/model.safetensors", dir / "model.safetensors");
  auto m = Model::load(dir.string());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ((*m)->hparams().sliding_window, 48);
  EngineOptions eo;
  eo.n_threads = 1;
  eo.n_ctx = 256;
  auto e = Engine::create(std::shared_ptr<const Model>(std::move(m).value()), eo);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ((*e)->options().n_ctx, 48);
  EXPECT_EQ((*e)->new_sequence()->n_ctx(), 48);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace laya
