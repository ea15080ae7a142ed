#include "session/reuse.h"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>

#include "core/clock.h"

namespace laya {

void Reuse::rebind(Engine& eng, const tok::Tokenizer& tok, std::unique_ptr<Sequence> seq) {
  seq_.reset();  // the old model's pool must outlive its sequence: the caller frees that one first
  eng_ = &eng;
  tok_ = &tok;
  seq_ = seq ? std::move(seq) : eng.new_sequence();
  logits_at_ = saved_at_ = -1;
  saved_logits_.clear();
  first_logits_ = nullptr;
  chain_.clear();
  rows_n_ = 0;
  reserve_rows(max_rows_);  // the new model's vocabulary
  adopt_cached_ = true;
}

// When the prompt is the last prompt plus the first k chain tokens (the user
// typed or accepted them), the chain's next tokens are what a fresh greedy
// computation would choose as long as each is still allowed and was chosen
// from a set at least as large: at chain position j the old healing left
// R_old(j), the new one leaves R_new; the old set contains the new one when
// R_old(j) is a prefix of R_new (empty R_old: every token), and the token
// itself must be allowed under R_new. The arg-max of a superset that lies in
// the subset is the subset's arg-max, so the choice is the same. The chain is
// re-based on the new prompt, and cut where the argument stops holding.
size_t Reuse::take_chain(const Prompt& p, int max_tokens, bool greedy, const ContinuationMasks& masks) {
  if (chain_.tokens.empty() || !greedy) return 0;
  const std::vector<int32_t>& prompt = p.ids;
  const size_t m = prompt.size();
  if (m < chain_.start || m - chain_.start >= chain_.tokens.size()) return 0;
  const size_t k = m - chain_.start;
  const auto& cached = seq_->tokens();
  const auto head = static_cast<std::ptrdiff_t>(chain_.start);
  if (cached.size() < chain_.start || !std::equal(prompt.begin(), prompt.begin() + head, cached.begin())) return 0;
  if (!std::equal(prompt.begin() + head, prompt.end(), chain_.tokens.begin())) return 0;
  std::string_view r_old = chain_.heal;
  for (size_t j = 0; j < k; ++j) {
    if (!heal_allows(tok_->token_bytes(chain_.tokens[j]), r_old)) return 0;
    r_old = heal_advance(tok_->token_bytes(chain_.tokens[j]), r_old);
  }
  std::string_view r_new = p.heal;
  size_t v = 0;  // valid chain tokens from k on
  for (size_t j = k; j < chain_.tokens.size(); ++j, ++v) {
    const std::string& b = tok_->token_bytes(chain_.tokens[j]);
    if (!r_new.starts_with(r_old) || !heal_allows(b, r_new)) break;
    if (!r_new.empty() && masks.eog.contains(chain_.tokens[j])) break;  // healing never ends on end-of-generation
    r_old = heal_advance(b, r_old);
    r_new = heal_advance(b, r_new);
  }
  if (v == 0) return 0;
  chain_.tokens.erase(chain_.tokens.begin(), chain_.tokens.begin() + static_cast<std::ptrdiff_t>(k));
  chain_.tokens.resize(v);
  chain_.start = m;
  chain_.heal = p.heal;
  // The sequence held chain tokens past the valid part: cut there.
  if (seq_->n_past() > static_cast<int64_t>(m + v)) {
    if (!truncate_to(static_cast<int64_t>(m + v)).ok()) {
      drop_chain();
      return 0;
    }
    logits_at_ = -1;
  }
  return std::min(v, static_cast<size_t>(max_tokens));
}

// Cuts the sequence at the first token that differs from the prompt and
// computes only the rest (at least the last token, for its logits, unless the
// logits of exactly this prompt are still there).
Status Reuse::prefill(std::span<const int32_t> prompt, const std::atomic<bool>& cancel, PrefillReport* r,
                      std::span<const int32_t> draft) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto& cached = seq_->tokens();
  const size_t n = std::min(cached.size(), prompt.size());
  size_t common = static_cast<size_t>(
      std::mismatch(cached.begin(), cached.begin() + static_cast<std::ptrdiff_t>(n), prompt.begin()).first -
      cached.begin());
  if (common == prompt.size() && logits_at_ == static_cast<int64_t>(common) && seq_->n_past() == logits_at_) {
    r->reused = static_cast<int64_t>(common);
    return Status::Ok();
  }
  if (common == prompt.size() && saved_at_ == static_cast<int64_t>(common)) {
    // The same prompt as a suggestion ago (typing inside a healed word that
    // left the model's path): its logits were kept, the generated tokens go.
    LAYA_TRY(truncate_to(static_cast<int64_t>(common)));
    first_logits_ = saved_logits_.data();
    r->reused = static_cast<int64_t>(common);
    return Status::Ok();
  }
  // An empty sequence (a new session, one whose KV was released) looks for
  // its prompt's blocks too: another document with the same head, or this
  // one's own blocks still cached since release.
  if (common < static_cast<size_t>(eng_->options().kv_block_positions) &&
      ((seq_->n_past() > static_cast<int64_t>(common) && prompt.size() > 2 * common) || seq_->n_past() == 0)) {
    // Only the first few tokens (BOS) match: the prompt switched between plain
    // and FIM (PSM puts the prefix marker after BOS: a move into a line with
    // text after it, and back), or the window moved. The cut blocks stay in
    // the pool's cache under their content keys, so the variant used before
    // is adopted again instead of recomputed (measured on zh_meeting_memo:
    // ~700-token prefills at every move into the text and back). At worst
    // the < one block of common tokens is computed again.
    LAYA_TRY(truncate_to(0));
    common = static_cast<size_t>(
        std::min<int64_t>(eng_->reuse_cached_prefix(*seq_, prompt), static_cast<int64_t>(prompt.size())));
  }
  if (adopt_cached_ && seq_->n_past() == 0) {
    // The first prompt after a swap: the model may be one this session used
    // before (the slot's kept bundle), whose pool still holds the blocks of
    // this prompt under their content keys (model_slot.h). Taken, not recomputed.
    common = static_cast<size_t>(
        std::min<int64_t>(eng_->reuse_cached_prefix(*seq_, prompt), static_cast<int64_t>(prompt.size())));
  }
  adopt_cached_ = false;
  rows_n_ = 0;
  if (common == prompt.size()) --common;
  r->reused = static_cast<int64_t>(common);
  logits_at_ = -1;
  if (cancel.load()) {  // Engine::prefill checks only between its chunks
    r->cancelled = true;
    return Status::Ok();
  }
  if (static_cast<int64_t>(common) < saved_at_) saved_at_ = -1;  // the prefill cuts what the saved logits followed
  const std::span<const int32_t> rest = prompt.subspan(common);
  const int64_t small = std::min(max_feed(), eng_->options().n_batch);
  const auto n_draft = static_cast<int64_t>(std::min<size_t>(
      draft.size(), static_cast<size_t>(std::max<int64_t>(0, seq_->n_ctx() - static_cast<int64_t>(prompt.size())))));
  Status st;
  if (n_draft > 0 && static_cast<int64_t>(rest.size()) + n_draft <= small) {
    // One pass for the prompt's rest and the draft: every row's logits kept
    // (row i follows the first common + 1 + i tokens).
    pass_.assign(rest.begin(), rest.end());
    pass_.insert(pass_.end(), draft.begin(), draft.begin() + n_draft);
    rows_.resize(pass_.size() * static_cast<size_t>(eng_->n_vocab()));
    st = eng_->prefill(*seq_, pass_, static_cast<int64_t>(common), rows_.data(), &cancel);
    if (st.ok()) {
      rows_at_ = static_cast<int64_t>(common) + 1;
      rows_n_ = static_cast<int64_t>(pass_.size());
      r->drafted = n_draft;
    }
  } else {
    st = eng_->prefill(*seq_, rest, static_cast<int64_t>(common), nullptr, &cancel);
  }
  r->computed = std::clamp<int64_t>(seq_->n_past() - static_cast<int64_t>(common), 0, static_cast<int64_t>(rest.size()));
  r->ms = ms_since(t0);
  if (st.code() == StatusCode::kCancelled) {  // the sequence holds the chunks done: a prefix of the prompt
    r->cancelled = true;
    return Status::Ok();
  }
  if (!st.ok()) return Status(st.code(), fmt::format("prefill of {} tokens: {}", rest.size(), st.message()));
  logits_at_ = seq_->n_past();
  // Kept for the next keystroke (32 KB for the default model; a copy costs
  // microseconds, the forward pass it saves ~0.6 ms).
  const float* at_prompt = r->drafted > 0 ? logits_at(static_cast<int64_t>(prompt.size())) : seq_->logits();
  saved_logits_.assign(at_prompt, at_prompt + eng_->n_vocab());
  saved_at_ = static_cast<int64_t>(prompt.size());
  if (r->drafted > 0) first_logits_ = saved_logits_.data();
  return Status::Ok();
}

