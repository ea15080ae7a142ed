// Session: one document being typed, driven keystroke by keystroke. It holds
// the text (UTF-8), the cursor, the incremental tokenizer state, one engine
// sequence and the current suggestion, and makes each suggestion with the
// least work:
//   - after an edit only the tokens after the first changed one are computed
//     (the sequence keeps the common prefix);
//   - the prompt covers a window of the text before the cursor that starts at
//     a line start and moves in large steps (to about half the room when it
//     overflows), so it stays the same from keystroke to keystroke;
//   - where the model has fill-in-the-middle tokens, a bounded suffix (the
//     text after the cursor, whole lines up to SessionOptions::fim_suffix_tokens)
//     is in the prompt (PSM order by default: the order the default model
//     was trained on);
//   - token healing: the last token before the cursor (of the last pre-token
//     piece) is taken back and the suggestion must start with its bytes;
//   - typing through a suggestion: the generated tokens stay cached, and when
//     the new prompt is the old prompt plus some of them (the user typed or
//     accepted what was suggested), the rest is reused with no forward pass
//     and only the missing steps are decoded. Reuse is taken only where it
//     provably equals what a fresh computation gives (greedy sampling; see
//     reuse_chain()), so every suggestion equals a fresh session's.
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
#include "session/model_slot.h"
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

// How a session builds its prompts (fixed for its life).
enum class FimOrder {
  kOff,  // the text before the cursor only
  kPsm,  // [BOS] <fim_prefix> prefix <fim_suffix> suffix <fim_middle>: what the default model learned
  kSpm,  // [BOS] <fim_suffix> suffix <fim_prefix> prefix <fim_middle>: typing at the cursor keeps the suffix cached
};

struct SessionOptions {
  bool heal = true;  // token healing (see the top of this file)
  // Used only when the tokenizer has all three FIM tokens and the bounded
  // suffix holds more than whitespace; otherwise the prompt is the prefix.
  FimOrder fim = FimOrder::kPsm;
  // The suffix: whole lines after the cursor (the cursor's own line first)
  // while their tokens fit in this bound; a first line longer than the bound
  // is cut to its first tokens. In PSM order every token of it is recomputed
  // when the prefix changes, so it is small by default.
  int fim_suffix_tokens = 32;
  int fim_suffix_lines = 4;
  // Tokens the prompt may use (0: the engine's context). The window of the
  // prefix gets what is left after BOS, FIM markers, the suffix bound and
  // max_tokens.
  int64_t context_tokens = 0;
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
  SuggestTimings timings;

  // Empties it, keeping the capacity of its strings and vectors.
  void clear();
};

class Session {
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
  // The same into caller-owned storage: after warm-up (the buffers have
  // grown to their working size) a keystroke's edit + suggest_into allocate
  // nothing.
  Status suggest_into(const SuggestOptions& opt, Suggestion* out,
                      const std::function<void(std::string_view)>& on_piece = {});
  // Stops a suggest in flight (called before, or waiting for the lock, when
  // cancel() is called) within one decode step or one prefill chunk; it then
  // returns what it has with `cancelled` set. Any thread; never blocks.
  void cancel();

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

  const std::string& text() const { return text_; }
  size_t size_cp() const { return n_cp_; }
  size_t cursor() const { return cursor_cp_; }
  // The last suggestion, until the next edit / move / set_text / accept.
  const Suggestion* current() const { return has_current_ ? &current_ : nullptr; }
  const SessionOptions& options() const { return opts_; }
  // The window: the code point where the prompt's text starts. A fresh
  // session given the same window (pin_window) makes the same prompt.
  size_t window_start() const { return win_cp_; }
  // Sets the window start (a code point <= the cursor); it stays until it no
  // longer fits, like a chosen one. For replay --verify.
  Status pin_window(size_t start_cp);
  int64_t window_moves() const { return window_moves_; }
  // The tokens whose K/V the session's sequence holds.
  const std::vector<int32_t>& cached_tokens() const { return seq_->tokens(); }
  // The last suggestion's prompt (window, FIM markers, healing's cut): its
  // first token was chosen from the logits after these. For replay --verify.
  const std::vector<int32_t>& prompt_tokens() const { return prompt_; }
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
  const KvBlockTable& kv_blocks() const { return seq_->blocks(); }
  // The logits at the end of the last prefilled prompt (n_vocab floats), or
  // nullptr: what replay --verify and the restart check compare.
  const float* prompt_logits() const { return saved_at_ >= 0 ? saved_logits_.data() : nullptr; }
  // Gives the sequence's blocks back to the pool: the full ones stay cached
  // under their content keys (evictable, least recently used first), so the
  // next suggest adopts those still resident and recomputes only the rest.
  // For an editor (or bench-sessions) keeping many documents under one KV budget.
  Status release_kv();

