#include "model/transformer.h"

#include <cmath>

namespace laya {

Result<ForwardScratch> ForwardScratch::create(Backend& be, const HParams& hp, int64_t nb) {
  ForwardScratch s;
  s.n_batch = nb;
  auto floats = [&](Buffer* b, int64_t per_token) -> Status {
    LAYA_ASSIGN_OR_RETURN(*b, be.alloc(static_cast<size_t>(nb * per_token) * sizeof(float), "the forward scratch"));
    return Status::Ok();
  };
  LAYA_TRY(floats(&s.x, hp.n_embd));
  LAYA_TRY(floats(&s.xn, hp.n_embd));
  LAYA_TRY(floats(&s.q, hp.q_dim()));
  LAYA_TRY(floats(&s.k, hp.kv_dim()));
  LAYA_TRY(floats(&s.v, hp.kv_dim()));
  LAYA_TRY(floats(&s.attn, hp.q_dim()));
  LAYA_TRY(floats(&s.gate, hp.n_ff));
  LAYA_TRY(floats(&s.up, hp.n_ff));
  LAYA_TRY(floats(&s.tmp, hp.n_embd));
  return s;
}

Status transformer_forward(const Model& model, Backend& be, const RopeTable& rope, const KvLayerView& kv,
                           ForwardScratch& s, const int32_t* tokens, int64_t n, int64_t pos0) {
  const HParams& hp = model.hparams();
  const TensorFlags& has = model.flags();
  const ModelWeights& W = model.weights();
  const int64_t E = hp.n_embd, HD = hp.head_dim, KV = hp.kv_dim();
  const AttentionShape ash{hp.n_head, hp.n_head_kv, HD, static_cast<float>(1.0 / std::sqrt(static_cast<double>(HD)))};
  float *x = s.x.as<float>(), *xn = s.xn.as<float>(), *q = s.q.as<float>(), *k = s.k.as<float>(), *v = s.v.as<float>();
  float *attn = s.attn.as<float>(), *gate = s.gate.as<float>(), *up = s.up.as<float>(), *tmp = s.tmp.as<float>();

  LAYA_TRY(be.get_rows(W.tok_embd, tokens, n, x));  // (n, E) token embeddings

  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const LayerWeights& L = W.layers[static_cast<size_t>(il)];
    // --- attention block ---
    const MatmulOut qkv[3] = {{&L.wq, q},   // (n, n_head * HD)
                              {&L.wk, k},   // (n, KV)
                              {&L.wv, v}};  // (n, KV)
    LAYA_TRY(be.norm_matmul_group(x, L.attn_norm, hp.rms_eps, E, xn, qkv, 3, n));  // xn = rms_norm(x), then q, k, v
    if (has.qkv_bias) {  // qwen2
      LAYA_TRY(be.add_bias(q, L.bq, n, hp.q_dim()));
      LAYA_TRY(be.add_bias(k, L.bk, n, KV));
      LAYA_TRY(be.add_bias(v, L.bv, n, KV));
    }
    if (has.qk_norm) {  // qwen3: RMSNorm over each head
      LAYA_TRY(be.rms_norm(q, L.q_norm, n * hp.n_head, HD, hp.rms_eps, q));
      LAYA_TRY(be.rms_norm(k, L.k_norm, n * hp.n_head_kv, HD, hp.rms_eps, k));
    }
    KvLayerView kvl = kv;
    kvl.layer = il;
    LAYA_TRY(be.rope_kv_store(kvl, q, k, v, n, hp.n_head, hp.n_head_kv, HD, pos0, rope));  // rotate q, k; store k, v
    LAYA_TRY(be.attention(kvl, q, n, pos0, ash, attn));  // (n, n_head * HD)
    LAYA_TRY(be.matmul_add(L.wo, attn, n, tmp, x));      // x += attn · woᵀ  (n, E)
    // --- feed-forward block (SwiGLU) ---
    // (n, n_ff) = silu(xn · gateᵀ) * (xn · upᵀ), xn = rms_norm(x)
    LAYA_TRY(be.norm_matmul_swiglu(x, L.ffn_norm, hp.rms_eps, E, xn, L.w_gate, L.w_up, n, gate, up));
    LAYA_TRY(be.matmul_add(L.w_down, up, n, tmp, x));  // x += up · downᵀ  (n, E)
  }
  return Status::Ok();
}

Status transformer_logits(const Model& model, Backend& be, ForwardScratch& s, int64_t first, int64_t m, float* logits) {
  const HParams& hp = model.hparams();
  const ModelWeights& W = model.weights();
  const int64_t E = hp.n_embd;
  // Final norm + output projection of the rows asked for.
  const MatmulOut out{&W.output, logits};  // (m, n_vocab)
  return be.norm_matmul_group(s.x.as<float>() + first * E, W.output_norm, hp.rms_eps, E, s.xn.as<float>(), &out, 1, m);
}

}  // namespace laya
