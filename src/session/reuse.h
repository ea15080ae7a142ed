// Reuse: a session's sequence on the engine and everything kept so that the
// next keystroke computes as little as possible. It alone decides what must
// be computed for a prompt:
//   1. typing through: the prompt is the last prompt plus the first k tokens
//      of the last greedy generation (the chain): the rest of the chain is
//      the new suggestion's start, with no forward pass (take_chain);
//   2. else the common prefix of the cached tokens and the prompt is kept and
//      only the rest is computed (prefill), starting from
//        - the logits already current for exactly this prompt, or
//        - the logits saved at the end of the last prefilled prompt (the same
//          prompt as a keystroke ago), or
//        - blocks of the engine's pool cached under their content keys (a
//          new or released sequence, a switch between plain and FIM prompts,
//          a moved window, the first prompt after a hot swap).
// Every reuse is taken only where it equals what a fresh computation gives,
// so a session's suggestions equal a fresh session's.
//
// As the generator's DecodeTarget it feeds the generated tokens.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "sampling/sampler.h"
#include "session/generator.h"
#include "session/prompt_plan.h"
#include "tokenizer/tokenizer.h"

namespace laya {

// The last greedy generation: the tokens chosen after a prompt of `start`
// tokens under healing constraint `heal`. The sequence holds the prompt plus
// a prefix of it.
struct Chain {
  std::vector<int32_t> tokens;
  size_t start = 0;
  std::string heal;
  void clear() {
    tokens.clear();
    start = 0;
    heal.clear();
  }
};

// What a prefill did, for the suggestion's timings.
struct PrefillReport {
  int64_t reused = 0;    // prompt tokens whose K/V were already cached
  int64_t computed = 0;  // prompt tokens fed to the model
  double ms = 0;
  bool cancelled = false;
  int64_t drafted = 0;   // draft tokens fed after the prompt in the same pass (see prefill())
};

class Reuse final : public DecodeTarget {
 public:
  Reuse(Engine& eng, const tok::Tokenizer& tok) : eng_(&eng), tok_(&tok), seq_(eng.new_sequence()) {}

  // Another model (a hot swap): its sequence (a resumed one, or null for a
  // new one); nothing of the old model's is kept. The first prefill then
  // adopts what the new pool holds for the prompt.
  void rebind(Engine& eng, const tok::Tokenizer& tok, std::unique_ptr<Sequence> seq);
  // The sequence, handed out (a hot swap keeps it for a swap back; a
  // prewarm hands it over); rebind() gives the reuse a sequence again.
  std::unique_ptr<Sequence> take_sequence() { return std::move(seq_); }
  // The next prefill adopts what the pool holds for the prompt (a prewarm on
  // a model this session may have used before).
  void adopt_cached_next() { adopt_cached_ = true; }

  // Case 1 above: how many chain tokens the suggestion for `p` starts with
  // (at most max_tokens; 0: none). `greedy`: this suggestion and the one
  // that made the chain choose greedily (only then is the chain what a fresh
  // computation would choose). Re-bases the chain on `p`.
  size_t take_chain(const Prompt& p, int max_tokens, bool greedy, const ContinuationMasks& masks);
  // Case 2 above: the sequence then holds `prompt` with its logits current
  // (unless cancelled: then a prefix of it). `draft`: tokens proposed to
  // follow the prompt, fed in the same pass when one is due anyway and the
  // pass stays small enough to compute every row as a decode step would
  // (Backend::exact_rows()); r->drafted says how many were (0: none). Their
  // logits are then current too, for the generator to check the draft with.
  Status prefill(std::span<const int32_t> prompt, const std::atomic<bool>& cancel, PrefillReport* r,
                 std::span<const int32_t> draft = {});
  // Cuts the sequence back to n tokens.
  Status truncate_to(int64_t n);

  // The chain: started after a prefill, grown by each generation.
  Chain& chain() { return chain_; }
  const Chain& chain() const { return chain_; }
  void drop_chain() { chain_.clear(); }

  // DecodeTarget.
  const float* first_logits() override;
  const float* logits_at(int64_t at) override;
  Status feed(int64_t at, int32_t token) override;
  int64_t n_ctx() const override { return seq_->n_ctx(); }
  // Drafted tokens: as many as the backend computes row by row exactly as
  // one-token passes (so a suggestion is the same with drafting or without).
  int64_t max_feed() const override { return std::min(eng_->backend().exact_rows(), max_rows_); }
  // Passes of at most n tokens keep their rows (a draft of n - 1 tokens and
  // the token before it, or the prompt's rest and a draft): their buffers are
  // allocated now, so that no keystroke allocates (n * n_vocab floats:
  // 0.44 MB for the default model's 9 rows). 1: no multi-token passes.
  void reserve_rows(int64_t n);
  Status feed_many(int64_t at, std::span<const int32_t> tokens) override;
  Status cut(int64_t n) override { return truncate_to(n); }

  const Sequence& sequence() const { return *seq_; }
  // The logits at the end of the last prefilled prompt (n_vocab floats), or
  // nullptr; and the prompt length they follow.
  const float* saved_logits() const { return saved_at_ >= 0 ? saved_logits_.data() : nullptr; }
  int64_t saved_at() const { return saved_at_; }
  // A restored state (session_store.h): the sequence's K/V from kv_src, then
  // the saved logits and the chain where they fit it.
  Status restore(std::span<const int32_t> tokens, const std::function<const uint8_t*(int64_t block)>& kv_src);
  void restore_logits(std::vector<float> logits, int64_t at);

 private:
  Engine* eng_;
  const tok::Tokenizer* tok_;
  std::unique_ptr<Sequence> seq_;
  // n_past of the sequence when its logits were last computed (-1: stale);
  // they serve a prompt only when it ends exactly there.
  int64_t logits_at_ = -1;
  // The logits at the end of the last prefilled prompt (saved_at_ tokens;
  // -1: none): the next keystroke with the same prompt starts from them.
  std::vector<float> saved_logits_;
  int64_t saved_at_ = -1;
  const float* first_logits_ = nullptr;  // set when the next generation starts from saved_logits_
  // The logits of a multi-token pass (feed_many): row r follows the first
  // rows_at_ + r tokens; rows_n_ rows are valid (a cut drops those past it).
  std::vector<float> rows_;
  int64_t rows_at_ = 0, rows_n_ = 0;
  int64_t max_rows_ = 1;
  std::vector<int32_t> pass_;  // a prefill's tokens with a draft after them
  bool adopt_cached_ = false;  // rebound since the last prefill: adopt the pool's cached prefix
  Chain chain_;
};

}  // namespace laya
