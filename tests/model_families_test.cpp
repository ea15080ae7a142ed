// The families beside Llama (phi3, granite, ...) against Hugging Face
// transformers' float32 logits of tiny random-weight models, on every CPU
// instruction set this machine has. The fixtures are in the repository
// (tests/fixtures/families/<family>, made by tools/refmodels/make_families.py
// on a GPU host: the golden logits come from transformers, not from laya).
// Tolerances are the issue's: F16/BF16/HF 7e-4 relative L2, Q8_0 1.5e-2
// against the logits of that file's dequantized weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/kernels.h"
#include "engine/engine.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace laya {
namespace {

std::string family_dir(const std::string& fam) { return std::string(LAYA_SOURCE_DIR) + "/tests/fixtures/families/" + fam; }

struct Err {
  double rel_l2 = 1e9, max_abs = 1e9;
};

// Every prompt of the family (all positions) through a fresh sequence,
// compared with ref/<prefix>_p{i}.npy.
Err measure(const std::string& fam, const std::string& file, const std::string& prefix, const std::string& isa) {
  auto m = Model::load(family_dir(fam) + "/" + file);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  if (!m.ok()) return {};
  std::shared_ptr<const Model> model = std::move(m).value();
  EngineOptions eo;
  eo.n_threads = 2;
  eo.n_ctx = 128;
  eo.isa = isa;
  auto e = Engine::create(model, eo);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  if (!e.ok()) return {};
  Engine& eng = **e;
  const auto j = nlohmann::json::parse(test::read_text_file(family_dir(fam) + "/prompts.json"));
  const auto prompts = j["prompts"].get<std::vector<std::vector<int32_t>>>();
  double num = 0, den = 0, mx = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& p = prompts[i];
    const int64_t n = static_cast<int64_t>(p.size()), nv = eng.n_vocab();
    std::vector<float> got(static_cast<size_t>(n * nv));
    auto seq = eng.new_sequence();
    const Status st = eng.prefill(*seq, p, 0, got.data());
    EXPECT_TRUE(st.ok()) << st.to_string();
    test::NpyArray ref;
    std::string err;
    const std::string rp = family_dir(fam) + "/ref/" + prefix + "_p" + std::to_string(i) + ".npy";
    EXPECT_TRUE(test::read_npy_f32(rp, &ref, &err)) << err;
    EXPECT_EQ(ref.data.size(), got.size()) << rp;
    if (ref.data.size() != got.size()) return {};
    for (size_t k = 0; k < got.size(); ++k) {
      const double d = static_cast<double>(got[k]) - ref.data[k];
      num += d * d;
      den += static_cast<double>(ref.data[k]) * ref.data[k];
      mx = std::max(mx, std::fabs(d));
    }
  }
  return {std::sqrt(num / den), mx};
}

std::vector<std::string> isas() {
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
      std::printf("[ measure  ] %s %s (%s): rel L2 %.3e, max |d| %.3e\n", fam.c_str(), f.path.c_str(), isa.c_str(),
                  e.rel_l2, e.max_abs);
      EXPECT_LE(e.rel_l2, f.tol) << fam << " " << f.path << " " << isa;
    }
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

}  // namespace
}  // namespace laya
