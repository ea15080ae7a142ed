#include "model/transformer.h"

#include <cmath>

namespace laya {

ForwardScratch::ForwardScratch(const HParams& hp, int64_t nb)
    : n_batch(nb),
      x(static_cast<size_t>(nb * hp.n_embd)),
      xn(static_cast<size_t>(nb * hp.n_embd)),
      q(static_cast<size_t>(nb * hp.q_dim())),
      k(static_cast<size_t>(nb * hp.kv_dim())),
      v(static_cast<size_t>(nb * hp.kv_dim())),
      attn(static_cast<size_t>(nb * hp.q_dim())),
      gate(static_cast<size_t>(nb * hp.n_ff)),
      up(static_cast<size_t>(nb * hp.n_ff)),
      tmp(static_cast<size_t>(nb * hp.n_embd)) {}

void transformer_forward(const Model& model, Backend& be, const RopeTable& rope, KvCache& kv, ForwardScratch& s,
                         const int32_t* tokens, int64_t n, int64_t pos0, float* logits, bool all_logits) {
  const HParams& hp = model.hparams();
  const ModelWeights& W = model.weights();
  const int64_t E = hp.n_embd, HD = hp.head_dim, KV = hp.kv_dim();
  const AttentionShape ash{hp.n_head, hp.n_head_kv, HD, static_cast<float>(1.0 / std::sqrt(static_cast<double>(HD)))};
  auto f32 = [](const Tensor& t) { return reinterpret_cast<const float*>(t.data); };

  // (n, E) token embeddings
  be.get_rows(W.tok_embd, tokens, n, s.x.data());

  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const LayerWeights& L = W.layers[static_cast<size_t>(il)];
    // --- attention block ---
    be.rms_norm(s.x.data(), f32(L.attn_norm), n, E, hp.rms_eps, s.xn.data());
    const MatmulOut qkv[3] = {{&L.wq, s.q.data()},   // (n, n_head * HD)
                              {&L.wk, s.k.data()},   // (n, KV)
                              {&L.wv, s.v.data()}};  // (n, KV)
    be.matmul_group(qkv, 3, s.xn.data(), n);
    if (L.bq.present()) {
      be.add_bias(s.q.data(), f32(L.bq), n, hp.q_dim());
      be.add_bias(s.k.data(), f32(L.bk), n, KV);
      be.add_bias(s.v.data(), f32(L.bv), n, KV);
    }
    if (L.q_norm.present()) {  // qwen3: RMSNorm over each head
      be.rms_norm(s.q.data(), f32(L.q_norm), n * hp.n_head, HD, hp.rms_eps, s.q.data());
      be.rms_norm(s.k.data(), f32(L.k_norm), n * hp.n_head_kv, HD, hp.rms_eps, s.k.data());
    }
    be.rope(s.q.data(), n, hp.n_head, HD, pos0, rope);
    be.rope(s.k.data(), n, hp.n_head_kv, HD, pos0, rope);
    const KvLayerView kvl = kv.layer(il);
    be.kv_store(kvl, s.k.data(), s.v.data(), n, pos0);
    be.attention(kvl, s.q.data(), n, pos0, ash, s.attn.data());  // (n, n_head * HD)
    be.matmul(L.wo, s.attn.data(), n, s.tmp.data());              // (n, E)
    be.add(s.x.data(), s.tmp.data(), n * E);
    // --- feed-forward block (SwiGLU) ---
    be.rms_norm(s.x.data(), f32(L.ffn_norm), n, E, hp.rms_eps, s.xn.data());
    // (n, n_ff) = silu(xn · gateᵀ) * (xn · upᵀ)
    be.matmul_swiglu(L.w_gate, L.w_up, s.xn.data(), n, s.gate.data(), s.up.data());
    be.matmul(L.w_down, s.up.data(), n, s.tmp.data());  // (n, E)
    be.add(s.x.data(), s.tmp.data(), n * E);
  }
  kv.set_n_past(pos0 + n);
  if (!logits) return;
  // Final norm + output projection, for every token or only the last.
  const int64_t first = all_logits ? 0 : n - 1;
  const int64_t m = n - first;
  be.rms_norm(s.x.data() + first * E, f32(W.output_norm), m, E, hp.rms_eps, s.xn.data());
  be.matmul(W.output, s.xn.data(), m, logits);  // (m, n_vocab)
}

}  // namespace laya
