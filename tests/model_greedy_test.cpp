// Greedy continuations against reference.json / reference_kquants.json:
// the argmax must equal the reference token at every step whose reference
// top-1 minus top-2 margin exceeds 0.05 (smaller margins are numerical ties).
// The reference tokens are fed back (teacher forcing) so one tie does not
// derail the rest of the comparison. Checked with one prefill over the whole
// sequence and incrementally through the KV cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "test_util.h"

namespace laya {
namespace {

constexpr double kMargin = 0.05;

int32_t argmax(const float* v, int64_t n) { return static_cast<int32_t>(std::max_element(v, v + n) - v); }

struct Checked {
  int steps = 0, compared = 0, mismatched = 0;
};

// prompts[i] + greedy[i] fed in; compare argmax after prompt + greedy[:s].
Checked check(const std::string& model_path, const std::vector<std::vector<int32_t>>& prompts,
              const nlohmann::json& greedy_list, bool incremental) {
  Checked c;
  auto m = Model::load(model_path);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  if (!m.ok()) return c;
  std::shared_ptr<const Model> model = std::move(m).value();
  EngineOptions eo;
  eo.n_threads = 2;
  eo.n_ctx = 512;
  auto e = Engine::create(model, eo);
  EXPECT_TRUE(e.ok());
  Engine& eng = **e;
  const int64_t nv = eng.n_vocab();
  for (const auto& g : greedy_list) {
    const auto& prompt = prompts[g["index"].get<size_t>()];
    const auto toks = g["greedy_new_tokens"].get<std::vector<int32_t>>();
    const auto margins = g["greedy_top1_top2_margin"].get<std::vector<double>>();
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), toks.begin(), toks.end());
    auto seq = eng.new_sequence();
    std::vector<float> logits(all.size() * static_cast<size_t>(nv));
    if (incremental) {
      EXPECT_TRUE(eng.prefill(*seq, prompt, 0).ok());
      std::copy(seq->logits(), seq->logits() + nv, logits.begin() + static_cast<int64_t>(prompt.size() - 1) * nv);
      for (size_t s = 0; s + 1 < toks.size(); ++s) {
        EXPECT_TRUE(eng.decode(*seq, toks[s]).ok());
        std::copy(seq->logits(), seq->logits() + nv, logits.begin() + static_cast<int64_t>(prompt.size() + s) * nv);
      }
    } else {
      EXPECT_TRUE(eng.prefill(*seq, all, 0, logits.data()).ok());
    }
    for (size_t s = 0; s < toks.size(); ++s) {
      ++c.steps;
      if (margins[s] <= kMargin) continue;
      ++c.compared;
      const int32_t got = argmax(logits.data() + static_cast<int64_t>(prompt.size() - 1 + s) * nv, nv);
      if (got != toks[s]) {
        ++c.mismatched;
        ADD_FAILURE() << model_path << " prompt " << g["index"] << " step " << s << ": argmax " << got << ", reference "
                      << toks[s] << " (margin " << margins[s] << ")";
      }
    }
  }
  return c;
}

std::vector<std::vector<int32_t>> prompts(const std::string& fx) {
  auto j = nlohmann::json::parse(test::read_text_file(fx + "/ref-models/common/prompts.json"));
  return j["prompts"].get<std::vector<std::vector<int32_t>>>();
}

TEST(ModelGreedy, Float32ReferenceAllModelsAndFormats) {
  LAYA_REQUIRE_FIXTURES(fx);
  const auto ps = prompts(fx);
  for (const char* m : {"llama-tiny", "qwen2-tiny", "qwen3-tiny"}) {
    auto ref = nlohmann::json::parse(test::read_text_file(fx + "/ref-models/" + m + "/reference.json"));
    for (const std::string& file : {std::string("gguf/") + m + "-f16.gguf", std::string("hf")}) {
      for (bool inc : {false, true}) {
        Checked c = check(fx + "/ref-models/" + m + "/" + file, ps, ref["reference"]["prompts"], inc);
        std::printf("[ measure  ] %s %s%s: %d/%d compared steps equal (%d steps)\n", m, file.c_str(),
                    inc ? " incremental" : "", c.compared - c.mismatched, c.compared, c.steps);
        EXPECT_GT(c.compared, 100);
      }
    }
    Checked c = check(fx + "/ref-models/" + m + "/gguf/" + m + "-q8_0.gguf", ps, ref["reference_q8_0"], true);
    std::printf("[ measure  ] %s q8_0 incremental: %d/%d compared steps equal\n", m, c.compared - c.mismatched, c.compared);
  }
}

TEST(ModelGreedy, KQuantReferences) {
  LAYA_REQUIRE_FIXTURES(fx);
  const auto ps = prompts(fx);
  for (const char* m : {"llama-tiny", "qwen3-tiny"}) {
    auto ref = nlohmann::json::parse(test::read_text_file(fx + "/ref-models/" + m + "/reference_kquants.json"));
    for (const char* t : {"Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K"}) {
      const nlohmann::json& list = ref["types"][t]["prompts"];
      for (bool inc : {false, true}) {
        Checked c = check(fx + "/ref-models/" + m + "/gguf/" + m + "-" + t + ".gguf", ps, list, inc);
        std::printf("[ measure  ] %s %s%s: %d/%d compared steps equal\n", m, t, inc ? " incremental" : "",
                    c.compared - c.mismatched, c.compared);
        EXPECT_GT(c.compared, 100);
      }
    }
  }
}

}  // namespace
}  // namespace laya
