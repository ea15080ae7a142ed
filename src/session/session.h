// Session: one document being typed, driven keystroke by keystroke: the thin
// owner that wires the parts of the keystroke pipeline together.
//
//   Document       the text and the cursor (code points <-> bytes, here only)
//   PromptBuilder  window, FIM suffix and token healing -> the prompt (prompt_plan.h)
//   Reuse          the sequence, saved logits and the last greedy chain: what
//                  the prompt costs (typing through a suggestion: nothing)
//   Generator      the decode loop (the same one chat and `laya complete` run)
//   DocumentDrafter tokens proposed from the text, checked several to a pass
//                  by the generator (draft.h): fewer passes, the same output
//
// Every suggestion equals a fresh session's: reuse is taken only where it
// provably gives what a fresh computation gives (reuse.h), and a drafted
// token only where the model's own choice equals it.
//
// Threading: edit / set_text / move / accept / suggest are serialised by a
// mutex; suggest holds it for its whole run. cancel() may be called from any
// thread at any time and only sets a flag, so an editor's input thread can
// stop a suggest running elsewhere; edit, set_text, move and accept call
// cancel() first and then wait for the lock, so an edit never waits behind a
// whole suggestion (at most one decode step or one prefill chunk). The
// accessors (text(), cursor(), ...) read without the lock: call them only
// when no suggest runs on another thread.
//
// Hot model swap: a session made on a ModelSlot (session/model_slot.h) checks
// at each suggest whether the slot serves another model than the one it is
// bound to, and if so rebinds first (rebind_locked): text and cursor stay,
// everything derived from the old model goes (its sequence, chain, saved
// logits, token state); the suggestion is then made on the new model alone.
// A suggest already running holds the old bundle and finishes on it. Before
// switching, the swapping thread may compute the session's current prompt on
// the new model (prewarm_for, ModelSlot step 4): it copies the text under
// prewarm_mu_ (which edits take for the µs they change it), never waits for
// a suggest, and hands the sequence over for the rebind.
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
#include "session/document.h"
#include "session/draft.h"
#include "session/generator.h"
#include "session/model_slot.h"
#include "session/prompt_plan.h"
#include "session/reuse.h"
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
  // A sampled suggestion may take drafted tokens by speculative sampling's
  // rule (Sampler::sample_given_draft): the same distribution in fewer passes,
  // but each draw then depends on what was drafted, so the text is no longer
  // a function of the document and the seed alone (a server's alternatives).
  bool draft_sampled = false;
};

struct SuggestTimings {
  // Re-tokenizing since the last suggest (the edits' EditTokenizer work) plus
  // building the prompt.
  double tokenize_ms = 0;
  double prefill_ms = 0;
  int64_t tokens_reused = 0;    // prompt tokens whose K/V were already cached
  int64_t tokens_computed = 0;  // prompt tokens fed to the model by this call
  std::vector<double> decode_ms;  // each decode pass (one that checks drafted tokens counts once)
  int64_t drafted_tokens = 0;     // tokens proposed by the drafter and fed to a pass
  // Forward passes over the weights: the prefill (when it computed a token)
  // counts one, each decode pass one (one checking drafted tokens too).
  int64_t passes() const { return (tokens_computed > 0 ? 1 : 0) + static_cast<int64_t>(decode_ms.size()); }
  int64_t accepted_draft_tokens = 0;  // of those, the ones the suggestion took
  double detokenize_ms = 0;
  double total_ms = 0;  // suggest() entry to return
  // Moving to the slot's new model (rebind_locked; 0 when this call did not):
  // the switch itself, before the prompt is built.
  double rebind_ms = 0;
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
  // Tokens taken from the previous suggestion with no forward pass (the user
  // typed or accepted the start of it); with tokens_computed == 0 the first
  // piece was ready at once: a "free" keystroke.
  int typed_through = 0;
  bool window_moved = false;  // this call moved the window (a larger prefill follows)
  bool fim = false;           // the prompt held a suffix
  size_t healed_bytes = 0;    // bytes before the cursor re-generated by healing
  // This call first moved the session to its slot's new model (a hot swap):
  // it is the first suggestion on that model, made from the sequence the
  // swap prewarmed, or the one the session left on that model, or blocks its
  // pool still held, or else from nothing.
  bool rebound = false;
  // The session after the call (read under its lock, so a caller on another
  // thread need not touch the session): the tokens its KV holds, and the code
  // point where the prompt's window starts (> 0: the text before it is cut).
  int64_t tokens_cached = 0;
  size_t window_start_cp = 0;
  SuggestTimings timings;

