// The tensors of the Llama family (llama, qwen2, qwen3), as
// convert_hf_to_gguf.py names, shapes and orders them.
#include <string>

#include "model/arch.h"
#include "model/hparams.h"
#include "model/model.h"

namespace laya {

namespace {

using D = Dim;
using R = TensorRole;
using W = When;
using P = Placement;
using LW = LayerWeights;
using MW = ModelWeights;

// Model-wide tensors: in the order the loader checks them (placement says
// where a file stores them); then one layer's, in file order.
const TensorSpec kTensors[] = {
    {"token_embd.weight", "model.embed_tokens.weight", R::kEmbedding, {D::kEmbd, D::kVocab}, 2, W::kAlways,
     P::kBeforeLayers, "n_embd mismatch?", nullptr, &MW::tok_embd},
    {"output_norm.weight", "model.norm.weight", R::kNorm, {D::kEmbd}, 1, W::kAlways, P::kAfterLayers,
     "n_embd mismatch?", nullptr, &MW::output_norm},
    {"output.weight", "lm_head.weight", R::kMatrix, {D::kEmbd, D::kVocab}, 2, W::kUntiedOutput, P::kAfterLayers,
     "vocab or n_embd mismatch?", nullptr, &MW::output},
    {"rope_freqs.weight", nullptr, R::kRopeFreqs, {D::kHalfHeadDim}, 1, W::kRopeFreqs, P::kBeforeLayers,
     "head_dim mismatch?", nullptr, nullptr},

    {"blk.{}.attn_norm.weight", "model.layers.{}.input_layernorm.weight", R::kNorm, {D::kEmbd}, 1, W::kAlways,
     P::kLayer, "n_embd mismatch?", &LW::attn_norm, nullptr},
    {"blk.{}.attn_q.weight", "model.layers.{}.self_attn.q_proj.weight", R::kMatrix, {D::kEmbd, D::kQDim}, 2,
     W::kAlways, P::kLayer, "n_head or head_dim mismatch?", &LW::wq, nullptr},
    {"blk.{}.attn_k.weight", "model.layers.{}.self_attn.k_proj.weight", R::kMatrix, {D::kEmbd, D::kKvDim}, 2,
     W::kAlways, P::kLayer, "n_head_kv mismatch?", &LW::wk, nullptr},
    {"blk.{}.attn_v.weight", "model.layers.{}.self_attn.v_proj.weight", R::kMatrix, {D::kEmbd, D::kKvDim}, 2,
     W::kAlways, P::kLayer, "n_head_kv mismatch?", &LW::wv, nullptr},
    {"blk.{}.attn_q.bias", "model.layers.{}.self_attn.q_proj.bias", R::kBias, {D::kQDim}, 1, W::kQkvBias, P::kLayer,
     "n_head mismatch?", &LW::bq, nullptr},
    {"blk.{}.attn_k.bias", "model.layers.{}.self_attn.k_proj.bias", R::kBias, {D::kKvDim}, 1, W::kQkvBias, P::kLayer,
     "n_head_kv mismatch?", &LW::bk, nullptr},
    {"blk.{}.attn_v.bias", "model.layers.{}.self_attn.v_proj.bias", R::kBias, {D::kKvDim}, 1, W::kQkvBias, P::kLayer,
     "n_head_kv mismatch?", &LW::bv, nullptr},
    {"blk.{}.attn_output.weight", "model.layers.{}.self_attn.o_proj.weight", R::kMatrix, {D::kQDim, D::kEmbd}, 2,
     W::kAlways, P::kLayer, "n_head or head_dim mismatch?", &LW::wo, nullptr},
    {"blk.{}.attn_q_norm.weight", "model.layers.{}.self_attn.q_norm.weight", R::kNorm, {D::kHeadDim}, 1, W::kQkNorm,
     P::kLayer, "head_dim mismatch?", &LW::q_norm, nullptr},
    {"blk.{}.attn_k_norm.weight", "model.layers.{}.self_attn.k_norm.weight", R::kNorm, {D::kHeadDim}, 1, W::kQkNorm,
     P::kLayer, "head_dim mismatch?", &LW::k_norm, nullptr},
    {"blk.{}.ffn_norm.weight", "model.layers.{}.post_attention_layernorm.weight", R::kNorm, {D::kEmbd}, 1, W::kAlways,
     P::kLayer, "n_embd mismatch?", &LW::ffn_norm, nullptr},
    {"blk.{}.ffn_gate.weight", "model.layers.{}.mlp.gate_proj.weight", R::kMatrix, {D::kEmbd, D::kFf}, 2, W::kAlways,
     P::kLayer, "n_ff mismatch?", &LW::w_gate, nullptr},
    {"blk.{}.ffn_up.weight", "model.layers.{}.mlp.up_proj.weight", R::kMatrix, {D::kEmbd, D::kFf}, 2, W::kAlways,
     P::kLayer, "n_ff mismatch?", &LW::w_up, nullptr},
    {"blk.{}.ffn_down.weight", "model.layers.{}.mlp.down_proj.weight", R::kMatrix, {D::kFf, D::kEmbd}, 2, W::kAlways,
     P::kLayer, "n_ff mismatch?", &LW::w_down, nullptr},
};

}  // namespace

std::span<const TensorSpec> llama_family_tensors() { return kTensors; }

}  // namespace laya
