// The persistent decode kernel (src/backend/cuda/persistent.cu) against the
// decode step it replaces, the recorded graph of one kernel per op: the same
// instructions run the same device code, so every decode step's logits must
// be the same bits. Runs where the cuda backend can be made (a GPU, or the
// -DLAYA_CUDA_EMULATE build); skips elsewhere. The reference-model tests
// (LAYA_TEST_BACKEND=cuda) check both against transformers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>

#include <unistd.h>

#include "backend/backend.h"
#include "engine/engine.h"
#include "modelgen/presets.h"
#include "test_util.h"

namespace laya {
namespace {

std::unique_ptr<Engine> make_engine(std::shared_ptr<const Model> model, bool persistent, DType kv) {
  EngineOptions eo;
  eo.backend = "cuda";
  eo.n_ctx = 256;
  eo.kv_type = kv;
  CudaTuning t;
  t.persistent = persistent;
  eo.cuda = t;
  auto e = Engine::create(std::move(model), eo);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? std::move(e).value() : nullptr;
}

int32_t argmax(const float* v, int64_t n) { return static_cast<int32_t>(std::max_element(v, v + n) - v); }

// The logits of `prompt` then `fed` on the CPU backend (the reference both
// CUDA paths are held to, for saying which one is off).
std::vector<float> cpu_logits(std::shared_ptr<const Model> model, DType kv, const std::vector<int32_t>& prompt,
                              const std::vector<int32_t>& fed) {
  EngineOptions eo;
  eo.n_ctx = 256;
  eo.kv_type = kv;
  auto e = Engine::create(std::move(model), eo);
  if (!e.ok()) return {};
  auto seq = (*e)->new_sequence();
  if (!(*e)->prefill(*seq, prompt, 0).ok()) return {};
  for (int32_t t : fed)
    if (!(*e)->decode(*seq, t).ok()) return {};
  const int64_t nv = (*e)->model().hparams().n_vocab;
  return std::vector<float>(seq->logits(), seq->logits() + nv);
}

double largest_difference(const float* a, const float* b, int64_t n, int64_t* at) {
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - b[i]);
    if (!(d <= worst)) worst = d, *at = i;
  }
  return worst;
}

// Prefills a prompt, then decodes `steps` greedy tokens on both engines,
// comparing every step's logits byte for byte; where they differ, says how
// far each is from the CPU backend's.
// persistent: whether the persistent engine must say its steps run the kernel
// (else that they keep the graph).
void expect_same_steps(const std::string& path, DType kv, int steps, bool persistent) {
  auto m = Model::load(path);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  std::shared_ptr<const Model> model = std::move(m).value();
  auto graph = make_engine(model, false, kv), persistent_engine = make_engine(model, true, kv);
  ASSERT_TRUE(graph && persistent_engine);
  auto sg = graph->new_sequence(), sp = persistent_engine->new_sequence();
  const std::vector<int32_t> prompt = {1, 15, 27, 3, 8, 42, 99, 7, 64, 5, 11, 2, 30, 17, 23, 4, 9, 12, 6, 50};
  ASSERT_TRUE(graph->prefill(*sg, prompt, 0).ok());
  ASSERT_TRUE(persistent_engine->prefill(*sp, prompt, 0).ok());
  const int64_t nv = model->hparams().n_vocab;
  std::vector<int32_t> fed;
  for (int s = 0; s < steps; ++s) {
    const int32_t tok = argmax(sg->logits(), nv);
    fed.push_back(tok);
    ASSERT_TRUE(graph->decode(*sg, tok).ok());
    ASSERT_TRUE(persistent_engine->decode(*sp, tok).ok());
    if (s == 0) {
      const std::string note = persistent_engine->backend().decode_step_note();
      EXPECT_EQ(note.find("run the persistent kernel") != std::string::npos, persistent) << path << ": " << note;
    }
    if (std::memcmp(sg->logits(), sp->logits(), static_cast<size_t>(nv) * sizeof(float)) != 0) {
      int64_t at = 0, at_g = 0, at_p = 0;
      const double worst = largest_difference(sg->logits(), sp->logits(), nv, &at);
      const std::vector<float> ref = cpu_logits(model, kv, prompt, fed);
      const double g = ref.empty() ? -1 : largest_difference(sg->logits(), ref.data(), nv, &at_g);
      const double p = ref.empty() ? -1 : largest_difference(sp->logits(), ref.data(), nv, &at_p);
      FAIL() << path << " (" << dtype_name(kv) << " cache): step " << s << " (position "
             << prompt.size() + static_cast<size_t>(s) << ") differs: largest difference " << worst << " at logit " << at
             << " (" << sg->logits()[at] << " vs " << sp->logits()[at] << "), argmax " << argmax(sg->logits(), nv)
             << " vs " << argmax(sp->logits(), nv) << "; from the CPU backend's: graph " << g << " (logit " << at_g
             << "), persistent " << p << " (logit " << at_p << ")";
    }
  }
}

