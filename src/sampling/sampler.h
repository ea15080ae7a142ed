// Token sampler: repetition penalty, temperature, top-k, top-p (nucleus),
// min-p and a seeded draw. Every buffer is allocated once in the constructor
// (sized n_vocab), so sample() never allocates. The random numbers come from
// laya's own xoshiro256** (seeded through splitmix64), so a given seed gives
// the same token sequence on every platform and standard library.
//
// Order of operations in sample() (Hugging Face's order):
//   1. repetition penalty over the last `repeat_last_n` tokens of `history`
//      (each distinct token once: logit > 0 → logit / penalty, else × penalty);
//   2. temperature <= 0 → greedy: the arg-max (lowest id on ties); stop;
//   3. logits / temperature;
//   4. top-k: keep the k largest (0 = off);
//   5. softmax over the survivors;
//   6. top-p: keep the smallest prefix, by descending probability, whose mass
//      reaches top_p (always at least one token; 1 = off);
//   7. min-p: drop tokens with p < min_p × p_max (0 = off);
//   8. draw from the renormalized survivors.
// Ties in the sort are broken by token id, so the candidate order (and hence
// the draw) does not depend on the sort implementation. NaN logits count as -inf.
// Masked token ids (a TokenMask: the sampler's own, plus an optional one per
// call) count as -inf before step 1, on the greedy and random paths alike.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/status.h"

namespace laya {

namespace tok {
class Tokenizer;
}

// A set of token ids that may never be sampled (a logit mask). Built once: a
// bitmap for lookups plus the list of ids that sample() walks, so applying it
// costs no allocation and O(masked ids) time.
class TokenMask {
 public:
  TokenMask() = default;  // masks nothing
  explicit TokenMask(int n_vocab) : bits_(static_cast<size_t>(n_vocab > 0 ? n_vocab : 0), 0) {}

  // Ids outside [0, n_vocab) are ignored; adding an id twice is harmless.
  void add(int32_t id);
  bool contains(int32_t id) const { return id >= 0 && static_cast<size_t>(id) < bits_.size() && bits_[id]; }
  std::span<const int32_t> ids() const { return ids_; }  // in the order added
  bool empty() const { return ids_.empty(); }
  int n_vocab() const { return static_cast<int>(bits_.size()); }

 private:
  std::vector<uint8_t> bits_;
  std::vector<int32_t> ids_;
};

// The two token sets a plain-text continuation needs, from the tokenizer's
// token types (one place for every command):
//   eog     — end of generation: tk.is_eog(id), or id == eos_id (the model's);
//   control — every other control token (FIM markers, BOS, role markers...):
//             never part of a continuation, so it is the sampler's mask.
// Ids at or past min(n_vocab, tk.n_vocab()) are in neither.
struct ContinuationMasks {
  TokenMask control;
  TokenMask eog;
};
ContinuationMasks continuation_masks(const tok::Tokenizer& tk, int n_vocab, int32_t eos_id = -1);

struct SamplerParams {
  float temperature = 0.0f;     // 0 (or < 0) = greedy
  int top_k = 0;                // 0 = off
  float top_p = 1.0f;           // 1 = off; must be in (0, 1]
  float min_p = 0.0f;           // 0 = off; must be in [0, 1]
  float repeat_penalty = 1.0f;  // 1 = off; must be > 0
  int repeat_last_n = 64;       // 0 = off, -1 = the whole history
  uint64_t seed = 0;
};

// xoshiro256** 1.0 (Blackman & Vigna), state filled by splitmix64(seed).
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }
  void reseed(uint64_t seed);
  uint64_t next();
  // Uniform in [0, 1) with 53 random bits; exact and platform-independent.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t s_[4];
};

class Sampler {
 public:
  // Out-of-range parameters are clamped (see validate() to reject them instead).
  explicit Sampler(SamplerParams params, int n_vocab);

  // InvalidArgument naming the parameter when a value is out of range.
  static Status validate(const SamplerParams& params, int n_vocab);

  // `logits` holds n_vocab values (not modified); `history` the tokens so far
  // (prompt + generated), used only for the repetition penalty. Ids outside
  // [0, n_vocab) in history are ignored. `extra`, when given, masks more ids
  // for this call only (e.g. end-of-generation on the first token). The
  // result is never a masked id unless every id is masked. Never allocates.
  int32_t sample(const float* logits, std::span<const int32_t> history, const TokenMask* extra = nullptr);
  // The same choice where `draft` was proposed (a drafted token whose pass
  // computed these logits): speculative sampling's rule for a draft that is
  // one token for sure. `draft` is taken with its probability p(draft) under
  // the distribution sample() draws from; otherwise the draw is from that
  // distribution without it, renormalised. The result is distributed exactly
  // as sample()'s (p(d) for d; (1 - p(d)) · p(x) / (1 - p(d)) = p(x) for any
  // other x), so drafting changes the draws made, never their distribution.
  // Greedy: the arg-max, as sample().
  int32_t sample_given_draft(const float* logits, std::span<const int32_t> history, int32_t draft,
                             const TokenMask* extra = nullptr);

  // Ids never sampled by any call (see continuation_masks()); empty by default.
  void set_mask(TokenMask mask) { mask_ = std::move(mask); }
  const TokenMask& mask() const { return mask_; }

  // Restart the random sequence (same seed → same draws as a new Sampler).
  void reseed(uint64_t seed) { rng_.reseed(seed); }

  const SamplerParams& params() const { return params_; }
  int n_vocab() const { return n_vocab_; }

 private:
  // Steps 1-7 of sample(): the candidates idx_[0, m) with weights work_ (sum
  // *z); -1 when the choice is *best without a draw (greedy, or nothing to draw from).
  int candidates(const float* logits, std::span<const int32_t> history, const TokenMask* extra, double* z,
                 int32_t* best);
  // The steps of sample(), in order; work_ / idx_ carry the state between them.
  void load_logits(const float* logits, const TokenMask* extra);
  void apply_repetition_penalty(std::span<const int32_t> history);
  int32_t argmax(const TokenMask* extra) const;
  int top_k(bool* sorted);
  int top_p(int m, double* z, bool* sorted);
  int min_p(int m, double* z);
  int32_t draw(int m, double z, int32_t fallback);

  SamplerParams params_;
  int n_vocab_;
  Rng rng_;
  TokenMask mask_;
  std::vector<float> work_;      // penalized / scaled logits, then probabilities
  std::vector<int32_t> idx_;     // candidate token ids
  std::vector<uint8_t> seen_;    // repetition-penalty marks (cleared after use)
};

}  // namespace laya