void Reuse::reserve_rows(int64_t n) {
  max_rows_ = std::max<int64_t>(n, 1);
  if (max_rows_ > 1) {
    rows_.reserve(static_cast<size_t>(max_rows_ * eng_->n_vocab()));
    pass_.reserve(static_cast<size_t>(max_rows_));
  }
}

// Logits kept for a longer prefix are stale after a cut.
Status Reuse::truncate_to(int64_t n) {
  if (n < saved_at_) saved_at_ = -1;
  if (n < seq_->n_past()) logits_at_ = -1;
  rows_n_ = std::clamp<int64_t>(n - rows_at_ + 1, 0, rows_n_);
  return eng_->truncate(*seq_, n);
}

const float* Reuse::first_logits() {
  const float* lg = first_logits_ ? first_logits_ : seq_->logits();
  first_logits_ = nullptr;
  return lg;
}

const float* Reuse::logits_at(int64_t at) {
  first_logits_ = nullptr;
  if (seq_->n_past() == at && logits_at_ == at) return seq_->logits();
  if (at >= rows_at_ && at < rows_at_ + rows_n_ && at <= seq_->n_past())
    return rows_.data() + static_cast<size_t>(at - rows_at_) * static_cast<size_t>(eng_->n_vocab());
  return nullptr;
}