bool have_cuda() {
  return make_backend("cuda", BackendOptions{.n_threads = 1, .lock_memory = false, .on_prepare_progress = {}},
                      ForwardLimits{64, 64, 1, 1})
      .ok();
}

#define LAYA_REQUIRE_CUDA()                                                                 \
  do {                                                                                      \
    if (!have_cuda()) GTEST_SKIP() << "no cuda backend in this build (or no GPU): nothing to compare"; \
  } while (0)

// A random-weight model of `preset` with every matrix Q8_0 (mkmodel; the
// llama-tiny fixture's Q8_0 file keeps four matrices F16, which the kernel
// refuses), in the test's temporary folder.
std::string tiny_q8_model(const std::string& preset) {
  const std::string path = ::testing::TempDir() + "persistent_" + preset + "." + std::to_string(::getpid()) + ".gguf";
  const ModelPreset* p = find_preset(preset);
  if (!p) return {};
  MkModelOptions opt;
  opt.type = MkType::kQ8_0;
  opt.seed = 11;
  opt.n_threads = 2;
  opt.output.overwrite = true;
  return make_random_model(*p, opt, path).ok() ? path : std::string();
}

// tiny_q8_model(preset) with a Q8_0 cache: the kernel runs `steps` steps, each the graph's bits.
void expect_tiny_q8_steps(const std::string& preset, int steps) {
  const std::string path = tiny_q8_model(preset);
  ASSERT_FALSE(path.empty()) << "mkmodel " << preset;
  expect_same_steps(path, DType::Q8_0, steps, true);
  std::remove(path.c_str());
}

// Steps cross a 64-position KV block and a 16-position K chunk; the attention
// splits and the grid barrier run every step.
TEST(CudaPersistent, LlamaStepsAreTheGraphsBits) {
  LAYA_REQUIRE_CUDA();
  expect_tiny_q8_steps("test-tiny", 50);
}

TEST(CudaPersistent, Qwen2BiasesAndQ8CacheAreTheGraphsBits) {
  LAYA_REQUIRE_CUDA();
  LAYA_REQUIRE_FIXTURES(fx);
  expect_same_steps(fx + "/ref-models/qwen2-tiny/gguf/qwen2-tiny-q8_0.gguf", DType::Q8_0, 12, true);
}

TEST(CudaPersistent, Qwen3HeadNormsAreTheGraphsBits) {
  LAYA_REQUIRE_CUDA();
  expect_tiny_q8_steps("test-tiny-qwen3", 12);
}

// F16 weights with an F32 cache differed from the graph on the H100 (up to
// 2.6 in a logit at the first step) while the grid barrier shared one
// counter: the kernel refuses what no GPU run has verified, and the step
// keeps its graph (persistent.cu, StepProgram::upload).
TEST(CudaPersistent, UnverifiedStepsKeepTheGraph) {
  LAYA_REQUIRE_CUDA();
  LAYA_REQUIRE_FIXTURES(fx);
  expect_same_steps(fx + "/ref-models/qwen3-tiny/gguf/qwen3-tiny-f16.gguf", DType::F32, 4, false);
  expect_same_steps(fx + "/ref-models/llama-tiny/gguf/llama-tiny-f16.gguf", DType::F32, 4, false);
  expect_same_steps(fx + "/ref-models/llama-tiny/gguf/llama-tiny-q8_0.gguf", DType::F16, 4, false);
}

// A step with an op the kernel has no instruction for (Gemma 2's GELU and
// soft-capping) keeps its graph.
TEST(CudaPersistent, StepsWithOtherOpsKeepTheGraph) {
  LAYA_REQUIRE_CUDA();
  const std::string path = std::string(LAYA_SOURCE_DIR) + "/tests/fixtures/families/gemma2/gemma2-q8_0.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is not here (a test binary away from its checkout)";
  expect_same_steps(path, DType::Q8_0, 2, false);
}

}  // namespace
}  // namespace laya
