// Phi-3 / Phi-3.5 (mini, medium; dense): the Llama block with q/k/v fused
// into one matrix (attn_qkv) and the SwiGLU's gate and up fused into one
// (ffn_up: gate rows, then up rows), as convert_hf_to_gguf.py writes them
// and as the HF checkpoints store them (qkv_proj, gate_up_proj). The loader
// splits both into views of their rows (TensorRole::kFused), so the block is
// the Llama family's. RoPE pairs halves (no permutation in GGUF); the output
// is not tied. LongRoPE (the 128k variants) is refused by its rope type;
// phimoe is another model type and refused by name.
#include "model/arch.h"
#include "model/model.h"
#include "model/tensor_rows.h"

namespace laya {

namespace {

using D = Dim;
using R = TensorRole;
using W = When;
using P = Placement;
using LW = LayerWeights;

// The Llama family's rows (tensor_rows.h), with q/k/v and gate/up fused.
const TensorSpec kPhi3Tensors[] = {
    rows::kTokenEmbd,
    rows::kOutputNorm,
    rows::kOutput,

    rows::kAttnNorm,
    {"blk.{}.attn_qkv.weight", "model.layers.{}.self_attn.qkv_proj.weight", R::kFused, {D::kEmbd, D::kQkvDim}, 2,
     W::kAlways, P::kLayer, "n_head, n_head_kv or head_dim mismatch?", &LW::wqkv, nullptr},
    {"blk.{}.attn_qkv.weight[q]", nullptr, R::kMatrix, {D::kEmbd, D::kQDim}, 2, W::kSplit, P::kLayer, "", &LW::wq, nullptr},
    {"blk.{}.attn_qkv.weight[k]", nullptr, R::kMatrix, {D::kEmbd, D::kKvDim}, 2, W::kSplit, P::kLayer, "", &LW::wk, nullptr},
    {"blk.{}.attn_qkv.weight[v]", nullptr, R::kMatrix, {D::kEmbd, D::kKvDim}, 2, W::kSplit, P::kLayer, "", &LW::wv, nullptr},
    rows::kAttnOutput,
    rows::kFfnNorm,
    {"blk.{}.ffn_up.weight", "model.layers.{}.mlp.gate_up_proj.weight", R::kFused, {D::kEmbd, D::kFf2}, 2, W::kAlways,
     P::kLayer, "n_ff mismatch? (phi3's ffn_up holds gate and up: 2 n_ff rows)", &LW::w_gate_up, nullptr},
    {"blk.{}.ffn_up.weight[gate]", nullptr, R::kMatrix, {D::kEmbd, D::kFf}, 2, W::kSplit, P::kLayer, "", &LW::w_gate,
     nullptr},
    {"blk.{}.ffn_up.weight[up]", nullptr, R::kMatrix, {D::kEmbd, D::kFf}, 2, W::kSplit, P::kLayer, "", &LW::w_up,
     nullptr},
    rows::kFfnDown,
};

std::span<const TensorSpec> phi3_tensors() { return kPhi3Tensors; }

}  // namespace

extern const ArchSpec kArchPhi3 = {
    .name = "phi3",
    .hf_model_types = {"phi3", nullptr, nullptr, nullptr},
    .qkv_bias = false,
    .qk_norm = false,
    .gguf_rope_interleaved = false,
    .tied_by_default = false,
    .tensors = phi3_tensors,
    .forward = llama_family_forward,
    .logits = llama_family_logits,
    .block = "pre-norm RMSNorm, fused q/k/v and gate/up (split into row views at load), RoPE, SwiGLU feed-forward",
};

}  // namespace laya