  // Empties it, keeping the capacity of its strings and vectors.
  void clear();
};

class Session final : private SlotClient {
 public:
  // `engine` and `tokenizer` must outlive the session (one engine serves many
  // sessions; each holds its own sequence).
  Session(Engine& engine, const tok::Tokenizer& tokenizer, const SessionOptions& options = {});
  // A session that follows `slot`'s model across swaps (see the top of this
  // file). The slot must outlive the session; the bundle in use is kept
  // alive by the session itself.
  explicit Session(ModelSlot& slot, const SessionOptions& options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Replaces the whole text; the cursor goes to its end.
  Status set_text(std::string_view text);
  // Replaces n_deleted_cp code points at pos_cp by `inserted` (valid UTF-8,
  // any length: keystrokes, input-method commits, pastes); the cursor ends
  // after the inserted text (the trace format's convention).
  Status edit(size_t pos_cp, size_t n_deleted_cp, std::string_view inserted);
  // The same in bytes (the HTTP API's unit): pos and pos + n_deleted on
  // character starts, else kInvalidArgument naming the byte.
  Status edit_bytes(size_t pos, size_t n_deleted, std::string_view inserted);
  // Moves the cursor (code points); the text is unchanged.
  Status move(size_t cursor_cp);
  // The same to a byte offset (a character start).
  Status move_to_byte(size_t cursor_byte);
  // The user takes the first n_chars code points of the current suggestion:
  // they are inserted at the cursor as an edit. Their tokens are still cached,
  // so the next suggest computes at most the last of them (for its logits)
  // when the re-tokenized text gives the same ids.
  Status accept(size_t n_chars);

  // A suggestion at the cursor. `on_piece` receives text as soon as it is
  // complete UTF-8 (the pieces concatenate to the suggestion's text).
  Result<Suggestion> suggest(const SuggestOptions& opt = {},
                             const std::function<void(std::string_view)>& on_piece = {});
  // The same into caller-owned storage: after warm-up (the buffers have
  // grown to their working size) a keystroke's edit + suggest_into allocate
  // nothing.
  Status suggest_into(const SuggestOptions& opt, Suggestion* out,
                      const std::function<void(std::string_view)>& on_piece = {});
  // Stops a suggest in flight (called before, or waiting for the lock, when
  // cancel() is called) within one decode step or one prefill chunk; it then
  // returns what it has with `cancelled` set. Any thread; never blocks.
  void cancel();
  // Cancellation is one count per session: every cancel() (so every edit,
  // move, set_text and accept) adds one. A suggest is stopped by any cancel()
  // after `since` (a value read earlier with cancel_epoch()): a scheduler
  // reads it when a request is submitted, so a keystroke between the submit
  // and the start stops the request too, and a stale result is one whose
  // epoch moved on. suggest_into() counts from its own start.
  uint64_t cancel_epoch() const { return cancel_epoch_.load(std::memory_order_acquire); }
  Status suggest_since(uint64_t since, const SuggestOptions& opt, Suggestion* out,
                       const std::function<void(std::string_view)>& on_piece = {});

  // Idle-time work: extends the last suggestion's greedy chain (see
  // reuse_chain()) by up to n_tokens decode steps, so that typing through
  // the suggestion past its end stays free. Computes only what a later
  // suggest would, token for token (the same decode steps, the same greedy
  // choice), so every suggestion still equals a fresh session's. Does
  // nothing unless the last call was a completed greedy suggest; stops
  // before its next step once cancel() has been called since that suggest
  // (an edit, a move, a new request), and returns at once when the session
  // is busy. Returns the tokens added.
  int extend_chain(int n_tokens);

  const std::string& text() const { return doc_.text(); }
  size_t size_cp() const { return doc_.size_cp(); }
  size_t cursor() const { return doc_.cursor_cp(); }
  // The last suggestion, until the next edit / move / set_text / accept.
  const Suggestion* current() const { return has_current_ ? &current_ : nullptr; }
  const SessionOptions& options() const { return opts_; }
  // The window: the code point where the prompt's text starts. A fresh
  // session given the same window (pin_window) makes the same prompt.
  size_t window_start() const { return plan_.window_cp(); }
  // Sets the window start (a code point <= the cursor); it stays until it no
  // longer fits, like a chosen one. For replay --verify.
  Status pin_window(size_t start_cp);
  int64_t window_moves() const { return plan_.window_moves(); }
  // The tokens whose K/V the session's sequence holds.
  const std::vector<int32_t>& cached_tokens() const { return reuse_.sequence().tokens(); }
  // The last suggestion's prompt (window, FIM markers, healing's cut): its
  // first token was chosen from the logits after these. For replay --verify.
  const std::vector<int32_t>& prompt_tokens() const { return prompt_.ids; }
  // The model the session is bound to: the one its last suggestion was made
  // on (a slot session moves at its next suggest). bundle() is null for a
  // session made on an engine.
  Engine& engine() const { return *eng_; }
  const tok::Tokenizer& tokenizer() const { return *tok_; }
  const std::shared_ptr<const ModelBundle>& bundle() const { return bundle_; }

  // ---- persistence and residency (session_store.h, bench-sessions) ----
  // What a session needs to resume exactly where it was, apart from the K/V
  // bytes of its sequence (saved from kv_blocks(), one block per
  // block_pos tokens of `tokens`).
  struct SavedState {
    std::string text;
    size_t cursor_cp = 0;
    size_t window_cp = 0;
    bool window_dirty = true;      // the window is chosen again at the next suggest
    std::vector<int32_t> tokens;   // the sequence's tokens (cached_tokens())
    // The logits at the end of the last prefilled prompt (n_vocab floats, or
    // empty) and that prompt's length: the next suggest at the same prompt
    // starts from them instead of recomputing its last token.
    std::vector<float> prompt_logits;
    int64_t prompt_logits_at = -1;
    // The last greedy generation (see reuse_chain()): typing through it
    // after a restore is free, as it would have been before.
    std::vector<int32_t> chain;
    size_t chain_start = 0;
    std::string chain_heal;
  };
  // A copy of the state (not while a suggest runs on another thread).
  SavedState saved_state() const;
  // Restores a session that has not been used yet (kInvalidArgument
  // otherwise, or for a state that does not fit: invalid UTF-8, a cursor or
  // window past the text, an id outside the vocabulary, logits of the wrong
  // size). The text, cursor and window always come back. With kv_src (block
  // b's bytes, see Engine::restore_sequence) the sequence, logits and chain
  // come back too, so the next suggest computes nothing it had not to
  // before; when the pool cannot take the blocks (kOutOfMemory) the session
  // stays restored from its text only (it recomputes at its next suggest)
  // and *kv_note (when given) says why.
  Status restore(const SavedState& st, const std::function<const uint8_t*(int64_t block)>& kv_src,
                 std::string* kv_note = nullptr);
  // The KV blocks the session's sequence holds (shared ones included).
  const KvBlockTable& kv_blocks() const { return reuse_.sequence().blocks(); }
  // The logits at the end of the last prefilled prompt (n_vocab floats), or
  // nullptr: what replay --verify and the restart check compare.
  const float* prompt_logits() const { return reuse_.saved_logits(); }
  // Gives the sequence's blocks back to the pool: the full ones stay cached
  // under their content keys (evictable, least recently used first), so the
  // next suggest adopts those still resident and recomputes only the rest.
  // For an editor (or bench-sessions) keeping many documents under one KV budget.
  Status release_kv();

 private:
  // A sequence kept on a model other than the one bound: the one left by the
  // last swap (for a swap back) or the one a prewarm computed on the next.
  struct ParkedSequence {
    std::shared_ptr<const ModelBundle> bundle;  // the model it is on (left by a swap; null for a prewarm)
    std::unique_ptr<Sequence> seq;
    uint64_t id = 0;  // the bundle id (a prewarm's)
    // The window its prompt was built on (npos: none), and the bytes at the
    // start of the text that no edit touched since.
    size_t win_byte = std::string::npos;
    size_t unchanged = std::string::npos;
    void clear() {
      bundle.reset();
      seq.reset();
      id = 0;
      win_byte = unchanged = std::string::npos;
    }
  };

  Session(std::shared_ptr<const ModelBundle> bundle, ModelSlot* slot, const SessionOptions& options);
  Status edit_locked(size_t pos_cp, size_t n_deleted_cp, std::string_view inserted);
  Status move_locked(size_t cursor_cp);
  Status check_options(const SuggestOptions& opt) const;
  int64_t room(int max_tokens) const;
  // The prompt at the cursor into prompt_ (the window updated first).
  Status plan_prompt(int max_tokens, Suggestion& s);
  Status run_generation(const SuggestOptions& opt, std::optional<Deadline::Clock::time_point> end, size_t known,
                        const std::function<void(std::string_view)>& on_piece, Suggestion& s);
  Sampler& sampler_for(const SamplerParams& p);
  std::span<const int32_t> draft_after_prompt(const SuggestOptions& opt);
  void rebind_locked(std::shared_ptr<const ModelBundle> next);
  // SlotClient (model_slot.h): what a swap asks of the session.
  int64_t last_used_ns() const override { return last_used_ns_.load(std::memory_order_relaxed); }
  void prewarm_for(const std::shared_ptr<const ModelBundle>& next) override;

  // The model: pointers, not references (a slot session rebinds them).
  Engine* eng_;
  const tok::Tokenizer* tok_;
  ModelSlot* slot_ = nullptr;                  // null: bound to eng_ for life
  std::shared_ptr<const ModelBundle> bundle_;  // what eng_ / tok_ belong to (slot sessions)
  // Hot swap (see the top of this file). prewarm_mu_ guards the document's
  // writes (read by prewarm_for on the swapping thread) and prepared_.
  ParkedSequence other_, prepared_;
  std::mutex prewarm_mu_;
  std::atomic<int64_t> last_used_ns_{0};  // steady clock of the last suggest (0: none): the slot's MRU order
  std::atomic<int> last_max_tokens_{8};   // the room prewarm_for leaves, as the next suggest likely will

  SessionOptions opts_;
  std::mutex mu_;
  // Cancellation: cancel_ stops the suggest in flight; cancel_epoch_ counts
  // cancel() calls (see suggest_into()); done_epoch_ is its value when the
  // last suggest completed (extend_chain() runs only while it is unchanged).
  std::atomic<bool> cancel_{false};
  std::atomic<uint64_t> cancel_epoch_{0};
  uint64_t done_epoch_ = ~uint64_t{0};

  // The pipeline's parts, in the order a keystroke goes through them.
  Document doc_;
  PromptBuilder plan_;
  Prompt prompt_;
  Reuse reuse_;
  Generator generator_;
  DocumentDrafter drafter_;
  std::vector<int32_t> prompt_draft_;  // draft_after_prompt()'s tokens
  size_t prefill_drafted_ = 0;         // of them, those the last prefill fed
  std::unique_ptr<Sampler> sampler_;
  Generated gen_;
  Suggestion current_;
  bool has_current_ = false;
  double pending_tokenize_ms_ = 0;  // the edits' re-tokenizing since the last suggest
};

}  // namespace laya
