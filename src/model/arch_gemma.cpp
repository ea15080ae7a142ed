// Gemma (1; CodeGemma): the Llama family's tensors and a Llama-like block
// with three differences: the embeddings are multiplied by sqrt(n_embd); the
// RMSNorms multiply by (1 + w) (convert_hf_to_gguf.py stores w + 1, and a
// Hugging Face folder's norms get + 1 at load: ArchSpec::hf_norm_shift); the
// feed-forward is GELU-gated (gelu_tanh(x·gateᵀ) * (x·upᵀ)). RoPE over halves,
// no permutation in GGUF; the output is the embedding. Gemma 2 and 3 (soft
// capping, sliding-window layers, extra norms) are arch_gemma2.cpp and
// arch_gemma3.cpp; the pieces they share with this one are gemma_blocks.h's.
#include <cmath>

#include "model/arch.h"
#include "model/forward.h"
#include "model/gemma_blocks.h"
#include "model/hparams.h"
#include "model/model.h"

namespace laya {

Status gemma_embed(const Model& model, Backend& be, ForwardScratch& s, const int32_t* tokens, int64_t n) {
  const int64_t E = model.hparams().n_embd;
  float* x = s.x.as<float>();
  LAYA_TRY(be.get_rows(model.weights().tok_embd, tokens, n, x));                       // (n, E) token embeddings
  return be.scale(x, n * E, static_cast<float>(std::sqrt(static_cast<double>(E))));  // times sqrt(n_embd)
}

Status gemma_gelu_gate(Backend& be, const HParams& hp, const LayerWeights& L, const Tensor& norm, const float* x,
                       ForwardScratch& s, int64_t n) {
  float *gate = s.gate.as<float>(), *up = s.up.as<float>();
  const MatmulOut gu[2] = {{&L.w_gate, gate}, {&L.w_up, up}};
  LAYA_TRY(be.norm_matmul_group(x, norm, hp.rms_eps, hp.n_embd, s.xn.as<float>(), gu, 2, n));
  LAYA_TRY(be.gelu(gate, n * hp.n_ff));
  return be.mul(up, gate, n * hp.n_ff);  // up = gelu(gate) * up
}

namespace {

Status gemma_forward(const Model& model, Backend& be, const RopeTables& rope, const KvLayerView& kv, ForwardScratch& s,
                     const int32_t* tokens, int64_t n, int64_t pos0) {
  const HParams& hp = model.hparams();
  const ModelWeights& W = model.weights();
  const int64_t E = hp.n_embd, HD = hp.head_dim;
  const AttentionShape ash{hp.n_head, hp.n_head_kv, HD, static_cast<float>(1.0 / std::sqrt(static_cast<double>(HD)))};
  float *x = s.x.as<float>(), *xn = s.xn.as<float>(), *q = s.q.as<float>(), *k = s.k.as<float>(), *v = s.v.as<float>();
  float *attn = s.attn.as<float>(), *up = s.up.as<float>(), *tmp = s.tmp.as<float>();

  LAYA_TRY(gemma_embed(model, be, s, tokens, n));
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const LayerWeights& L = W.layers[static_cast<size_t>(il)];
    // --- attention block ---
    const MatmulOut qkv[3] = {{&L.wq, q}, {&L.wk, k}, {&L.wv, v}};
    LAYA_TRY(be.norm_matmul_group(x, L.attn_norm, hp.rms_eps, E, xn, qkv, 3, n));  // xn = rms_norm(x) · (1 + w)
    KvLayerView kvl = kv;
    kvl.layer = il;
    LAYA_TRY(be.rope_kv_store(kvl, q, k, v, n, hp.n_head, hp.n_head_kv, HD, pos0, rope.full));
    LAYA_TRY(be.attention(kvl, q, n, pos0, ash, attn));
    LAYA_TRY(be.matmul_add(L.wo, attn, n, tmp, x));  // x += attn · woᵀ
    // --- feed-forward block (GELU-gated) ---
    LAYA_TRY(gemma_gelu_gate(be, hp, L, L.ffn_norm, x, s, n));
    LAYA_TRY(be.matmul_add(L.w_down, up, n, tmp, x));  // x += up · downᵀ
  }
  return Status::Ok();
}

}  // namespace

extern const ArchSpec kArchGemma = {
    .name = "gemma",
    .hf_model_types = {"gemma", nullptr, nullptr, nullptr},
    .qkv_bias = false,
    .qk_norm = false,
    .gguf_rope_interleaved = false,
    .tied_by_default = true,
    .tensors = llama_family_tensors,
    .forward = gemma_forward,
    .logits = llama_family_logits,
    .hf_norm_shift = 1.0f,
    .block = "pre-norm RMSNorm (1 + w), embeddings times sqrt(n_embd), RoPE, GELU (tanh)-gated feed-forward",
};

}  // namespace laya
