// PromptPlan: from the document to the prompt's token ids and the healing
// constraint.
//
//   - the window: the prompt covers the text from a line start before the
//     cursor, chosen so its tokens fill about half the room, and kept from
//     keystroke to keystroke until it no longer fits (so the prompt's head,
//     and with it the cached K/V, stays the same while a person types);
//   - fill-in-the-middle: where the model has the three FIM tokens and the
//     text after the cursor holds more than whitespace, a bounded suffix
//     (whole lines, SessionOptions::fim_suffix_tokens) goes into the prompt,
//     in PSM or SPM order;
//   - token healing: the last token before the cursor (of the last pre-token
//     piece) is taken back; the suggestion must start with its bytes.
//
// The decisions are pure functions (window_room, choose_window_start,
// suffix_lines, assemble_prompt), tested as such. PromptBuilder holds what
// makes them cheap per keystroke: the window's and the suffix's tokens,
// re-tokenized incrementally as the document changes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "session/document.h"
#include "tokenizer/tokenizer.h"

namespace laya {

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
  // Drafting (session/draft.h): tokens proposed from the text and checked
  // several to a forward pass; a suggestion is the same with it or without,
  // only the number of passes differs. At most draft_max_tokens at once
  // (0: no drafting).
  int draft_max_tokens = 8;
};

// The model's prompt markers, for a session's options.
struct PromptTraits {
  int32_t bos = -1;  // prepended (-1: the tokenizer adds none)
  int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1;  // all three, or all -1 (no FIM)
  static PromptTraits of(const tok::Tokenizer& tok, const SessionOptions& opt);
  bool fim() const { return fim_mid >= 0; }
};

// A prompt: its ids and the bytes a suggestion must start with.
struct Prompt {
  std::vector<int32_t> ids;
  std::string heal;
  bool fim = false;  // it holds a suffix
  // ids[0, prefix_end) end with the text before the cursor (healing's cut):
  // in a FIM prompt the suffix and markers follow. What a draft continues.
  size_t prefix_end = 0;
};

// The smallest window room accepted (prompt tokens for the text).
inline constexpr int64_t kMinWindowRoom = 16;

// Tokens the window's text may use: the context less max_tokens, BOS and the
// FIM part (reserved whether or not this keystroke has a suffix, so the room,
// and with it the window, does not change as the cursor moves).
int64_t window_room(const PromptTraits& tr, const SessionOptions& opt, int64_t n_ctx, int max_tokens);

// The window start (a byte offset) for the cursor: the first line start whose
// text up to the cursor holds at most room / 2 tokens (0 when the whole text
// fits in the room); when none qualifies, or the best leaves less than
// room / 4 tokens (a long line just before the cursor), a code point start
// found the same way. Deterministic: same text, cursor and room, same start.
size_t choose_window_start(const tok::Tokenizer& tok, std::string_view text, size_t cursor_byte, int64_t room);

// The suffix's text before its token bound: up to fim_suffix_lines lines
// after the cursor, at most 8 bytes per token of the bound (cut at a
// character start).
std::string_view suffix_lines(std::string_view text, size_t cursor_byte, const SessionOptions& opt);

// The prompt from the window's tokens (`last_piece_tokens`: how many of them
// make the last pre-token piece, for healing) and the suffix's (empty: no
// FIM): [BOS] + the window's tokens less the healed one, in FIM markers with
// the suffix when there is one.
void assemble_prompt(const PromptTraits& tr, const SessionOptions& opt, const tok::Tokenizer& tok,
                     std::span<const int32_t> window_ids, size_t last_piece_tokens,
                     std::span<const int32_t> suffix_ids, Prompt* out);

// The incremental state behind the functions above, for one document.
class PromptBuilder {
 public:
  PromptBuilder(const tok::Tokenizer& tok, const SessionOptions& opt);
  // Another model's tokenizer (a hot swap): everything tokenized is dropped.
  void rebind(const tok::Tokenizer& tok);

  // Keep the window's tokens in step with the document, called after it
  // changed (an edit; a move from old_cursor_byte).
  void on_edit(const Document& doc, const Document::Change& c);
  void on_move(const Document& doc, size_t old_cursor_byte);
  // The window is chosen again at the next update_window().
  void invalidate() { dirty_ = true; }

  // Sets the window start (a byte at a character start, <= the cursor).
  Status set_window(const Document& doc, size_t start_byte);
  // The window for the current cursor: kept while it fits the room (and is
  // not much smaller than it), else chosen again. *moved: it changed.
  Status update_window(const Document& doc, int64_t room, bool* moved);
  // The prompt at the cursor (update_window first).
  Status build(const Document& doc, Prompt* out);

  const PromptTraits& traits() const { return traits_; }
  bool dirty() const { return dirty_; }
  size_t window_byte() const { return win_byte_; }
  size_t window_cp() const { return win_cp_; }
  int64_t window_moves() const { return moves_; }

 private:
  Status build_suffix(const Document& doc);

  const tok::Tokenizer* tok_;
  SessionOptions opt_;
  PromptTraits traits_;
  // The window: the prompt's text is text[win_byte_, cursor), held by
  // window_tok_ and re-tokenized incrementally (typing at the cursor is an
  // edit at its end, a move an insert or delete there).
  size_t win_cp_ = 0, win_byte_ = 0;
  bool dirty_ = false;
  int64_t moves_ = 0;
  tok::EditTokenizer window_tok_;
  // The suffix's text and ids (re-tokenized only when its text changed).
  std::string suffix_text_;
  tok::EditTokenizer suffix_tok_;
  std::vector<int32_t> suffix_ids_;
  bool suffix_valid_ = false;
};

}  // namespace laya
