// The tensor-table rows that several families share (model/arch.h's
// TensorSpec): the Llama family's, as convert_hf_to_gguf.py names and shapes
// them and as the Hugging Face checkpoints call them. A family's table
// (llama_family.cpp, arch_<name>.cpp) names these rows and spells out only
// what is its own: another HF name (Gemma 2's pre_feedforward_layernorm,
// StarCoder2's c_fc), another shape (Phi-3's fused matrices), or a tensor the
// Llama family lacks (post norms, LayerNorm biases).
#pragma once

#include "model/arch.h"
#include "model/model.h"

namespace laya::rows {

// ---- model-wide -------------------------------------------------------------------

inline constexpr TensorSpec kTokenEmbd = {
    "token_embd.weight", "model.embed_tokens.weight", TensorRole::kEmbedding, {Dim::kEmbd, Dim::kVocab}, 2,
    When::kAlways, Placement::kBeforeLayers, "n_embd mismatch?", nullptr, &ModelWeights::tok_embd};
inline constexpr TensorSpec kOutputNorm = {
    "output_norm.weight", "model.norm.weight", TensorRole::kNorm, {Dim::kEmbd}, 1,
    When::kAlways, Placement::kAfterLayers, "n_embd mismatch?", nullptr, &ModelWeights::output_norm};
// Absent from a file whose output is the embedding (tied).
inline constexpr TensorSpec kOutput = {
    "output.weight", "lm_head.weight", TensorRole::kMatrix, {Dim::kEmbd, Dim::kVocab}, 2,
    When::kUntiedOutput, Placement::kAfterLayers, "vocab or n_embd mismatch?", nullptr, &ModelWeights::output};

// ---- one layer's: attention -------------------------------------------------------

inline constexpr TensorSpec kAttnNorm = {
    "blk.{}.attn_norm.weight", "model.layers.{}.input_layernorm.weight", TensorRole::kNorm, {Dim::kEmbd}, 1,
    When::kAlways, Placement::kLayer, "n_embd mismatch?", &LayerWeights::attn_norm, nullptr};
inline constexpr TensorSpec kAttnQ = {
    "blk.{}.attn_q.weight", "model.layers.{}.self_attn.q_proj.weight", TensorRole::kMatrix, {Dim::kEmbd, Dim::kQDim},
    2, When::kAlways, Placement::kLayer, "n_head or head_dim mismatch?", &LayerWeights::wq, nullptr};
inline constexpr TensorSpec kAttnK = {
    "blk.{}.attn_k.weight", "model.layers.{}.self_attn.k_proj.weight", TensorRole::kMatrix, {Dim::kEmbd, Dim::kKvDim},
    2, When::kAlways, Placement::kLayer, "n_head_kv mismatch?", &LayerWeights::wk, nullptr};
inline constexpr TensorSpec kAttnV = {
    "blk.{}.attn_v.weight", "model.layers.{}.self_attn.v_proj.weight", TensorRole::kMatrix, {Dim::kEmbd, Dim::kKvDim},
    2, When::kAlways, Placement::kLayer, "n_head_kv mismatch?", &LayerWeights::wv, nullptr};
// q/k/v biases, where the ArchSpec says qkv_bias (Qwen2, StarCoder2).
inline constexpr TensorSpec kAttnQBias = {
    "blk.{}.attn_q.bias", "model.layers.{}.self_attn.q_proj.bias", TensorRole::kBias, {Dim::kQDim}, 1,
    When::kQkvBias, Placement::kLayer, "n_head mismatch?", &LayerWeights::bq, nullptr};
inline constexpr TensorSpec kAttnKBias = {
    "blk.{}.attn_k.bias", "model.layers.{}.self_attn.k_proj.bias", TensorRole::kBias, {Dim::kKvDim}, 1,
    When::kQkvBias, Placement::kLayer, "n_head_kv mismatch?", &LayerWeights::bk, nullptr};
inline constexpr TensorSpec kAttnVBias = {
    "blk.{}.attn_v.bias", "model.layers.{}.self_attn.v_proj.bias", TensorRole::kBias, {Dim::kKvDim}, 1,
    When::kQkvBias, Placement::kLayer, "n_head_kv mismatch?", &LayerWeights::bv, nullptr};
inline constexpr TensorSpec kAttnOutput = {
    "blk.{}.attn_output.weight", "model.layers.{}.self_attn.o_proj.weight", TensorRole::kMatrix,
    {Dim::kQDim, Dim::kEmbd}, 2, When::kAlways, Placement::kLayer, "n_head or head_dim mismatch?", &LayerWeights::wo,
    nullptr};
// Per-head q/k RMSNorms, where the ArchSpec says qk_norm (Qwen3, Gemma 3).
inline constexpr TensorSpec kAttnQNorm = {
    "blk.{}.attn_q_norm.weight", "model.layers.{}.self_attn.q_norm.weight", TensorRole::kNorm, {Dim::kHeadDim}, 1,
    When::kQkNorm, Placement::kLayer, "head_dim mismatch?", &LayerWeights::q_norm, nullptr};
inline constexpr TensorSpec kAttnKNorm = {
    "blk.{}.attn_k_norm.weight", "model.layers.{}.self_attn.k_norm.weight", TensorRole::kNorm, {Dim::kHeadDim}, 1,
    When::kQkNorm, Placement::kLayer, "head_dim mismatch?", &LayerWeights::k_norm, nullptr};

// ---- one layer's: feed-forward ----------------------------------------------------

inline constexpr TensorSpec kFfnNorm = {
    "blk.{}.ffn_norm.weight", "model.layers.{}.post_attention_layernorm.weight", TensorRole::kNorm, {Dim::kEmbd}, 1,
    When::kAlways, Placement::kLayer, "n_embd mismatch?", &LayerWeights::ffn_norm, nullptr};
inline constexpr TensorSpec kFfnGate = {
    "blk.{}.ffn_gate.weight", "model.layers.{}.mlp.gate_proj.weight", TensorRole::kMatrix, {Dim::kEmbd, Dim::kFf}, 2,
    When::kAlways, Placement::kLayer, "n_ff mismatch?", &LayerWeights::w_gate, nullptr};
inline constexpr TensorSpec kFfnUp = {
    "blk.{}.ffn_up.weight", "model.layers.{}.mlp.up_proj.weight", TensorRole::kMatrix, {Dim::kEmbd, Dim::kFf}, 2,
    When::kAlways, Placement::kLayer, "n_ff mismatch?", &LayerWeights::w_up, nullptr};
inline constexpr TensorSpec kFfnDown = {
    "blk.{}.ffn_down.weight", "model.layers.{}.mlp.down_proj.weight", TensorRole::kMatrix, {Dim::kFf, Dim::kEmbd}, 2,
    When::kAlways, Placement::kLayer, "n_ff mismatch?", &LayerWeights::w_down, nullptr};

}  // namespace laya::rows
