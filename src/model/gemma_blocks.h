// What Gemma's generations share (arch_gemma.cpp, arch_gemma2.cpp,
// arch_gemma3.cpp): the scaled embeddings, the GELU-gated feed-forward's
// input, and Gemma 2's block, which Gemma 3 runs with per-head q/k norms.
#pragma once

#include <cstdint>
#include <span>

#include "model/arch.h"
#include "model/forward.h"

namespace laya {

// s.x (n, n_embd) = the tokens' embeddings times sqrt(n_embd).
Status gemma_embed(const Model& model, Backend& be, ForwardScratch& s, const int32_t* tokens, int64_t n);

// s.up (n, n_ff) = gelu_tanh(xn · gateᵀ) * (xn · upᵀ), xn = rms_norm(x) · norm (left in s.xn).
Status gemma_gelu_gate(Backend& be, const HParams& hp, const LayerWeights& L, const Tensor& norm, const float* x,
                       ForwardScratch& s, int64_t n);

// Gemma 2's tensors (the Gemma 3 q/k norms under When::kQkNorm) and block:
// RMSNorm (1 + w) before and after attention and feed-forward, soft-capped
// scores, sliding-window layers, queries scaled by query_pre_attn_scalar^-0.5;
// per-head q/k norms where the model has them (Model::flags()).
std::span<const TensorSpec> gemma2_family_tensors();
Status gemma2_family_forward(const Model& model, Backend& be, const RopeTables& rope, const KvLayerView& kv,
                             ForwardScratch& s, const int32_t* tokens, int64_t n, int64_t pos0);
// The Llama family's logits, soft-capped (final_logit_softcapping) where set.
Status gemma2_family_logits(const Model& model, Backend& be, ForwardScratch& s, int64_t first, int64_t m, float* logits);

}  // namespace laya
