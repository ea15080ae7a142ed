// Generator: the one decode loop. Session suggestions, `laya complete` and
// chat (/v1/chat/completions) all produce their tokens here, under one set of
// rules:
//   - a token is chosen from the logits after the prompt and the tokens so
//     far: by the sampler, or, while healed bytes are pending (token healing),
//     greedily among the tokens that start with them;
//   - end of generation: a token of the eog mask, a control token (chosen
//     only when every other token is masked), or the caller's end token (a
//     chat template's end of turn); never_empty forbids it as the first token;
//   - the output stops at max_tokens, at the context, at the end of the line
//     (single_line), at a stop string (stop_strings.h), at the deadline (no
//     step is started that would overrun it), at cancellation (checked before
//     each forward pass), or when the reader of the text goes away;
//   - text is passed on in whole UTF-8 characters, healed bytes left out.
//
// Known tokens: the first tokens may be given (`known`): tokens shown to be
// the loop's own choices without a forward pass (a session's last greedy
// chain that the user typed through).
//
// Drafted tokens: where a forward pass is due, a Drafter (draft.h) may
// propose the next few tokens; the pass then feeds the last chosen token and
// the draft together and returns the logits after each, and the loop goes on
// choosing exactly as it would have: while its choice equals the drafted
// token, the next logits are already there; at the first difference the
// drafted tokens' K/V are cut away and the choice goes on from there. So
// the output is the same with or without drafts, only the number of passes
// differs (on a backend whose multi-token passes compute each row as a
// one-token pass would: Backend::exact_rows(); the CPU's do).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "sampling/sampler.h"
#include "session/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace laya {

// The sequence a generation extends: the prompt is in it; tokens are fed one
// at a time.
class DecodeTarget {
 public:
  virtual ~DecodeTarget() = default;
  // The logits after the prompt (before the first generated token).
  virtual const float* first_logits() = 0;
  // The logits after the first `at` tokens (prompt + generated) when they are
  // current, else nullptr (feed() computes them).
  virtual const float* logits_at(int64_t at) = 0;
  // Feeds `token` as the at-th token, so that logits_at(at) is current.
  virtual Status feed(int64_t at, int32_t token) = 0;
  virtual int64_t n_ctx() const = 0;
  // The most tokens feed_many() takes (1: none; no drafting).
  virtual int64_t max_feed() const { return 1; }
  // Feeds tokens[0..n) as the at-th, (at+1)-th, ... tokens in one pass, so
  // that logits_at(at) .. logits_at(at + n - 1) are current.
  virtual Status feed_many(int64_t at, std::span<const int32_t> tokens) {
    return tokens.size() == 1 ? feed(at, tokens[0]) : Status(StatusCode::kInternal, "feed_many: not supported");
  }
  // Cuts the sequence back to its first n tokens (rejected drafted tokens).
  virtual Status cut(int64_t n) = 0;
};

// Proposes tokens to follow a context (draft.h), and hears how they fared.
class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to `max` tokens likely to follow `context` (the prompt's tail and the
  // tokens chosen so far), written to `out`; returns how many.
  virtual int propose(std::span<const int32_t> context, int max, int32_t* out) = 0;
  // The last proposal's fate: its first `accepted` tokens were chosen.
  virtual void feedback(int /*proposed*/, int /*accepted*/) {}
  // A forward pass of the generation took `ms` for `rows` tokens (1: no
  // draft): what a drafted token costs on this backend.
  virtual void observe_pass(int /*rows*/, double /*ms*/) {}
  // A generation starts: the contexts that follow extend a new one.
  virtual void begin() {}
};

// A sequence that holds just the prompt and what is generated after it (chat,
// `laya complete`): every token is fed as it comes.
class PlainSequence final : public DecodeTarget {
 public:
  PlainSequence(Engine& eng, Sequence& seq) : eng_(eng), seq_(seq) {}
  const float* first_logits() override { return seq_.logits(); }
  const float* logits_at(int64_t at) override { return seq_.n_past() == at ? seq_.logits() : nullptr; }
  Status feed(int64_t, int32_t token) override { return eng_.decode(seq_, token); }
  int64_t n_ctx() const override { return seq_.n_ctx(); }
  Status cut(int64_t n) override { return eng_.truncate(seq_, n); }

 private:
  Engine& eng_;
  Sequence& seq_;
};

enum class StopReason : uint8_t {
  kLength,          // max_tokens
  kEnd,             // end of generation (or a control token)
  kStopString,      // a stop string or the indent rule
  kLineEnd,         // single_line: the line ended
  kDeadline,        // the next step would overrun the deadline
  kCancelled,       // cancel was set
  kContext,         // the context is full
  kNothingAllowed,  // healing: no token agrees with the healed bytes
  kReaderGone,      // the text's reader returned false
};

