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
// chain that the user typed through). This is the seam where drafted tokens
// (several proposed at once, checked by one batched pass) plug in.
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
};

// What a generation produced (buffers reused from call to call).
struct Generated {
  std::string text;              // whole UTF-8 characters, healed bytes left out, stops applied
  std::string tail;              // an incomplete character left at the end (not in text)
  std::vector<int32_t> tokens;   // the output's tokens (end of generation and a token cut at a line end left out)
  std::vector<int32_t> chosen;   // every token the loop chose after the known ones, in order (those too)
  std::vector<double> decode_ms; // each forward pass
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
  std::vector<int32_t> history_;
  double last_step_ms_ = 0;
};

// Token healing: whether token bytes `b` may come next while `left` (the
// healed bytes not yet generated) is pending, and what is left after it.
bool heal_allows(std::string_view b, std::string_view left);
std::string_view heal_advance(std::string_view b, std::string_view left);

}  // namespace laya
