// The forward pass of the Llama family (Llama, Qwen2, Qwen3), written once
// against the Backend interface: every buffer it touches is backend memory.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "model/model.h"

namespace laya {

// Activations for up to n_batch tokens, in backend memory, allocated once.
struct ForwardScratch {
  static Result<ForwardScratch> create(Backend& be, const HParams& hp, int64_t n_batch);
  int64_t n_batch = 0;
  Buffer x;     // (n_batch, n_embd)   residual stream
  Buffer xn;    // (n_batch, n_embd)   normalised input of a block
  Buffer q;     // (n_batch, q_dim)
  Buffer k;     // (n_batch, kv_dim)
  Buffer v;     // (n_batch, kv_dim)
  Buffer attn;  // (n_batch, q_dim)
  Buffer gate;  // (n_batch, n_ff)
  Buffer up;    // (n_batch, n_ff)
  Buffer tmp;   // (n_batch, n_embd)   block output before the residual add
};

// Runs tokens[0..n) (host memory) at positions pos0.. (n <= scratch.n_batch)
// through every layer, writing their K/V into the blocks of `kv` (whose
// positions [pos0, pos0 + n) must be writable). Leaves the last layer's
// output in scratch.x.
Status transformer_forward(const Model& model, Backend& be, const RopeTable& rope, const KvLayerView& kv,
                           ForwardScratch& s, const int32_t* tokens, int64_t n, int64_t pos0);

// logits (m, n_vocab), backend memory = output(norm(scratch.x rows [first, first + m))),
// m <= scratch.n_batch - first.
Status transformer_logits(const Model& model, Backend& be, ForwardScratch& s, int64_t first, int64_t m, float* logits);

}  // namespace laya
