// The forward pass of the Llama family (Llama, Qwen2, Qwen3), written once
// against the Backend interface.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "kv/kv_cache.h"
#include "model/model.h"

namespace laya {

// Activations for up to n_batch tokens, allocated once.
struct ForwardScratch {
  ForwardScratch(const HParams& hp, int64_t n_batch);
  int64_t n_batch;
  std::vector<float> x;     // (n_batch, n_embd)   residual stream
  std::vector<float> xn;    // (n_batch, n_embd)   normalised input of a block
  std::vector<float> q;     // (n_batch, q_dim)
  std::vector<float> k;     // (n_batch, kv_dim)
  std::vector<float> v;     // (n_batch, kv_dim)
  std::vector<float> attn;  // (n_batch, q_dim)
  std::vector<float> gate;  // (n_batch, n_ff)
  std::vector<float> up;    // (n_batch, n_ff)
  std::vector<float> tmp;   // (n_batch, n_embd)   block output before the residual add
  std::array<const std::vector<float>*, 9> buffers() const { return {&x, &xn, &q, &k, &v, &attn, &gate, &up, &tmp}; }
};

// Runs tokens[0..n) at positions pos0.. (n <= scratch.n_batch), appending to
// the cache. logits: (n, n_vocab) when all_logits, else (1, n_vocab) for the
// last token; nullptr computes no logits (prefill of a prefix).
void transformer_forward(const Model& model, Backend& be, const RopeTable& rope, KvCache& kv, ForwardScratch& s,
                         const int32_t* tokens, int64_t n, int64_t pos0, float* logits, bool all_logits);

}  // namespace laya
