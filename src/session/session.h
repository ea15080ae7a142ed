// Session: one document being typed, driven keystroke by keystroke. It holds
// the text (UTF-8), the cursor, the incremental tokenizer state, one engine
// sequence and the current suggestion, and makes each suggestion with the
// least work: after an edit only the tokens after the first changed one are
// computed (the sequence keeps the common prefix, and the suggestion's own
// tokens stay cached for the next keystroke).
//
// This slice (issue 10, first part): the prompt is the text before the cursor
// only — no fill-in-the-middle, no context window that holds still, no token
// healing, no asynchronous suggest; those come in later slices.
//
// Threading: edit / set_text / move / accept / suggest are serialised by a
// mutex; suggest holds it for its whole run. cancel() may be called from any
// thread at any time and only sets a flag, so an editor's input thread can
// stop a suggest running elsewhere; edit, set_text, move and accept call
// cancel() first and then wait for the lock, so an edit never waits behind a
// whole suggestion (at most one decode step or one prefill chunk). The
// accessors (text(), cursor(), ...) read without the lock: call them only
// when no suggest runs on another thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace laya {

// A latency budget for suggest(): either relative (a duration, counted from
// the moment suggest() is called) or absolute (a steady_clock time point).
// Default: none.
class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  Deadline() = default;
  Deadline(Clock::time_point at) : at_(at) {}  // NOLINT: implicit on purpose (opt.deadline = t)
  template <class Rep, class Period>
  Deadline(std::chrono::duration<Rep, Period> budget)  // NOLINT: implicit (opt.deadline = 2ms)
      : budget_(std::chrono::duration_cast<Clock::duration>(budget)) {}

  bool none() const { return !at_ && !budget_; }
  // The absolute end for a call that started at `start` (nullopt: none).
  std::optional<Clock::time_point> end_for(Clock::time_point start) const {
    if (at_) return *at_;
    if (budget_) return start + *budget_;
    return std::nullopt;
  }

 private:
  std::optional<Clock::time_point> at_;
  std::optional<Clock::duration> budget_;
};

struct SuggestOptions {
  int max_tokens = 8;        // >= 1; the prompt keeps room for them in the context
  bool single_line = false;  // stop at the end of the line (the newline is not part of the suggestion)
  // No decode step is started that would overrun it (a step is estimated from
  // the last one measured); what exists is returned with cut_by_deadline. The
  // prefill and the first token (sampled from its logits) are always done: the
  // prefill is needed by the next keystroke anyway.
  Deadline deadline;
  SamplerParams sampling;  // greedy by default (temperature 0)
};

struct SuggestTimings {
  // Re-tokenizing since the last suggest (the edits' EditTokenizer work) plus
  // building the prompt.
  double tokenize_ms = 0;
  double prefill_ms = 0;
  int64_t tokens_reused = 0;    // prompt tokens whose K/V were already cached
  int64_t tokens_computed = 0;  // prompt tokens fed to the model by this call
  std::vector<double> decode_ms;  // each decode step
  double detokenize_ms = 0;
  double total_ms = 0;  // suggest() entry to return
};

struct Suggestion {
  // The complete UTF-8 characters of the generated tokens (an incomplete
  // character at the end is left out); with single_line, cut before the
  // first newline.
  std::string text;
  // The generated ids: with single_line, those whose bytes are all in `text`
  // (a token holding the newline is left out); end-of-generation excluded.
  std::vector<int32_t> tokens;
  bool cut_by_deadline = false;
  bool cancelled = false;  // cancel() or an edit stopped it; text/tokens hold what was done
  SuggestTimings timings;
};

class Session {
 public:
  // `engine` and `tokenizer` must outlive the session (one engine serves many
  // sessions; each holds its own sequence).
  Session(Engine& engine, const tok::Tokenizer& tokenizer);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Replaces the whole text; the cursor goes to its end.
  Status set_text(std::string_view text);
  // Replaces n_deleted_cp code points at pos_cp by `inserted` (valid UTF-8,
  // any length: keystrokes, input-method commits, pastes); the cursor ends
  // after the inserted text (the trace format's convention).
  Status edit(size_t pos_cp, size_t n_deleted_cp, std::string_view inserted);
  // Moves the cursor (code points); the text is unchanged.
  Status move(size_t cursor_cp);
  // The user takes the first n_chars code points of the current suggestion:
  // they are inserted at the cursor as an edit. Their tokens are still cached,
  // so the next suggest computes at most the last of them (for its logits)
  // when the re-tokenized text gives the same ids.
  Status accept(size_t n_chars);

  // A suggestion at the cursor. `on_piece` receives text as soon as it is
  // complete UTF-8 (the pieces concatenate to the suggestion's text).
  Result<Suggestion> suggest(const SuggestOptions& opt = {},
                             const std::function<void(std::string_view)>& on_piece = {});
  // Stops a suggest in flight (called before, or waiting for the lock, when
  // cancel() is called) within one decode step or one prefill chunk; it then
  // returns what it has with `cancelled` set. Any thread; never blocks.
  void cancel();

  const std::string& text() const { return text_; }
  size_t size_cp() const { return n_cp_; }
  size_t cursor() const { return cursor_cp_; }
  // The last suggestion, until the next edit / move / set_text / accept.
  const std::optional<Suggestion>& current() const { return current_; }
  // The tokens whose K/V the session's sequence holds.
  const std::vector<int32_t>& cached_tokens() const { return seq_->tokens(); }

 private:
  Status edit_locked(size_t pos_cp, size_t n_deleted_cp, std::string_view inserted);
  size_t byte_of(size_t cp) const;
  Status check_options(const SuggestOptions& opt) const;
  void build_prompt(int max_tokens);
  Status prefill_prompt(Suggestion& s);
  Status generate(const SuggestOptions& opt, std::optional<Deadline::Clock::time_point> end,
                  const std::function<void(std::string_view)>& on_piece, Suggestion& s);
  bool emit(std::string_view piece, bool single_line, const std::function<void(std::string_view)>& on_piece,
            Suggestion& s);
  Sampler& sampler_for(const SamplerParams& p);

  Engine& eng_;
  const tok::Tokenizer& tok_;
  std::mutex mu_;
  std::atomic<bool> cancel_{false};
  std::atomic<uint64_t> cancel_epoch_{0};  // counts cancel() calls: see suggest()

  std::string text_;
  size_t n_cp_ = 0;
  size_t cursor_cp_ = 0, cursor_byte_ = 0;
  // The text before the cursor (the prompt of this slice), re-tokenized
  // incrementally: typing at the cursor is an edit at its end, a move is an
  // insert or delete at its end.
  tok::EditTokenizer prefix_tok_;
  std::unique_ptr<Sequence> seq_;
  // n_past of the sequence when its logits were last computed (-1: stale);
  // they serve a prompt only when it ends exactly there.
  int64_t logits_at_ = -1;
  ContinuationMasks masks_;
  std::unique_ptr<Sampler> sampler_;
  tok::StreamingDetokenizer detok_;
  std::vector<int32_t> prompt_, history_;
  std::optional<Suggestion> current_;
  double pending_tokenize_ms_ = 0;
  double last_step_ms_ = 0;  // the last decode step, the deadline's estimate of the next
};

}  // namespace laya
