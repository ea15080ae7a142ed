// StarCoder2 (3B, 7B, 15B): LayerNorms with a bias, biases on every
// projection (use_bias; read from the file: a checkpoint without them loads
// too), attention with RoPE over halves (no permutation in GGUF), and a
// feed-forward without a gate: c_proj(gelu_tanh(c_fc(x))). The output is
// tied to the embedding by default. Its names as convert_hf_to_gguf.py
// writes them (c_fc → ffn_up, c_proj → ffn_down).
#include <cmath>

#include "model/arch.h"
#include "model/forward.h"
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
using MW = ModelWeights;

// The Llama family's rows (tensor_rows.h), with the LayerNorms' biases, the
// attention output's, and an ungated feed-forward of its own names.
const TensorSpec kStarcoder2Tensors[] = {
    rows::kTokenEmbd,
    rows::kOutputNorm,
    {"output_norm.bias", "model.norm.bias", R::kBias, {D::kEmbd}, 1, W::kAlways, P::kAfterLayers, "n_embd mismatch?",
     nullptr, &MW::output_norm_b},
    rows::kOutput,

    rows::kAttnNorm,
    {"blk.{}.attn_norm.bias", "model.layers.{}.input_layernorm.bias", R::kBias, {D::kEmbd}, 1, W::kAlways, P::kLayer,
     "n_embd mismatch?", &LW::attn_norm_b, nullptr},
    rows::kAttnQ,
    rows::kAttnQBias,
    rows::kAttnK,
    rows::kAttnKBias,
    rows::kAttnV,
    rows::kAttnVBias,
    rows::kAttnOutput,
    {"blk.{}.attn_output.bias", "model.layers.{}.self_attn.o_proj.bias", R::kBias, {D::kEmbd}, 1, W::kQkvBias,
     P::kLayer, "n_embd mismatch?", &LW::bo, nullptr},
    rows::kFfnNorm,
    {"blk.{}.ffn_norm.bias", "model.layers.{}.post_attention_layernorm.bias", R::kBias, {D::kEmbd}, 1, W::kAlways,
     P::kLayer, "n_embd mismatch?", &LW::ffn_norm_b, nullptr},
    {"blk.{}.ffn_up.weight", "model.layers.{}.mlp.c_fc.weight", R::kMatrix, {D::kEmbd, D::kFf}, 2, W::kAlways,
     P::kLayer, "n_ff mismatch?", &LW::w_up, nullptr},
    {"blk.{}.ffn_up.bias", "model.layers.{}.mlp.c_fc.bias", R::kBias, {D::kFf}, 1, W::kQkvBias, P::kLayer,
     "n_ff mismatch?", &LW::b_up, nullptr},
    {"blk.{}.ffn_down.weight", "model.layers.{}.mlp.c_proj.weight", R::kMatrix, {D::kFf, D::kEmbd}, 2, W::kAlways,
     P::kLayer, "n_ff mismatch?", &LW::w_down, nullptr},
    {"blk.{}.ffn_down.bias", "model.layers.{}.mlp.c_proj.bias", R::kBias, {D::kEmbd}, 1, W::kQkvBias, P::kLayer,
     "n_embd mismatch?", &LW::b_down, nullptr},
};

std::span<const TensorSpec> starcoder2_tensors() { return kStarcoder2Tensors; }

Status starcoder2_forward(const Model& model, Backend& be, const RopeTables& rope, const KvLayerView& kv,
                          ForwardScratch& s, const int32_t* tokens, int64_t n, int64_t pos0) {
  const HParams& hp = model.hparams();
  const bool bias = model.flags().qkv_bias;  // use_bias: every projection's bias
  const ModelWeights& W = model.weights();
  const int64_t E = hp.n_embd, HD = hp.head_dim, KV = hp.kv_dim();
  AttentionShape ash{hp.n_head, hp.n_head_kv, HD, static_cast<float>(1.0 / std::sqrt(static_cast<double>(HD)))};
  float *x = s.x.as<float>(), *xn = s.xn.as<float>(), *q = s.q.as<float>(), *k = s.k.as<float>(), *v = s.v.as<float>();
  float *attn = s.attn.as<float>(), *up = s.up.as<float>(), *tmp = s.tmp.as<float>();

  LAYA_TRY(be.get_rows(W.tok_embd, tokens, n, x));  // (n, E) token embeddings

  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const LayerWeights& L = W.layers[static_cast<size_t>(il)];
    // --- attention block ---
    LAYA_TRY(be.layer_norm(x, L.attn_norm, L.attn_norm_b, n, E, hp.rms_eps, xn));  // xn = layer_norm(x)
    const MatmulOut qkv[3] = {{&L.wq, q}, {&L.wk, k}, {&L.wv, v}};
    LAYA_TRY(be.matmul_group(qkv, 3, xn, n));
    if (bias) {
      LAYA_TRY(be.add_bias(q, L.bq, n, hp.q_dim()));
      LAYA_TRY(be.add_bias(k, L.bk, n, KV));
      LAYA_TRY(be.add_bias(v, L.bv, n, KV));
    }
    KvLayerView kvl = kv;
    kvl.layer = il;
    LAYA_TRY(be.rope_kv_store(kvl, q, k, v, n, hp.n_head, hp.n_head_kv, HD, pos0, rope.full));
    ash.window = hp.window(il);  // sliding_window: every layer
    LAYA_TRY(be.attention(kvl, q, n, pos0, ash, attn));   // (n, n_head * HD)
    LAYA_TRY(be.matmul_add(L.wo, attn, n, tmp, x));       // x += attn · woᵀ
    if (bias) LAYA_TRY(be.add_bias(x, L.bo, n, E));       //      + bo
    // --- feed-forward block (no gate) ---
    LAYA_TRY(be.layer_norm(x, L.ffn_norm, L.ffn_norm_b, n, E, hp.rms_eps, xn));
    LAYA_TRY(be.matmul(L.w_up, xn, n, up));               // (n, n_ff) = xn · c_fcᵀ
    if (bias) LAYA_TRY(be.add_bias(up, L.b_up, n, hp.n_ff));
    LAYA_TRY(be.gelu(up, n * hp.n_ff));
    LAYA_TRY(be.matmul_add(L.w_down, up, n, tmp, x));     // x += up · c_projᵀ
    if (bias) LAYA_TRY(be.add_bias(x, L.b_down, n, E));   //      + b_down
  }
  return Status::Ok();
}

Status starcoder2_logits(const Model& model, Backend& be, ForwardScratch& s, int64_t first, int64_t m, float* logits) {
  const HParams& hp = model.hparams();
  const ModelWeights& W = model.weights();
  float* xn = s.xn.as<float>();
  LAYA_TRY(be.layer_norm(s.x.as<float>() + first * hp.n_embd, W.output_norm, W.output_norm_b, m, hp.n_embd, hp.rms_eps,
                         xn));
  return be.matmul(W.output, xn, m, logits);
}

}  // namespace

extern const ArchSpec kArchStarcoder2 = {
    .name = "starcoder2",
    .hf_model_types = {"starcoder2", nullptr, nullptr, nullptr},
    .qkv_bias = false,  // the file decides (use_bias)
    .qk_norm = false,
    .gguf_rope_interleaved = false,
    .tied_by_default = true,
    .tensors = starcoder2_tensors,
    .forward = starcoder2_forward,
    .logits = starcoder2_logits,
    .layer_norm = true,
    .block = "pre-norm LayerNorm with bias, biased projections, RoPE, GELU (tanh) feed-forward without gate",
};

}  // namespace laya
