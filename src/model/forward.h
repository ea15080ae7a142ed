// What an architecture's forward pass works with (model/arch.h: an ArchSpec
// names its forward and logits functions): activations in backend memory,
// allocated once per engine, and the contract both functions keep. Every
// buffer a forward pass touches is backend memory; the arithmetic is asked
// of the Backend (fused ops included), never done here.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "model/model.h"

namespace laya {

// Activations for up to n_batch tokens, in backend memory, allocated once.
// Sized for the Llama family's block; a family that needs another buffer
// adds it here (a forward function may leave any of them unused).
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

// The RoPE angles a forward pass rotates with: `full` for every layer but the
// sliding-window layers of a model whose local layers have a base of their
// own (Gemma 3: rope_local_base_freq), which take `local` (the same table
// otherwise).
struct RopeTables {
  RopeTable full, local;
  const RopeTable& of_layer(const HParams& hp, int64_t il) const { return hp.window(il) > 0 ? local : full; }
};

// ArchSpec::forward: runs tokens[0..n) (host memory) at positions pos0..
// (n <= scratch.n_batch) through every layer, writing their K/V into the
// blocks of `kv` (whose positions [pos0, pos0 + n) must be writable). Leaves
// the last layer's output in scratch.x.
//
// ArchSpec::logits: logits (m, n_vocab), backend memory, of scratch.x rows
// [first, first + m) (m <= scratch.n_batch - first): the final norm and the
// output projection.

}  // namespace laya
