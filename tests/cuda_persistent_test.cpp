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

#include "backend/backend.h"
#include "engine/engine.h"
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

// Prefills a prompt, then decodes `steps` greedy tokens on both engines,
// comparing every step's logits byte for byte.
void expect_same_steps(const std::string& path, DType kv, int steps) {
  auto m = Model::load(path);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  std::shared_ptr<const Model> model = std::move(m).value();
  auto graph = make_engine(model, false, kv), persistent = make_engine(model, true, kv);
  ASSERT_TRUE(graph && persistent);
  auto sg = graph->new_sequence(), sp = persistent->new_sequence();
  const std::vector<int32_t> prompt = {1, 15, 27, 3, 8, 42, 99, 7, 64, 5, 11, 2, 30, 17, 23, 4, 9, 12, 6, 50};
  ASSERT_TRUE(graph->prefill(*sg, prompt, 0).ok());
  ASSERT_TRUE(persistent->prefill(*sp, prompt, 0).ok());
  const int64_t nv = model->hparams().n_vocab;
  for (int s = 0; s < steps; ++s) {
    const int32_t tok = argmax(sg->logits(), nv);
    ASSERT_TRUE(graph->decode(*sg, tok).ok());
    ASSERT_TRUE(persistent->decode(*sp, tok).ok());
    if (std::memcmp(sg->logits(), sp->logits(), static_cast<size_t>(nv) * sizeof(float)) != 0) {
      double worst = 0;
      int64_t at = 0;
      for (int64_t i = 0; i < nv; ++i) {
        const double d = std::abs(static_cast<double>(sg->logits()[i]) - sp->logits()[i]);
        if (!(d <= worst)) worst = d, at = i;
      }
      FAIL() << path << ": step " << s << " (position " << prompt.size() + static_cast<size_t>(s)
             << ") differs: largest difference " << worst << " at logit " << at << " (" << sg->logits()[at] << " vs "
             << sp->logits()[at] << "), argmax " << argmax(sg->logits(), nv) << " vs " << argmax(sp->logits(), nv);
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

// Steps cross a 64-position KV block and a 16-position K chunk; the attention
// splits and the grid barrier run every step.
TEST(CudaPersistent, LlamaStepsAreTheGraphsBits) {
  LAYA_REQUIRE_CUDA();
  LAYA_REQUIRE_FIXTURES(fx);
  expect_same_steps(fx + "/ref-models/llama-tiny/gguf/llama-tiny-f16.gguf", DType::F32, 50);
  expect_same_steps(fx + "/ref-models/llama-tiny/gguf/llama-tiny-q8_0.gguf", DType::F16, 12);
}

TEST(CudaPersistent, Qwen2BiasesAndQ8CacheAreTheGraphsBits) {
  LAYA_REQUIRE_CUDA();
  LAYA_REQUIRE_FIXTURES(fx);
  expect_same_steps(fx + "/ref-models/qwen2-tiny/gguf/qwen2-tiny-q8_0.gguf", DType::Q8_0, 12);
}

TEST(CudaPersistent, Qwen3HeadNormsAreTheGraphsBits) {
  LAYA_REQUIRE_CUDA();
  LAYA_REQUIRE_FIXTURES(fx);
  expect_same_steps(fx + "/ref-models/qwen3-tiny/gguf/qwen3-tiny-f16.gguf", DType::F32, 12);
}

}  // namespace
}  // namespace laya
