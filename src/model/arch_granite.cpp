// IBM Granite 3.x (dense; GraniteForCausalLM): the Llama family's tensors
// (convert_hf_to_gguf.py converts it as a Llama model, permuting q/k rows)
// and the Llama block with four multipliers (HParams): the embeddings times
// embedding_multiplier, the attention scores times attention_multiplier
// instead of 1/sqrt(head_dim), each block's output times
// residual_multiplier before it joins the residual stream, and the logits
// divided by logits_scaling. Granite code models of the "llama" model type
// load as llama; granitemoe / granitemoehybrid are other model types and
// refused by name.
#include <cmath>

#include "model/arch.h"
#include "model/forward.h"
#include "model/hparams.h"
#include "model/model.h"

namespace laya {

namespace {

// x += residual_scale · (in · wᵀ): the block's output, scaled, joins the residual stream.
Status add_scaled(Backend& be, const Tensor& w, const float* in, int64_t n, float s, float* tmp, float* x) {
  if (s == 1.0f) return be.matmul_add(w, in, n, tmp, x);
  LAYA_TRY(be.matmul(w, in, n, tmp));
  LAYA_TRY(be.scale(tmp, n * w.rows(), s));
  return be.add(x, tmp, n * w.rows());
}

Status granite_forward(const Model& model, Backend& be, const RopeTables& rope, const KvLayerView& kv,
                       ForwardScratch& s, const int32_t* tokens, int64_t n, int64_t pos0) {
  const HParams& hp = model.hparams();
  const ModelWeights& W = model.weights();
  const int64_t E = hp.n_embd;
  const float kq = hp.attn_scale > 0 ? hp.attn_scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(hp.head_dim)));
  const AttentionShape ash{hp.n_head, hp.n_head_kv, hp.head_dim, kq};
  float *x = s.x.as<float>(), *xn = s.xn.as<float>(), *q = s.q.as<float>(), *k = s.k.as<float>(), *v = s.v.as<float>();
  float *attn = s.attn.as<float>(), *gate = s.gate.as<float>(), *up = s.up.as<float>(), *tmp = s.tmp.as<float>();

  LAYA_TRY(be.get_rows(W.tok_embd, tokens, n, x));  // (n, E) token embeddings
  LAYA_TRY(be.scale(x, n * E, hp.embd_scale));       // times embedding_multiplier

  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const LayerWeights& L = W.layers[static_cast<size_t>(il)];
    // --- attention block ---
    const MatmulOut qkv[3] = {{&L.wq, q}, {&L.wk, k}, {&L.wv, v}};
    LAYA_TRY(be.norm_matmul_group(x, L.attn_norm, hp.rms_eps, E, xn, qkv, 3, n));  // xn = rms_norm(x), then q, k, v
    KvLayerView kvl = kv;
    kvl.layer = il;
    LAYA_TRY(be.rope_kv_store(kvl, q, k, v, n, hp.n_head, hp.n_head_kv, hp.head_dim, pos0, rope.full));
    LAYA_TRY(be.attention(kvl, q, n, pos0, ash, attn));                    // scores · attention_multiplier
    LAYA_TRY(add_scaled(be, L.wo, attn, n, hp.residual_scale, tmp, x));  // x += r · attn · woᵀ
    // --- feed-forward block (SwiGLU) ---
    LAYA_TRY(be.norm_matmul_swiglu(x, L.ffn_norm, hp.rms_eps, E, xn, L.w_gate, L.w_up, n, gate, up));
    LAYA_TRY(add_scaled(be, L.w_down, up, n, hp.residual_scale, tmp, x));  // x += r · up · downᵀ
  }
  return Status::Ok();
}

Status granite_logits(const Model& model, Backend& be, ForwardScratch& s, int64_t first, int64_t m, float* logits) {
  LAYA_TRY(llama_family_logits(model, be, s, first, m, logits));
  const HParams& hp = model.hparams();
  return be.scale(logits, m * hp.n_vocab, 1.0f / hp.logit_scale);  // divided by logits_scaling
}

}  // namespace

extern const ArchSpec kArchGranite = {
    .name = "granite",
    .hf_model_types = {"granite", nullptr, nullptr, nullptr},
    .qkv_bias = false,
    .qk_norm = false,
    .gguf_rope_interleaved = true,
    .tied_by_default = false,
    .tensors = llama_family_tensors,
    .forward = granite_forward,
    .logits = granite_logits,
    .block = "pre-norm RMSNorm, RoPE, SwiGLU feed-forward, embedding / attention / residual / logit multipliers",
};

}  // namespace laya
