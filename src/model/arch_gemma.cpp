// Gemma (1; CodeGemma): the Llama family's tensors and a Llama-like block
// with three differences: the embeddings are multiplied by sqrt(n_embd); the
// RMSNorms multiply by (1 + w) (convert_hf_to_gguf.py stores w + 1, and a
// Hugging Face folder's norms get + 1 at load: ArchSpec::hf_norm_shift); the
// feed-forward is GELU-gated (gelu_tanh(x·gateᵀ) * (x·upᵀ)). RoPE over halves,
// no permutation in GGUF; the output is the embedding. Gemma 2 and 3 (soft
// capping, sliding-window layers, extra norms) are other architectures.
#include <cmath>

#include "model/arch.h"
#include "model/forward.h"
#include "model/hparams.h"
#include "model/model.h"

namespace laya {

namespace {

Status gemma_forward(const Model& model, Backend& be, const RopeTable& rope, const KvLayerView& kv, ForwardScratch& s,
                     const int32_t* tokens, int64_t n, int64_t pos0) {
  const HParams& hp = model.hparams();
  const ModelWeights& W = model.weights();
  const int64_t E = hp.n_embd, HD = hp.head_dim, F = hp.n_ff;
  const AttentionShape ash{hp.n_head, hp.n_head_kv, HD, static_cast<float>(1.0 / std::sqrt(static_cast<double>(HD)))};
  float *x = s.x.as<float>(), *xn = s.xn.as<float>(), *q = s.q.as<float>(), *k = s.k.as<float>(), *v = s.v.as<float>();
  float *attn = s.attn.as<float>(), *gate = s.gate.as<float>(), *up = s.up.as<float>(), *tmp = s.tmp.as<float>();

  LAYA_TRY(be.get_rows(W.tok_embd, tokens, n, x));                                    // (n, E) token embeddings
  LAYA_TRY(be.scale(x, n * E, static_cast<float>(std::sqrt(static_cast<double>(E)))));  // times sqrt(n_embd)

  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const LayerWeights& L = W.layers[static_cast<size_t>(il)];
    // --- attention block ---
    const MatmulOut qkv[3] = {{&L.wq, q}, {&L.wk, k}, {&L.wv, v}};
    LAYA_TRY(be.norm_matmul_group(x, L.attn_norm, hp.rms_eps, E, xn, qkv, 3, n));  // xn = rms_norm(x) · (1 + w)
    KvLayerView kvl = kv;
    kvl.layer = il;
    LAYA_TRY(be.rope_kv_store(kvl, q, k, v, n, hp.n_head, hp.n_head_kv, HD, pos0, rope));
    LAYA_TRY(be.attention(kvl, q, n, pos0, ash, attn));
    LAYA_TRY(be.matmul_add(L.wo, attn, n, tmp, x));  // x += attn · woᵀ
    // --- feed-forward block (GELU-gated) ---
    const MatmulOut gu[2] = {{&L.w_gate, gate}, {&L.w_up, up}};
    LAYA_TRY(be.norm_matmul_group(x, L.ffn_norm, hp.rms_eps, E, xn, gu, 2, n));
    LAYA_TRY(be.gelu(gate, n * F));
    LAYA_TRY(be.mul(up, gate, n * F));                 // up = gelu(gate) * up
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
