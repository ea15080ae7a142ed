// Session: what persistence needs (session/session_store.h): the state to
// save, restoring it into a new session (checked: a saved file is input like
// any other), and giving the KV blocks back. Kept apart from session.cpp,
// which is about making suggestions.
#include <algorithm>
#include <fmt/format.h>

#include "core/utf8.h"
#include "session/session.h"

namespace laya {

Session::SavedState Session::saved_state() const {
  SavedState st;
  st.text = text_;
  st.cursor_cp = cursor_cp_;
  st.window_cp = win_cp_;
  st.window_dirty = win_dirty_;
  st.tokens = seq_->tokens();
  if (saved_at_ >= 0) {
    st.prompt_logits = saved_logits_;
    st.prompt_logits_at = saved_at_;
  }
  st.chain = chain_;
  st.chain_start = chain_start_;
  st.chain_heal = chain_heal_;
  return st;
}

namespace {

Status check_ids(std::span<const int32_t> ids, int64_t n_vocab, const char* what) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n_vocab) {
      return Status(StatusCode::kInvalidArgument, fmt::format("session restore: {} id {} at index {} is outside the "
                                                              "vocabulary [0, {})", what, ids[i], i, n_vocab));
    }
  }
  return Status::Ok();
}

}  // namespace

Status Session::restore(const SavedState& st, const std::function<const uint8_t*(int64_t block)>& kv_src,
                        std::string* kv_note) {
  cancel();
  std::lock_guard<std::mutex> lock(mu_);
  if (seq_->n_past() > 0 || !text_.empty()) {
    return Status(StatusCode::kInvalidArgument, "session restore: the session has been used; restore into a new one");
  }
  size_t n = 0, bad = 0;
  if (!utf8::count(st.text, &n, &bad)) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("session restore: the text is not valid UTF-8 (byte {} of {})", bad, st.text.size()));
  }
  if (st.cursor_cp > n || st.window_cp > st.cursor_cp) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("session restore: cursor {} and window start {} must satisfy window <= cursor <= {} "
                              "(the text's code points)", st.cursor_cp, st.window_cp, n));
  }
  LAYA_TRY(check_ids(st.tokens, eng_->n_vocab(), "cached token"));
  LAYA_TRY(check_ids(st.chain, eng_->n_vocab(), "chain token"));
  if (!st.prompt_logits.empty() && static_cast<int64_t>(st.prompt_logits.size()) != eng_->n_vocab()) {
    return Status(StatusCode::kInvalidArgument, fmt::format("session restore: {} prompt logits, expected n_vocab = {}",
                                                            st.prompt_logits.size(), eng_->n_vocab()));
  }
  text_ = st.text;
  n_cp_ = n;
  cursor_cp_ = cursor_byte_ = 0;
  cursor_byte_ = byte_of(st.cursor_cp);
  cursor_cp_ = st.cursor_cp;
  has_current_ = false;
  win_dirty_ = true;
  // The same window as before (not one chosen afresh: a window stays where it
  // was until it no longer fits, so a fresh choice may differ and change the prompt).
  if (!st.window_dirty) LAYA_TRY(set_window(byte_of(st.window_cp)));
  if (!kv_src || st.tokens.empty()) return Status::Ok();
  if (Status s = eng_->restore_sequence(*seq_, st.tokens, kv_src); !s.ok()) {
    if (kv_note) *kv_note = s.message();
    return Status::Ok();  // restored from the text: the next suggest recomputes
  }
  const auto at = static_cast<int64_t>(st.tokens.size());
  if (!st.prompt_logits.empty() && st.prompt_logits_at >= 0 && st.prompt_logits_at <= at) {
    saved_logits_ = st.prompt_logits;
    saved_at_ = st.prompt_logits_at;
  }
  // The chain is taken only where the sequence holds its prompt plus a prefix
  // of it (what reuse_chain() assumes); its sampler was the greedy one.
  const auto cs = static_cast<size_t>(st.chain_start);
  if (!st.chain.empty() && cs <= st.tokens.size() && st.tokens.size() - cs <= st.chain.size() &&
      std::equal(st.tokens.begin() + static_cast<std::ptrdiff_t>(cs), st.tokens.end(), st.chain.begin())) {
    chain_ = st.chain;
    chain_start_ = cs;
    chain_heal_ = st.chain_heal;
    (void)sampler_for(SamplerParams{});
  }
  return Status::Ok();
}

Status Session::release_kv() {
  cancel();
  std::lock_guard<std::mutex> lock(mu_);
  drop_chain();
  return truncate_to(0);
}

}  // namespace laya
