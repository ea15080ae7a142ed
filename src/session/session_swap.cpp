// Session: what hot model swap needs (session.h, session/model_slot.h):
// binding to a model, moving to another (rebind_locked), and computing the
// prompt on the next model before the switch (prewarm_for). Kept apart from
// session.cpp, which is about making suggestions.
#include <algorithm>

#include "session/session.h"

namespace laya {

// What the session derives from its model and tokenizer beside the token
// state: the FIM markers, the masks, the prefix index.
void Session::init_model_state() {
  fim_pre_ = fim_suf_ = fim_mid_ = -1;
  if (opts_.fim != FimOrder::kOff) {
    const auto f = tok_->fim_tokens();
    if (f.complete()) {
      fim_pre_ = f.prefix;
      fim_suf_ = f.suffix;
      fim_mid_ = f.middle;
    }
  }
  masks_ = continuation_masks(*tok_, static_cast<int>(eng_->n_vocab()), eng_->hparams().eos_id);
  if (opts_.heal) (void)tok_->prefix_index();  // built now, not on the first keystroke (the slot built it already)
}

// Moves the session to another model, keeping its text and cursor. Nothing
// derived from the old model may survive: its ids mean other tokens in
// another vocabulary, its K/V are another network's. So the sequence (its
// blocks belong to the old engine's pool), the chain, the saved logits, the
// sampler (its vocabulary size) and the incremental token states go; the
// window is chosen again at this suggest (the text's token count changed).
// The old bundle is freed here only when no one else holds it: the slot
// keeps the bundle it replaced, so after an A <-> B swap this is a reference
// count, not a munmap on the keystroke path.
//
// Swapping back: while the slot keeps the model being left (its one-entry
// LRU), the session keeps its sequence on it too, so a swap back resumes
// that sequence and computes only what the text changed since (as after any
// edit) instead of the whole prompt. Kept only while the slot keeps that
// model: otherwise an idle session would be the one thing holding a model no
// one serves.
void Session::rebind_locked(std::shared_ptr<const ModelBundle> next) {
  std::lock_guard<std::mutex> pw(prewarm_mu_);
  // A sequence for the new model: the one a prewarm computed (the newest),
  // else the one this session left on it.
  std::unique_ptr<Sequence> back;
  size_t back_win = std::string::npos, back_unchanged = 0;
  if (prepared_seq_ && prepared_id_ == next->id) {
    back = std::move(prepared_seq_);
    back_win = prepared_win_byte_;
    back_unchanged = prepared_unchanged_;
  } else if (other_bundle_ && other_bundle_->id == next->id) {
    back = std::move(other_seq_);
    back_win = other_win_byte_;
    back_unchanged = other_unchanged_;
  }
  prepared_seq_.reset();
  prepared_id_ = 0;
  // The window to start from: the one the resumed sequence was built on while
  // the text before it is as it was (its offset still means the same place),
  // else the current one. update_window then checks it against the new
  // model's room and token count, as after any edit; a window kept across the
  // swap is what lets the resumed (or adopted) prompt match.
  size_t win = win_byte_;
  bool dirty = win_dirty_;
  if (back && back_win <= back_unchanged && back_win <= cursor_byte_) {
    win = back_win;
    dirty = false;
  }
  other_seq_.reset();
  other_bundle_.reset();
  other_win_byte_ = std::string::npos;
  if (slot_->keeps(bundle_->id)) {
    other_seq_ = std::move(seq_);
    other_bundle_ = bundle_;
    if (!win_dirty_) other_win_byte_ = win_byte_;
  }
  other_unchanged_ = std::string::npos;
  seq_.reset();  // its blocks go back to the old pool while that pool surely exists
  eng_ = next->engine.get();
  tok_ = next->tokenizer.get();
  bundle_ = std::move(next);
  prefix_tok_ = tok::EditTokenizer(*tok_, /*parse_special=*/false);
  suffix_tok_ = tok::EditTokenizer(*tok_, /*parse_special=*/false);
  init_model_state();
  seq_ = back ? std::move(back) : eng_->new_sequence();
  win_dirty_ = dirty || !set_window(win).ok();  // set_window tokenizes it with the new tokenizer
  suffix_text_.clear();
  suffix_ids_.clear();
  suffix_valid_ = false;
  logits_at_ = saved_at_ = -1;
  saved_logits_.clear();
  first_logits_ = nullptr;
  sampler_.reset();
  pending_.clear();
  prompt_.clear();
  history_.clear();
  heal_.clear();
  drop_chain();
  has_current_ = false;
  last_step_ms_ = 0;
  rebound_ = true;
}

// On the swapping thread, before the switch (ModelSlot::prewarm): this
// session's prompt for its current text, computed on `next` by a private
// session, is handed over for the rebind; the keystroke after the swap then
// computes only what changed since the copy (prefill_prompt's common prefix),
// not the whole prompt. The session's lock is not taken (a suggest may be
// running): the text is copied under prewarm_mu_. Any failure just leaves
// nothing prepared (the rebind then starts cold).
void Session::prewarm_for(const std::shared_ptr<const ModelBundle>& next) {
  std::string text;
  size_t cursor = 0;
  {
    std::lock_guard<std::mutex> pw(prewarm_mu_);
    if (!bundle_ || bundle_->id == next->id) return;
    text = text_;
    cursor = cursor_cp_;
    prepared_seq_.reset();
    prepared_id_ = 0;
    prepared_unchanged_ = std::string::npos;  // edits from here on lower it
  }
  Session tmp(*next->engine, *next->tokenizer, opts_);
  if (!tmp.set_text(text).ok() || !tmp.move(cursor).ok()) return;
  tmp.rebound_ = true;  // adopt what the new model's pool holds (a swap back)
  tmp.cancel_.store(false);  // set_text and move cancel (what a suggest would clear)
  Suggestion s;
  if (!tmp.update_window(last_max_tokens_.load(std::memory_order_relaxed), s).ok()) return;
  if (tmp.fim_mid_ >= 0 && !tmp.build_suffix().ok()) return;
  tmp.build_prompt();
  if (tmp.prompt_.empty() || !tmp.prefill_prompt(s).ok() || s.cancelled) return;
  std::lock_guard<std::mutex> pw(prewarm_mu_);
  prepared_seq_ = std::move(tmp.seq_);
  prepared_id_ = next->id;
  prepared_win_byte_ = tmp.win_byte_;
}

}  // namespace laya