struct GenerateOptions {
  int64_t max_tokens = 8;
  bool single_line = false;
  bool never_empty = false;  // the first token is never end of generation
  int32_t end_token = -1;    // one more end-of-generation token (-1: none)
  std::string_view heal;     // bytes the output must start with (not part of its text)
  std::span<const int32_t> known;  // the first tokens, without a forward pass (see the top)
  const std::vector<std::string>* stop = nullptr;  // stop strings (nullptr: none)
  int64_t n_indent = 0;                             // with stop: llama.cpp's indent rule
  std::optional<std::chrono::steady_clock::time_point> deadline;
  const std::atomic<bool>* cancel = nullptr;
  // Proposes tokens for multi-token passes (nullptr: one token a pass).
  // Used while the choice is greedy (or healing's), and for sampled choices
  // with draft_sampled: then a step with a drafted token chooses by
  // speculative sampling's rule (Sampler::sample_given_draft), which keeps
  // the distribution but not the draws: the output then depends on what
  // was drafted, so a session (whose sampled suggestion must be a function
  // of its text and options) leaves it off.
  Drafter* drafter = nullptr;
  bool draft_sampled = false;
  // Drafted tokens already fed after the prompt, unchecked (a draft the
  // prompt's own pass computed: Reuse::prefill); needs `drafter`.
  std::span<const int32_t> drafted;
  // What the generated tokens continue, for the drafter's lookups (empty:
  // the prompt's end; a FIM prompt's is its prefix, before the suffix).
  std::span<const int32_t> draft_context;
};

// What a generation produced (buffers reused from call to call).
struct Generated {
  std::string text;              // whole UTF-8 characters, healed bytes left out, stops applied
  std::string tail;              // an incomplete character left at the end (not in text)
  std::vector<int32_t> tokens;   // the output's tokens (end of generation and a token cut at a line end left out)
  std::vector<int32_t> chosen;   // every token the loop chose after the known ones, in order (those too)
  std::vector<double> decode_ms; // each forward pass (a drafting pass is one)
  int64_t drafted = 0;           // tokens proposed by the drafter and fed
  int64_t accepted = 0;          // of those, the ones the loop chose
  double detokenize_ms = 0;
  StopReason stop = StopReason::kLength;
  void clear();
};

class Generator {
 public:
  // `tok` may be null (ids only: no text, no healing); masks say what ends a
  // generation (continuation_masks(), or just the model's eos id).
  Generator(const tok::Tokenizer* tok, int n_vocab, ContinuationMasks masks);

  // Generates after `prompt` (in target, its logits current). `sampler`
  // chooses (its mask should be masks.control); `on_text` receives the text
  // as it becomes final (false: stop). Errors only from a forward pass.
  Status run(DecodeTarget& target, std::span<const int32_t> prompt, Sampler& sampler, const GenerateOptions& opt,
             StopStream::Sink on_text, Generated* out);

  const ContinuationMasks& masks() const { return masks_; }
  bool ends(int32_t id, int32_t end_token = -1) const {
    return masks_.eog.contains(id) || masks_.control.contains(id) || (end_token >= 0 && id == end_token);
  }
  // The healed token choice (see the top): the greedy one among tokens that
  // start with `heal_left`; -1 when none may come.
  int32_t pick_healed(const float* logits, std::string_view heal_left) const;
  // The duration of the last forward pass: the deadline's estimate of the next.
  void forget_step_time() { last_step_ms_ = 0; }

 private:
  bool emit_text(std::string_view bytes, std::string_view& heal_left, const GenerateOptions& opt, Generated* out,
                 bool* cut_at_line);

  const tok::Tokenizer* tok_;
  int n_vocab_;
  ContinuationMasks masks_;
  StopStream stream_;
  std::string pending_;  // generated bytes not yet a whole character
  // Feeds what a step needs: `prev` as the at-th token, alone or with a
  // draft after it (`may_draft`: the choice is greedy; up to max_draft tokens).
  Status feed_step(DecodeTarget& target, int64_t at, int32_t prev, bool may_draft, int64_t max_draft,
                   const GenerateOptions& opt, Generated* out);
  // After a step chose `id`: compares it with the drafted token waiting for
  // it; at a difference cuts that token and the rest away (the step's
  // position is `at`). Tells the drafter when its draft is settled.
  Status settle_draft(DecodeTarget& target, int64_t at, int32_t id, const GenerateOptions& opt, Generated* out);
  bool draft_pending() const { return draft_next_ < draft_.size(); }

  std::vector<int32_t> history_;
  std::vector<int32_t> context_;  // the prompt's tail and every token so far: what the drafter looks up
  std::vector<int32_t> draft_;    // the last drafting pass's tokens: the chosen one it followed, then the draft
  size_t draft_next_ = 0;         // the drafted token the next choice is compared with (draft_.size(): none)
  double last_step_ms_ = 0;
};

// Token healing: whether token bytes `b` may come next while `left` (the
// healed bytes not yet generated) is pending, and what is left after it.
bool heal_allows(std::string_view b, std::string_view left);
std::string_view heal_advance(std::string_view b, std::string_view left);

}  // namespace laya
