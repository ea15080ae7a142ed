// The Llama family (llama, qwen2, qwen3): its tensors, as convert_hf_to_gguf.py
// names, shapes and orders them, and its block — pre-norm attention with RoPE,
// then a SwiGLU feed-forward, each added to the residual stream. The family's
// optional tensors (q/k/v biases: qwen2; per-head q/k norms: qwen3) are used
// where the model has them (Model::flags()). Another family is a file of its
// own with its table and its forward function (model/arch.h).
#include <cmath>
#include <string>

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

// Model-wide tensors: in the order the loader checks them (placement says
// where a file stores them); then one layer's, in file order. The family's
// rows are the ones other families share (tensor_rows.h) but rope_freqs.
const TensorSpec kTensors[] = {
    rows::kTokenEmbd,
    rows::kOutputNorm,
    rows::kOutput,
    // Llama 3 rope scaling's per-frequency divisors (the file decides).
    {"rope_freqs.weight", nullptr, R::kRopeFreqs, {D::kHalfHeadDim}, 1, W::kRopeFreqs, P::kBeforeLayers,
     "head_dim mismatch?", nullptr, nullptr},

    rows::kAttnNorm,
    rows::kAttnQ,
    rows::kAttnK,
    rows::kAttnV,
    rows::kAttnQBias,
    rows::kAttnKBias,
    rows::kAttnVBias,
    rows::kAttnOutput,
    rows::kAttnQNorm,
    rows::kAttnKNorm,
    rows::kFfnNorm,
    rows::kFfnGate,
    rows::kFfnUp,
    rows::kFfnDown,
};

}  // namespace

std::span<const TensorSpec> llama_family_tensors() { return kTensors; }

Status llama_family_forward(const Model& model, Backend& be, const RopeTables& rope, const KvLayerView& kv,
                            ForwardScratch& s, const int32_t* tokens, int64_t n, int64_t pos0) {
  const HParams& hp = model.hparams();
  const TensorFlags& has = model.flags();
  const ModelWeights& W = model.weights();
  const int64_t E = hp.n_embd, HD = hp.head_dim, KV = hp.kv_dim();
  AttentionShape ash{hp.n_head, hp.n_head_kv, HD, static_cast<float>(1.0 / std::sqrt(static_cast<double>(HD)))};
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
    LAYA_TRY(be.rope_kv_store(kvl, q, k, v, n, hp.n_head, hp.n_head_kv, HD, pos0, rope.full));  // rotate q, k; store k, v
    ash.window = hp.window(il);  // sliding_window (Phi-3, Mistral v0.1): every layer
    LAYA_TRY(be.attention(kvl, q, n, pos0, ash, attn));  // (n, n_head * HD)
    LAYA_TRY(be.matmul_add(L.wo, attn, n, tmp, x));      // x += attn · woᵀ  (n, E)
    // --- feed-forward block (SwiGLU) ---
    // (n, n_ff) = silu(xn · gateᵀ) * (xn · upᵀ), xn = rms_norm(x)
    LAYA_TRY(be.norm_matmul_swiglu(x, L.ffn_norm, hp.rms_eps, E, xn, L.w_gate, L.w_up, n, gate, up));
    LAYA_TRY(be.matmul_add(L.w_down, up, n, tmp, x));  // x += up · downᵀ  (n, E)
  }
  return Status::Ok();
}

Status llama_family_logits(const Model& model, Backend& be, ForwardScratch& s, int64_t first, int64_t m,
                           float* logits) {
  const HParams& hp = model.hparams();
  const ModelWeights& W = model.weights();
  const int64_t E = hp.n_embd;
  // Final norm + output projection of the rows asked for.
  const MatmulOut out{&W.output, logits};  // (m, n_vocab)
  return be.norm_matmul_group(s.x.as<float>() + first * E, W.output_norm, hp.rms_eps, E, s.xn.as<float>(), &out, 1, m);
}

}  // namespace laya
