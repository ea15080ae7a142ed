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
  st.text = doc_.text();
  st.cursor_cp = doc_.cursor_cp();
  st.window_cp = plan_.window_cp();
  st.window_dirty = plan_.dirty();
  st.tokens = reuse_.sequence().tokens();
  if (const float* lg = reuse_.saved_logits()) {
    st.prompt_logits.assign(lg, lg + eng_->n_vocab());
    st.prompt_logits_at = reuse_.saved_at();
  }
  const Chain& chain = reuse_.chain();
  st.chain = chain.tokens;
  st.chain_start = chain.start;
  st.chain_heal = chain.heal;
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
  if (reuse_.sequence().n_past() > 0 || !doc_.text().empty()) {
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
  {
    std::lock_guard<std::mutex> pw(prewarm_mu_);
    LAYA_TRY(doc_.set_text(st.text, "restore"));
    doc_.apply_move(st.cursor_cp);
  }
  has_current_ = false;
  plan_.invalidate();
  // The same window as before (not one chosen afresh: a window stays where it
  // was until it no longer fits, so a fresh choice may differ and change the prompt).
  if (!st.window_dirty) LAYA_TRY(plan_.set_window(doc_, doc_.byte_of(st.window_cp)));
  if (!kv_src || st.tokens.empty()) return Status::Ok();
  if (Status s = reuse_.restore(st.tokens, kv_src); !s.ok()) {
    if (kv_note) *kv_note = s.message();
    return Status::Ok();  // restored from the text: the next suggest recomputes
  }
  const auto at = static_cast<int64_t>(st.tokens.size());
  if (!st.prompt_logits.empty() && st.prompt_logits_at >= 0 && st.prompt_logits_at <= at)
    reuse_.restore_logits(st.prompt_logits, st.prompt_logits_at);
  // The chain is taken only where the sequence holds its prompt plus a prefix
  // of it (what Reuse::take_chain() assumes); its sampler was the greedy one.
  const auto cs = static_cast<size_t>(st.chain_start);
  if (!st.chain.empty() && cs <= st.tokens.size() && st.tokens.size() - cs <= st.chain.size() &&
      std::equal(st.tokens.begin() + static_cast<std::ptrdiff_t>(cs), st.tokens.end(), st.chain.begin())) {
    Chain& chain = reuse_.chain();
    chain.tokens = st.chain;
    chain.start = cs;
    chain.heal = st.chain_heal;
    (void)sampler_for(SamplerParams{});
  }
  return Status::Ok();
}

Status Session::release_kv() {
  cancel();
  std::lock_guard<std::mutex> lock(mu_);
  reuse_.drop_chain();
  return reuse_.truncate_to(0);
}

}  // namespace laya
