// The architecture table (model/arch.h) and the views of the weights read
// from it: what the backend packs (matrices) and what the engine locks (all).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "model/model.h"
#include "test_util.h"

namespace laya {
namespace {

TEST(ModelTable, EveryArchitectureIsRegisteredFromItsFile) {
  for (const char* name : {"llama", "qwen2", "qwen3", "phi3", "granite", "starcoder2", "gemma", "gemma2", "gemma3"}) {
    const ArchSpec* a = find_arch_by_gguf_name(name);
    ASSERT_NE(a, nullptr) << name;
    EXPECT_STREQ(a->name, name);
    EXPECT_FALSE(a->tensors().empty());
  }
  EXPECT_EQ(find_arch_by_hf_type("mistral"), find_arch_by_gguf_name("llama"));
  EXPECT_EQ(find_arch_by_gguf_name("gpt2"), nullptr);
  EXPECT_STREQ(supported_arch_list(),
               "gemma, gemma2, gemma3 (incl. gemma3_text), granite, llama (incl. mistral), phi3, qwen2, qwen3, starcoder2");
}

// The engine calls an architecture's own block: one without a forward or a
// logits function could load and then have nothing to run.
TEST(ModelTable, EveryArchitectureHasAForwardPass) {
  ASSERT_FALSE(registered_archs().empty());
  for (const ArchSpec* a : registered_archs()) {
    EXPECT_NE(a->forward, nullptr) << a->name;
    EXPECT_NE(a->logits, nullptr) << a->name;
    EXPECT_NE(a->tensors, nullptr) << a->name;
    EXPECT_EQ(find_arch_by_gguf_name(a->name), a) << a->name;
  }
}

TEST(ModelTable, EveryTensorHasOneBindingAndAShape) {
  for (const ArchSpec* a : registered_archs()) {
    std::set<std::string> gguf_names;
    for (const TensorSpec& s : a->tensors()) {
      SCOPED_TRACE(std::string(a->name) + " " + s.gguf);
      EXPECT_TRUE(gguf_names.insert(s.gguf).second);
      // A view of a fused matrix is never read from a file (no HF name), and
      // only a matrix is fused.
      if (s.when == When::kSplit) {
        EXPECT_EQ(s.hf, nullptr);
      }
      if (s.role == TensorRole::kFused) {
        EXPECT_EQ(s.n_dims, 2);
      }
      EXPECT_TRUE(s.n_dims == 1 || s.n_dims == 2);
      EXPECT_EQ(s.per_layer(), std::string(s.gguf).find("{}") != std::string::npos);
      if (s.per_layer()) {
        EXPECT_NE(s.layer_field, nullptr);
        EXPECT_EQ(s.model_field, nullptr);
      } else {
        EXPECT_EQ(s.layer_field, nullptr);
        EXPECT_EQ(s.model_field == nullptr, s.role == TensorRole::kRopeFreqs);
      }
    }
  }
  auto q = std::find_if(llama_family_tensors().begin(), llama_family_tensors().end(),
                        [](const TensorSpec& s) { return s.layer_field == &LayerWeights::wq; });
  ASSERT_NE(q, llama_family_tensors().end());
  EXPECT_EQ(q->gguf_name(12), "blk.12.attn_q.weight");
}

// Per model: the packed list is output, then each layer's seven matrices (the
// engine's order); the locked list is every bound tensor once.
void check_views(const std::string& path) {
  SCOPED_TRACE(path);
  auto m = Model::load(path);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const ModelWeights& w = (*m)->weights();
  const HParams& h = (*m)->hparams();
  const ArchSpec& a = (*m)->arch();

  std::vector<const Tensor*> want = {&w.output};
  for (const auto& L : w.layers)
    for (const Tensor* t : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) want.push_back(t);
  EXPECT_EQ(w.matrices(), want);

  const std::vector<const Tensor*> all = w.all();
  const size_t per_layer = 2 + 7 + (a.qkv_bias ? 3 : 0) + (a.qk_norm ? 2 : 0);
  EXPECT_EQ(all.size(), 2 + (h.tied_embeddings ? 0 : 1) + per_layer * w.layers.size());
  std::set<const uint8_t*> data;
  for (const Tensor* t : all) {
    EXPECT_TRUE(t->present()) << t->name;
    EXPECT_TRUE(data.insert(t->data).second) << t->name;
  }
  EXPECT_EQ(all.front(), &w.tok_embd);
  if (h.tied_embeddings) {
    EXPECT_EQ(w.output.data, w.tok_embd.data);
    EXPECT_EQ(std::count(all.begin(), all.end(), &w.output), 0);
  }
}

TEST(ModelTable, MatricesAndAllOfTheReferenceModels) {
  LAYA_REQUIRE_FIXTURES(fx);
  const std::string r = fx + "/ref-models/";
  for (const char* p : {"llama-tiny/gguf/llama-tiny-q8_0.gguf", "llama-tiny/hf", "qwen2-tiny/gguf/qwen2-tiny-f16.gguf",
                        "qwen2-tiny/hf", "qwen3-tiny/gguf/qwen3-tiny-Q4_K_M.gguf", "qwen3-tiny/hf"})
    check_views(r + p);
}

// phi3's fused q/k/v and gate/up: bound whole, multiplied as views of their
// rows (q, k, v; gate, up), which the backend packs and the engine locks in
// their place (the fused tensor itself is neither, or its bytes would be held twice).
TEST(ModelTable, FusedMatricesAreSplitIntoRowViews) {
  const std::string dir = std::string(LAYA_SOURCE_DIR) + "/tests/fixtures/families/phi3/";
  for (const std::string& p : {dir + "hf", dir + "phi3-q8_0.gguf"}) {
    SCOPED_TRACE(p);
    auto m = Model::load(p);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    const ModelWeights& w = (*m)->weights();
    const HParams& h = (*m)->hparams();
    for (const LayerWeights& L : w.layers) {
      ASSERT_TRUE(L.wqkv.present() && L.w_gate_up.present());
      EXPECT_EQ(L.wq.data, L.wqkv.data);
      EXPECT_EQ(L.wk.data, L.wqkv.row(h.q_dim()));
      EXPECT_EQ(L.wv.data, L.wqkv.row(h.q_dim() + h.kv_dim()));
      EXPECT_EQ(L.wv.rows(), h.kv_dim());
      EXPECT_EQ(L.wq.nbytes + L.wk.nbytes + L.wv.nbytes, L.wqkv.nbytes);
      EXPECT_EQ(L.w_gate.data, L.w_gate_up.data);
      EXPECT_EQ(L.w_up.data, L.w_gate_up.row(h.n_ff));
      EXPECT_EQ(L.w_up.rows(), h.n_ff);
      EXPECT_EQ(L.w_up.cols(), h.n_embd);
    }
    check_views(p);
    // The fused tensors (names without a "[part]") are in neither list.
    for (const Tensor* t : w.all()) {
      const bool fused_name = t->name.find("attn_qkv") != std::string::npos || t->name.find("ffn_up") != std::string::npos;
      if (fused_name) {
        EXPECT_NE(t->name.find('['), std::string::npos) << t->name;
      }
    }
  }
}

TEST(ModelTable, DefaultWeightsHaveNoViews) {
  ModelWeights w;
  EXPECT_TRUE(w.matrices().empty());
  EXPECT_TRUE(w.all().empty());
}

}  // namespace
}  // namespace laya
