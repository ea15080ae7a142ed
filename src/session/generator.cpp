#include "session/generator.h"

#include "core/clock.h"

#include <algorithm>
#include <fmt/format.h>

#include "core/utf8.h"

namespace laya {

// Tokens that are only a prefix of the healed bytes are not allowed: measured
// on the public traces (bench-typing, default model), letting the greedy
// choice walk through short prefix tokens led to splits the model rarely saw
// ("The meeting will" → "rd is a simple tool"): 48.4 % keystroke savings
// against 51.1 % without.
bool heal_allows(std::string_view b, std::string_view left) { return left.empty() || b.starts_with(left); }

std::string_view heal_advance(std::string_view b, std::string_view left) {
  return b.size() >= left.size() ? std::string_view() : left.substr(b.size());
}

void Generated::clear() {
  text.clear();
  tail.clear();
  tokens.clear();
  chosen.clear();
  decode_ms.clear();
  drafted = accepted = 0;
  detokenize_ms = 0;
  stop = StopReason::kLength;
}

Generator::Generator(const tok::Tokenizer* tok, int n_vocab, ContinuationMasks masks)
    : tok_(tok), n_vocab_(n_vocab), masks_(std::move(masks)) {}

// While healed bytes are pending the choice is the greedy one whatever the
// sampling options: those bytes are the user's, not the model's to vary.
// From the prefix index, not a scan of the vocabulary.
int32_t Generator::pick_healed(const float* lg, std::string_view heal_left) const {
  int32_t best = -1;
  for (int32_t id : tok_->prefix_index().starting_with(heal_left)) {
    if (id >= n_vocab_ || masks_.control.contains(id) || masks_.eog.contains(id)) continue;
    if (best < 0 || lg[id] > lg[best] || (lg[id] == lg[best] && id < best)) best = id;
  }
  return best;
}

// Passes a token's bytes on (the healed ones left out) as whole characters;
// false when the output ends here (a line end with single_line, a stop
// string, the reader gone: out->stop says which; *cut_at_line when the token
// itself is cut away at a line end).
bool Generator::emit_text(std::string_view b, std::string_view& heal_left, const GenerateOptions& opt, Generated* out,
                          bool* cut_at_line) {
  const auto t0 = std::chrono::steady_clock::now();
  const size_t skip = std::min(b.size(), heal_left.size());
  heal_left = heal_advance(b, heal_left);
  pending_.append(b.substr(skip));
  const size_t ready = pending_.size() - utf8::incomplete_tail(pending_);
  out->detokenize_ms += ms_since(t0);
  if (ready == 0) return true;
  std::string_view piece = std::string_view(pending_).substr(0, ready);
  bool go_on = true;
  if (opt.single_line) {
    if (const size_t nl = piece.find('\n'); nl != std::string_view::npos) {
      piece = piece.substr(0, nl);
      go_on = false;
      *cut_at_line = true;
      out->stop = StopReason::kLineEnd;
    }
  }
  if (!piece.empty() && !stream_.push(piece)) {
    go_on = false;
    *cut_at_line = false;
    out->stop = stream_.stopped() ? StopReason::kStopString : StopReason::kReaderGone;
  }
  pending_.erase(0, ready);
  return go_on;
}

// Drafts are proposed only where the choice is the arg-max (greedy sampling,
// or healing): there the same logits give the same token however they were
// computed in a pass. A sampled choice draws from the RNG at every step.
Status Generator::feed_step(DecodeTarget& target, int64_t at, int32_t prev, bool may_draft, int64_t max_draft,
                            const GenerateOptions& opt, Generated* out) {
  int k = 0;
  max_draft = std::min({max_draft, target.max_feed() - 1, target.n_ctx() - at});
  if (may_draft && opt.drafter && max_draft > 0) {
    draft_.resize(static_cast<size_t>(1 + max_draft));
    k = opt.drafter->propose(context_, static_cast<int>(max_draft), draft_.data() + 1);
  }
  if (k <= 0) {
    draft_.clear();
    draft_next_ = 0;
    return target.feed(at, prev);
  }
  draft_.resize(static_cast<size_t>(1 + k));
  draft_[0] = prev;
  draft_next_ = 1;
  out->drafted += k;
  return target.feed_many(at, draft_);
}

Status Generator::settle_draft(DecodeTarget& target, int64_t at, int32_t id, const GenerateOptions& opt,
                               Generated* out) {
  if (!draft_pending()) return Status::Ok();
  const auto proposed = static_cast<int>(draft_.size() - 1);
  if (id == draft_[draft_next_]) {
    ++out->accepted;
    if (++draft_next_ == draft_.size()) opt.drafter->feedback(proposed, proposed);
    return Status::Ok();
  }
  // The drafted token sits where `id` belongs: it and those after it go.
  opt.drafter->feedback(proposed, static_cast<int>(draft_next_ - 1));
  draft_next_ = draft_.size();
  return target.cut(at);
}

Status Generator::run(DecodeTarget& target, std::span<const int32_t> prompt, Sampler& smp, const GenerateOptions& opt,
                      StopStream::Sink on_text, Generated* out) {
  out->clear();
  pending_.clear();
  stream_.reset(opt.stop, opt.n_indent, on_text);
  const bool need_history = smp.params().repeat_penalty != 1.0f;
  history_.clear();
  if (need_history) history_.assign(prompt.begin(), prompt.end());
  const std::span<const int32_t> before = opt.draft_context.empty() ? prompt : opt.draft_context;
  context_.reserve(8 + static_cast<size_t>(std::max<int64_t>(opt.max_tokens, 0)) + 1);
  draft_.reserve(static_cast<size_t>(std::max<int64_t>(target.max_feed(), 1)) + 1);
  context_.assign(before.end() - static_cast<std::ptrdiff_t>(std::min<size_t>(before.size(), 8)), before.end());
  draft_.clear();
  draft_next_ = 0;
  if (opt.drafter) opt.drafter->begin();
  if (opt.drafter && !opt.drafted.empty() && !prompt.empty() && opt.known.empty()) {
    draft_.assign(1, prompt.back());
    draft_.insert(draft_.end(), opt.drafted.begin(), opt.drafted.end());
    draft_next_ = 1;
    out->drafted += static_cast<int64_t>(opt.drafted.size());
  }
  const bool greedy = smp.params().temperature <= 0.0f;
  std::string_view heal_left = opt.heal;
  const auto base = static_cast<int64_t>(prompt.size());
  int32_t prev = -1;
  int64_t decided = 0;  // steps whose token is settled (their drafted token, if any, compared)
  for (int64_t i = 0; i < opt.max_tokens; ++i) {
    int32_t id;
    if (i < static_cast<int64_t>(opt.known.size())) {
      id = opt.known[static_cast<size_t>(i)];
    } else {
      const float* lg = nullptr;
      if (i == 0) {
        lg = target.first_logits();
      } else if (lg = target.logits_at(base + i); !lg) {
        if (opt.cancel && opt.cancel->load()) {
          out->stop = StopReason::kCancelled;
          break;
        }
        if (base + i > target.n_ctx()) {
          out->stop = StopReason::kContext;
          break;
        }
        const auto now = std::chrono::steady_clock::now();
        if (opt.deadline && now + std::chrono::duration<double, std::milli>(last_step_ms_) > *opt.deadline) {
          out->stop = StopReason::kDeadline;
          break;
        }
        const bool may_draft = greedy || !heal_left.empty() || opt.draft_sampled;
        if (Status st = feed_step(target, base + i, prev, may_draft, opt.max_tokens - i - 1, opt, out);
            !st.ok())
          return Status(st.code(), fmt::format("decode step {}: {}", i, st.message()));
        last_step_ms_ = ms_since(now);
        out->decode_ms.push_back(last_step_ms_);
        if (opt.drafter) opt.drafter->observe_pass(draft_pending() ? static_cast<int>(draft_.size()) : 1, last_step_ms_);
        lg = target.logits_at(base + i);
      }
      const TokenMask* extra = i == 0 && opt.never_empty ? &masks_.eog : nullptr;
      if (!heal_left.empty() && tok_) {
        id = pick_healed(lg, heal_left);
      } else if (draft_pending() && !greedy) {
        id = smp.sample_given_draft(lg, history_, draft_[draft_next_], extra);
      } else {
        id = smp.sample(lg, history_, extra);
      }
      if (id < 0) {
        out->stop = StopReason::kNothingAllowed;
        break;
      }
      LAYA_TRY(settle_draft(target, base + i, id, opt, out));
      out->chosen.push_back(id);
    }
    decided = i + 1;
    prev = id;
    context_.push_back(id);
    if (ends(id, opt.end_token)) {
      out->stop = StopReason::kEnd;
      break;
    }
    out->tokens.push_back(id);
    if (need_history) history_.push_back(id);
    bool cut_at_line = false;
    if (tok_ && !emit_text(tok_->token_bytes(id), heal_left, opt, out, &cut_at_line)) {
      if (cut_at_line) out->tokens.pop_back();  // its text is cut at the newline
      break;
    }
  }
  // Drafted tokens past the last settled step were never compared: the
  // sequence keeps only the prompt and settled tokens.
  // (Not a verdict on the draft: the output ended first.)
  if (draft_pending()) {
    draft_next_ = draft_.size();
    LAYA_TRY(target.cut(base + decided));
  }
  // What was held back for a stop string that did not come is final now.
  if (out->stop != StopReason::kStopString && out->stop != StopReason::kReaderGone) stream_.finish();
  out->text.assign(stream_.text());
  out->tail.assign(pending_);
  return Status::Ok();
}

}  // namespace laya