// The sequence is cut back to at - 1 tokens first when it holds more (chain
// tokens past a cut suggestion).
Status Reuse::feed(int64_t at, int32_t token) {
  logits_at_ = -1;
  rows_n_ = 0;
  if (seq_->n_past() >= at) LAYA_TRY(truncate_to(at - 1));
  LAYA_TRY(eng_->decode(*seq_, token));
  logits_at_ = seq_->n_past();
  return Status::Ok();
}

Status Reuse::feed_many(int64_t at, std::span<const int32_t> tokens) {
  logits_at_ = -1;
  rows_n_ = 0;
  if (seq_->n_past() >= at) LAYA_TRY(truncate_to(at - 1));
  rows_.resize(tokens.size() * static_cast<size_t>(eng_->n_vocab()));
  LAYA_TRY(eng_->prefill(*seq_, tokens, at - 1, rows_.data()));
  rows_at_ = at;
  rows_n_ = static_cast<int64_t>(tokens.size());
  logits_at_ = seq_->n_past();
  return Status::Ok();
}

Status Reuse::restore(std::span<const int32_t> tokens, const std::function<const uint8_t*(int64_t block)>& kv_src) {
  return eng_->restore_sequence(*seq_, tokens, kv_src);
}

void Reuse::restore_logits(std::vector<float> logits, int64_t at) {
  saved_logits_ = std::move(logits);
  saved_at_ = at;
}

}  // namespace laya
