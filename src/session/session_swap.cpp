// Session: what hot model swap needs (session.h, session/model_slot.h):
// binding to a model, moving to another (rebind_locked), and computing the
// prompt on the next model before the switch (prewarm_for). Kept apart from
// session.cpp, which is about making suggestions.
#include <algorithm>

#include "session/session.h"

namespace laya {

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
  ParkedSequence back;
  if (prepared_.seq && prepared_.id == next->id) {
    back = std::move(prepared_);
  } else if (other_.bundle && other_.bundle->id == next->id) {
    back = std::move(other_);
  }
  prepared_.clear();
  // The window to start from: the one the resumed sequence was built on while
  // the text before it is as it was (its offset still means the same place),
  // else the current one. update_window then checks it against the new
  // model's room and token count, as after any edit; a window kept across the
  // swap is what lets the resumed (or adopted) prompt match.
  size_t win = plan_.window_byte();
  bool dirty = plan_.dirty();
  if (back.seq && back.win_byte <= back.unchanged && back.win_byte <= doc_.cursor_byte()) {
    win = back.win_byte;
    dirty = false;
  }
  other_.clear();
  std::unique_ptr<Sequence> old_seq = reuse_.take_sequence();
  if (slot_->keeps(bundle_->id)) {
    other_.seq = std::move(old_seq);
    other_.bundle = bundle_;
    if (!plan_.dirty()) other_.win_byte = plan_.window_byte();
  }
  old_seq.reset();  // its blocks go back to the old pool while that pool surely exists
  eng_ = next->engine.get();
  tok_ = next->tokenizer.get();
  bundle_ = std::move(next);
  reuse_.rebind(*eng_, *tok_, std::move(back.seq));
  drafter_.reset(bundle_->drafts);
  generator_ = Generator(tok_, static_cast<int>(eng_->n_vocab()),
                         continuation_masks(*tok_, static_cast<int>(eng_->n_vocab()), eng_->hparams().eos_id));
  if (opts_.heal) (void)tok_->prefix_index();
  plan_.rebind(*tok_);
  if (!dirty && !plan_.set_window(doc_, win).ok()) plan_.invalidate();  // tokenized with the new tokenizer
  sampler_.reset();
  prompt_.ids.clear();
  prompt_.heal.clear();
  has_current_ = false;
}

// On the swapping thread, before the switch (ModelSlot::prewarm): this
// session's prompt for its current text, computed on `next` by a private
// session, is handed over for the rebind; the keystroke after the swap then
// computes only what changed since the copy (the prefill's common prefix),
// not the whole prompt. The session's lock is not taken (a suggest may be
// running): the text is copied under prewarm_mu_. Any failure just leaves
// nothing prepared (the rebind then starts cold).
void Session::prewarm_for(const std::shared_ptr<const ModelBundle>& next) {
  std::string text;
  size_t cursor = 0;
  {
    std::lock_guard<std::mutex> pw(prewarm_mu_);
    if (!bundle_ || bundle_->id == next->id) return;
    text = doc_.text();
    cursor = doc_.cursor_cp();
    prepared_.clear();
    prepared_.unchanged = std::string::npos;  // edits from here on lower it
  }
  Session tmp(*next->engine, *next->tokenizer, opts_);
  if (!tmp.set_text(text).ok() || !tmp.move(cursor).ok()) return;
  tmp.reuse_.adopt_cached_next();  // adopt what the new model's pool holds (a swap back)
  tmp.cancel_.store(false);        // set_text and move cancel (what a suggest would clear)
  Suggestion s;
  if (!tmp.plan_prompt(last_max_tokens_.load(std::memory_order_relaxed), s).ok()) return;
  PrefillReport r;
  if (tmp.prompt_.ids.empty() || !tmp.reuse_.prefill(tmp.prompt_.ids, tmp.cancel_, &r).ok() || r.cancelled) return;
  std::lock_guard<std::mutex> pw(prewarm_mu_);
  prepared_.seq = tmp.reuse_.take_sequence();
  prepared_.id = next->id;
  prepared_.win_byte = tmp.plan_.window_byte();
}

}  // namespace laya