 private:
  Status edit_locked(size_t pos_cp, size_t n_deleted_cp, std::string_view inserted);
  size_t byte_of(size_t cp) const;
  Status check_options(const SuggestOptions& opt) const;
  int64_t window_room(int max_tokens) const;
  Status update_window(int max_tokens, Suggestion& s);
  Status choose_window(int64_t room);
  Status set_window(size_t start_byte);
  size_t count_cp(size_t from_byte, size_t to_byte) const;
  Status build_suffix();
  void build_prompt();
  size_t reuse_chain(const SuggestOptions& opt);
  Status prefill_prompt(Suggestion& s);
  Status truncate_to(int64_t n);
  Status decode_chain_token(int64_t at, int step);
  Status generate(const SuggestOptions& opt, std::optional<Deadline::Clock::time_point> end, size_t reused,
                  const std::function<void(std::string_view)>& on_piece, Suggestion& s);
  int32_t pick(const SuggestOptions& opt, Sampler& smp, std::string_view heal_left);
  bool emit(std::string_view piece, bool single_line, const std::function<void(std::string_view)>& on_piece,
            Suggestion& s);
  Sampler& sampler_for(const SamplerParams& p);
  void drop_chain() { chain_.clear(); chain_start_ = 0; chain_heal_.clear(); }
  Session(std::shared_ptr<const ModelBundle> bundle, ModelSlot* slot, const SessionOptions& options);
  void init_model_state();
  void rebind_locked(std::shared_ptr<const ModelBundle> next);
  friend class ModelSlot;
  void prewarm_for(const std::shared_ptr<const ModelBundle>& next);

  // Pointers, not references: a slot session rebinds them to the new model.
  Engine* eng_;
  const tok::Tokenizer* tok_;
  ModelSlot* slot_ = nullptr;                   // null: bound to eng_ for life
  std::shared_ptr<const ModelBundle> bundle_;   // what eng_ / tok_ belong to (slot sessions)
  bool rebound_ = false;  // rebound since the last prefill: adopt the pool's cached prefix (model_slot.h)
  // The sequence on the model used before the last swap, for a swap back (rebind_locked).
  std::shared_ptr<const ModelBundle> other_bundle_;
  std::unique_ptr<Sequence> other_seq_;
  // The window other_seq_'s prompt was built on (npos: none), and the bytes
  // of text at the start left untouched by every edit since that swap.
  size_t other_win_byte_ = std::string::npos;
  size_t other_unchanged_ = std::string::npos;
  // Prewarm (see the top of this file). prewarm_mu_ guards the writes of
  // text_ and the cursor (read by prewarm_for on the swapping thread) and the
  // prepared_* fields: the sequence of the prompt computed on bundle
  // prepared_id_, its window, and the bytes at the start of the text no edit
  // touched since the text was copied.
  std::mutex prewarm_mu_;
  std::unique_ptr<Sequence> prepared_seq_;
  uint64_t prepared_id_ = 0;
  size_t prepared_win_byte_ = std::string::npos;
  size_t prepared_unchanged_ = std::string::npos;
  std::atomic<int64_t> last_used_ns_{0};  // steady clock of the last suggest (0: none): the slot's MRU order
  std::atomic<int> last_max_tokens_{8};   // the room prewarm_for leaves, as the next suggest likely will
  SessionOptions opts_;
  std::mutex mu_;
  std::atomic<bool> cancel_{false};
  std::atomic<uint64_t> cancel_epoch_{0};  // counts cancel() calls: see suggest()
  uint64_t done_epoch_ = ~uint64_t{0};      // cancel_epoch_ when the last suggest completed: see extend_chain()

  std::string text_;
  size_t n_cp_ = 0;
  size_t cursor_cp_ = 0, cursor_byte_ = 0;
  // The window: the prompt's text is text_[win_byte_, cursor_byte_), held by
  // prefix_tok_ and re-tokenized incrementally (typing at the cursor is an
  // edit at its end, a move an insert or delete there). win_dirty_: an edit
  // or move reached before the window; it is chosen again at the next suggest.
  size_t win_cp_ = 0, win_byte_ = 0;
  bool win_dirty_ = false;
  int64_t window_moves_ = 0;
  tok::EditTokenizer prefix_tok_;
  // FIM: the three marker ids (or -1), the bounded suffix's text and ids.
  int32_t fim_pre_ = -1, fim_suf_ = -1, fim_mid_ = -1;
  std::string suffix_text_;
  tok::EditTokenizer suffix_tok_;  // the suffix's ids, re-tokenized incrementally
  std::vector<int32_t> suffix_ids_;
  bool suffix_valid_ = false;

  std::unique_ptr<Sequence> seq_;
  // n_past of the sequence when its logits were last computed (-1: stale);
  // they serve a prompt only when it ends exactly there.
  int64_t logits_at_ = -1;
  // The logits at the end of the last prefilled prompt (saved_at_ tokens; -1:
  // none): the next keystroke with the same prompt starts from them.
  std::vector<float> saved_logits_;
  int64_t saved_at_ = -1;
  const float* first_logits_ = nullptr;  // set for the first pick of a suggest that starts from them
  ContinuationMasks masks_;
  std::unique_ptr<Sampler> sampler_;
  std::string pending_;  // generated bytes not yet a complete UTF-8 character
  std::vector<int32_t> prompt_, history_;
  std::string heal_;  // the prompt's healed bytes (the suggestion must start with them)
  // The chain: the tokens the last greedy generation chose after prompt
  // chain_start_ (the prompt's length) under healing constraint chain_heal_.
  // The sequence holds the prompt plus a prefix of the chain; reuse_chain()
  // takes what the next prompt has not consumed. Empty: nothing reusable.
  std::vector<int32_t> chain_;
  size_t chain_start_ = 0;
  std::string chain_heal_;
  Suggestion current_;
  bool has_current_ = false;
  double pending_tokenize_ms_ = 0;
  double last_step_ms_ = 0;  // the last decode step, the deadline's estimate of the next
};

}  // namespace laya
