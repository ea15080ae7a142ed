// Gemma 2 (2B, 9B, 27B): Gemma's embeddings times sqrt(n_embd), (1 + w)
// RMSNorms and GELU-gated feed-forward, with a block of its own: the
// attention's and the feed-forward's outputs are normed again before they join
// the residual stream (post_attention_norm, post_ffw_norm; the feed-forward's
// input norm is pre_feedforward_layernorm, GGUF's ffn_norm), the attention
// scores are soft-capped (attn_logit_softcapping: 50) and the logits too
// (final_logit_softcapping: 30), queries are scaled by
// query_pre_attn_scalar^-0.5, and the layers alternate between a sliding
// window (even layers: 4096) and the whole context. Tensor names as
// convert_hf_to_gguf.py writes them; the output is the embedding.
//
// The block is Gemma 3's too (arch_gemma3.cpp), with its per-head q/k norms:
// they are this table's kQkNorm entries, used where the model has them.
#include <cmath>

#include "model/arch.h"
#include "model/forward.h"
#include "model/gemma_blocks.h"
#include "model/hparams.h"
#include "model/model.h"
#include "model/tensor_rows.h"

namespace laya {

namespace {

using D = Dim;
using R = TensorRole;
using W = When;
using P = Placement;
using LW = LayerWeights;

// The Llama family's rows (tensor_rows.h), with the norms after attention and
// after the feed-forward, and the feed-forward's input norm under its Gemma 2
// name. The q/k norms are Gemma 3's (W::kQkNorm).
const TensorSpec kGemma2Tensors[] = {
    rows::kTokenEmbd,
    rows::kOutputNorm,
    rows::kOutput,

    rows::kAttnNorm,
    rows::kAttnQ,
    rows::kAttnK,
    rows::kAttnV,
    rows::kAttnQNorm,
    rows::kAttnKNorm,
    rows::kAttnOutput,
    {"blk.{}.post_attention_norm.weight", "model.layers.{}.post_attention_layernorm.weight", R::kNorm, {D::kEmbd}, 1,
     W::kAlways, P::kLayer, "n_embd mismatch?", &LW::attn_post_norm, nullptr},
    {"blk.{}.ffn_norm.weight", "model.layers.{}.pre_feedforward_layernorm.weight", R::kNorm, {D::kEmbd}, 1,
     W::kAlways, P::kLayer, "n_embd mismatch?", &LW::ffn_norm, nullptr},
    rows::kFfnGate,
    rows::kFfnUp,
    rows::kFfnDown,
    {"blk.{}.post_ffw_norm.weight", "model.layers.{}.post_feedforward_layernorm.weight", R::kNorm, {D::kEmbd}, 1,
     W::kAlways, P::kLayer, "n_embd mismatch?", &LW::ffn_post_norm, nullptr},
};

}  // namespace

std::span<const TensorSpec> gemma2_family_tensors() { return kGemma2Tensors; }

Status gemma2_family_forward(const Model& model, Backend& be, const RopeTables& rope, const KvLayerView& kv,
                             ForwardScratch& s, const int32_t* tokens, int64_t n, int64_t pos0) {
  const HParams& hp = model.hparams();
  const bool qk_norm = model.flags().qk_norm;  // Gemma 3
  const ModelWeights& W = model.weights();
  const int64_t E = hp.n_embd, HD = hp.head_dim;
  // attn_scale: query_pre_attn_scalar^-0.5 (the loaders set it; head_dim^-0.5 when unsaid).
  AttentionShape ash{hp.n_head, hp.n_head_kv, HD,
                     hp.attn_scale > 0 ? hp.attn_scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(HD)))};
  ash.softcap = hp.attn_softcap;
  float *x = s.x.as<float>(), *xn = s.xn.as<float>(), *q = s.q.as<float>(), *k = s.k.as<float>(), *v = s.v.as<float>();
  float *attn = s.attn.as<float>(), *up = s.up.as<float>(), *tmp = s.tmp.as<float>();

  LAYA_TRY(gemma_embed(model, be, s, tokens, n));  // (n, E) embeddings times sqrt(E)
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const LayerWeights& L = W.layers[static_cast<size_t>(il)];
    // --- attention block ---
    const MatmulOut qkv[3] = {{&L.wq, q}, {&L.wk, k}, {&L.wv, v}};
    LAYA_TRY(be.norm_matmul_group(x, L.attn_norm, hp.rms_eps, E, xn, qkv, 3, n));  // xn = rms_norm(x) · (1 + w)
    if (qk_norm) {  // Gemma 3: RMSNorm (1 + w) over each head, before RoPE
      LAYA_TRY(be.rms_norm(q, L.q_norm, n * hp.n_head, HD, hp.rms_eps, q));
      LAYA_TRY(be.rms_norm(k, L.k_norm, n * hp.n_head_kv, HD, hp.rms_eps, k));
    }
    KvLayerView kvl = kv;
    kvl.layer = il;
    // A local layer: its window, and (Gemma 3) its own RoPE base.
    LAYA_TRY(be.rope_kv_store(kvl, q, k, v, n, hp.n_head, hp.n_head_kv, HD, pos0, rope.of_layer(hp, il)));
    ash.window = hp.window(il);
    LAYA_TRY(be.attention(kvl, q, n, pos0, ash, attn));  // (n, n_head * HD), scores soft-capped
    LAYA_TRY(be.matmul(L.wo, attn, n, tmp));              // (n, E) = attn · woᵀ
    LAYA_TRY(be.rms_norm(tmp, L.attn_post_norm, n, E, hp.rms_eps, tmp));
    LAYA_TRY(be.add(x, tmp, n * E));                      // x += post_norm(attn · woᵀ)
    // --- feed-forward block (GELU-gated, normed before and after) ---
    LAYA_TRY(gemma_gelu_gate(be, hp, L, L.ffn_norm, x, s, n));  // (n, n_ff)
    LAYA_TRY(be.matmul(L.w_down, up, n, tmp));                  // (n, E) = up · downᵀ
    LAYA_TRY(be.rms_norm(tmp, L.ffn_post_norm, n, E, hp.rms_eps, tmp));
    LAYA_TRY(be.add(x, tmp, n * E));                            // x += post_norm(up · downᵀ)
  }
  return Status::Ok();
}

Status gemma2_family_logits(const Model& model, Backend& be, ForwardScratch& s, int64_t first, int64_t m,
                            float* logits) {
  const HParams& hp = model.hparams();
  LAYA_TRY(llama_family_logits(model, be, s, first, m, logits));  // (m, n_vocab)
  if (hp.final_softcap > 0) LAYA_TRY(be.softcap(logits, m * hp.n_vocab, hp.final_softcap));
  return Status::Ok();
}

extern const ArchSpec kArchGemma2 = {
    .name = "gemma2",
    .hf_model_types = {"gemma2", nullptr, nullptr, nullptr},
    .qkv_bias = false,
    .qk_norm = false,
    .gguf_rope_interleaved = false,
    .tied_by_default = true,
    .tensors = gemma2_family_tensors,
    .forward = gemma2_family_forward,
    .logits = gemma2_family_logits,
    .hf_norm_shift = 1.0f,
    .block = "RMSNorm (1 + w) before and after attention and feed-forward, embeddings times sqrt(n_embd), RoPE, "
             "soft-capped attention scores and logits, local (sliding-window) and global layers alternating, "
             "GELU (tanh)-gated feed-forward",
    .attn = {.swa_period = 2, .gguf_window = 4096, .gguf_attn_softcap = 50.0f, .gguf_final_softcap = 30.0f,
             .gguf_wide_scale_layers = 46},
};

}  // namespace laya
