// The engine against Hugging Face transformers' float32 logits (fixtures in
// ../shared/fixtures/ref-models, see its README). Tolerances are the issue's
// acceptance targets: half of llama.cpp's error on the same files.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/cpu/kernels.h"
#include "engine/engine.h"
#include "logits_check.h"
#include "test_util.h"

namespace laya {
namespace {

using Err = test::LogitsError;

std::vector<std::vector<int32_t>> load_prompts(const std::string& fx) {
  auto j = nlohmann::json::parse(test::read_text_file(fx + "/ref-models/common/prompts.json"));
  return j["prompts"].get<std::vector<std::vector<int32_t>>>();
}

// Runs every prompt (all positions) and compares with ref/<prefix>_p{i}.npy.
Err measure(const std::string& fx, const std::string& model_name, const std::string& model_path, const std::string& prefix,
            DType kv, bool incremental = false, bool precise = false) {
  auto m = Model::load(model_path);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  if (!m.ok()) return {1e9, 1e9};
  std::shared_ptr<const Model> model = std::move(m).value();
  EngineOptions eo;
  // LAYA_TEST_BACKEND=cuda runs the fixtures through another backend (same tolerances).
  if (const char* b = std::getenv("LAYA_TEST_BACKEND"); b && *b) eo.backend = b;
  eo.n_threads = 2;
  eo.n_ctx = 512;
  eo.kv_type = kv;
  if (precise) eo.pack_weights = false;
  auto e = Engine::create(model, eo);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  Engine& eng = **e;
  auto prompts = load_prompts(fx);
  // LAYA_TEST_MAX_PROMPTS=3: the first prompts only (the CUDA emulation runs
  // the 300-token fourth one for many minutes).
  if (const char* mp = std::getenv("LAYA_TEST_MAX_PROMPTS"); mp && std::atoi(mp) > 0)
    prompts.resize(std::min(prompts.size(), static_cast<size_t>(std::atoi(mp))));
  return test::logits_error(eng, prompts, incremental, [&](size_t i) {
    return fx + "/ref-models/" + model_name + "/ref/" + prefix + "_p" + std::to_string(i) + ".npy";
  });
}

struct Case {
  std::string model;
  std::string file;    // relative to ref-models/<model>/
  std::string prefix;  // reference logits
  double max_rel_l2;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.model << "/" << c.file; }

class ModelLogits : public ::testing::TestWithParam<Case> {};

TEST_P(ModelLogits, DefaultSettingsWithinTolerance) {
  LAYA_REQUIRE_FIXTURES(fx);
  const Case& c = GetParam();
  Err e = measure(fx, c.model, fx + "/ref-models/" + c.model + "/" + c.file, c.prefix, EngineOptions{}.kv_type);
  std::printf("[ measure  ] %s %s: rel L2 %.3e, max |d| %.3e (isa %s)\n", c.model.c_str(), c.file.c_str(), e.rel_l2,
              e.max_abs, cpu::isa_name(cpu::active_isa()));
  EXPECT_LE(e.rel_l2, c.max_rel_l2);
}

// Token by token through the KV cache: decode steps run the packed int8
// kernels of quantized files (two-term activations).
TEST_P(ModelLogits, DefaultSettingsIncremental) {
  LAYA_REQUIRE_FIXTURES(fx);
  const Case& c = GetParam();
  Err e = measure(fx, c.model, fx + "/ref-models/" + c.model + "/" + c.file, c.prefix, EngineOptions{}.kv_type, true);
  std::printf("[ measure  ] incremental %s %s: rel L2 %.3e, max |d| %.3e\n", c.model.c_str(), c.file.c_str(), e.rel_l2,
              e.max_abs);
  EXPECT_LE(e.rel_l2, c.max_rel_l2);
}

TEST_P(ModelLogits, PreciseModeMaxAbs) {
  LAYA_REQUIRE_FIXTURES(fx);
  const Case& c = GetParam();
  Err e = measure(fx, c.model, fx + "/ref-models/" + c.model + "/" + c.file, c.prefix, DType::F32, false, true);
  std::printf("[ measure  ] precise %s %s: rel L2 %.3e, max |d| %.3e\n", c.model.c_str(), c.file.c_str(), e.rel_l2, e.max_abs);
  EXPECT_LE(e.rel_l2, c.max_rel_l2);
  EXPECT_LE(e.max_abs, 1e-3);  // float32 everywhere: the reference's own rounding noise
}

TEST_P(ModelLogits, F16KvCacheWithinLlamaCppF32Error) {
  LAYA_REQUIRE_FIXTURES(fx);
  const Case& c = GetParam();
  Err e = measure(fx, c.model, fx + "/ref-models/" + c.model + "/" + c.file, c.prefix, DType::F16);
  std::printf("[ measure  ] f16-kv %s %s: rel L2 %.3e, max |d| %.3e\n", c.model.c_str(), c.file.c_str(), e.rel_l2, e.max_abs);
  // llama.cpp with float32 weights and its F16 cache: 5.9e-4 .. 8.2e-4.
  EXPECT_LE(e.rel_l2, std::max(1e-3, c.max_rel_l2));
}

TEST_P(ModelLogits, Q8KvCacheWithinLlamaCppQ8Error) {
  LAYA_REQUIRE_FIXTURES(fx);
  const Case& c = GetParam();
  Err e = measure(fx, c.model, fx + "/ref-models/" + c.model + "/" + c.file, c.prefix, DType::Q8_0);
  std::printf("[ measure  ] q8_0-kv %s %s: rel L2 %.3e, max |d| %.3e\n", c.model.c_str(), c.file.c_str(), e.rel_l2, e.max_abs);
  // An 8-bit cache (measured 1.0e-2 .. 2.0e-2): held below the error llama.cpp
  // shows with 8-bit weights on these models (its q8_0 files: 1.9e-2 .. 3.2e-2).
  EXPECT_LE(e.rel_l2, std::max(2.5e-2, c.max_rel_l2));
}

std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (const char* m : {"llama-tiny", "qwen2-tiny", "qwen3-tiny"}) {
    v.push_back({m, std::string("gguf/") + m + "-f16.gguf", "logits", 7e-4});
    v.push_back({m, "hf", "logits", 7e-4});
    v.push_back({m, std::string("gguf/") + m + "-q8_0.gguf", "logits_q8_0", 1.5e-2});
  }
  for (const char* m : {"llama-tiny", "qwen3-tiny"})
    for (const char* t : {"Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K"})
      v.push_back({m, std::string("gguf/") + m + "-" + t + ".gguf", std::string("logits_") + t, 2e-2});
  return v;
}

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  std::string s = i.param.model + "_" + i.param.file;
  for (char& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ModelLogits, ::testing::ValuesIn(all_cases()), case_name);

TEST(ModelIncremental, LlamaPrompt2MatchesReference) {
  LAYA_REQUIRE_FIXTURES(fx);
  // logits_incremental_p2 was computed with past_key_values; we compare all 4
  // prompts fed one token at a time against the full-prompt references.
  Err e = measure(fx, "llama-tiny", fx + "/ref-models/llama-tiny/gguf/llama-tiny-f16.gguf", "logits", DType::F32, true, true);
  std::printf("[ measure  ] incremental llama-tiny f16: rel L2 %.3e, max |d| %.3e\n", e.rel_l2, e.max_abs);
  EXPECT_LE(e.max_abs, 1e-3);
}

}  // namespace
}  // namespace laya
