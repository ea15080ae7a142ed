#include "session/session.h"

#include <algorithm>
#include <fmt/format.h>

namespace laya {

namespace {

using Clock = Deadline::Clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the UTF-8 sequence a lead byte starts (0: not a lead byte).
size_t utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return c >= 0xC2 ? 2 : 0;  // C0/C1: overlong
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return c <= 0xF4 ? 4 : 0;
  return 0;
}

// Offsets are code points, so the text must be valid UTF-8 for them to mean
// anything: counts the code points, or returns the byte offset of the first
// bad sequence in *bad.
bool count_utf8(std::string_view s, size_t* n_cp, size_t* bad) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t len = utf8_len(static_cast<unsigned char>(s[i]));
    bool ok = len > 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) ok = is_continuation(static_cast<unsigned char>(s[i + k]));
    if (!ok) {
      *bad = i;
      return false;
    }
    i += len;
    ++n;
  }
  *n_cp = n;
  return true;
}

Status check_utf8(std::string_view s, const char* what, size_t* n_cp) {
  size_t bad = 0;
  if (!count_utf8(s, n_cp, &bad)) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("session {}: the text is not valid UTF-8 (byte {} of {})", what, bad, s.size()));
  }
  return Status::Ok();
}

bool same_params(const SamplerParams& a, const SamplerParams& b) {
  return a.temperature == b.temperature && a.top_k == b.top_k && a.top_p == b.top_p && a.min_p == b.min_p &&
         a.repeat_penalty == b.repeat_penalty && a.repeat_last_n == b.repeat_last_n && a.seed == b.seed;
}

}  // namespace

Session::Session(Engine& engine, const tok::Tokenizer& tokenizer)
    : eng_(engine),
      tok_(tokenizer),
      prefix_tok_(tokenizer, /*parse_special=*/false),  // typed "<|endoftext|>" is text, not a control token
      seq_(engine.new_sequence()),
      masks_(continuation_masks(tokenizer, static_cast<int>(engine.n_vocab()), engine.hparams().eos_id)),
      // A continuation: no leading space is stripped (SentencePiece strips it
      // only at the start of a text), control tokens are never shown.
      detok_(tokenizer, tok::DecodeOptions{.skip_special = true, .strip_leading_space = false}) {}

Session::~Session() = default;

void Session::cancel() {
  cancel_epoch_.fetch_add(1);
  cancel_.store(true);
}

// Byte offset of code point `cp` (<= n_cp_) of valid text_: scanned from the
// cursor or from the start, whichever is nearer, so typing costs O(1).
size_t Session::byte_of(size_t cp) const {
  size_t b = cursor_byte_, c = cursor_cp_;
  if (cp < c && cp < c - cp) b = c = 0;
  while (c < cp) {
    b += utf8_len(static_cast<unsigned char>(text_[b]));
    ++c;
  }
  while (c > cp) {
    do --b;
    while (b > 0 && is_continuation(static_cast<unsigned char>(text_[b])));
    --c;
  }
  return b;
}

Status Session::set_text(std::string_view text) {
  cancel();
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  LAYA_TRY(check_utf8(text, "set_text", &n));
  const auto t0 = Clock::now();
  LAYA_TRY(prefix_tok_.set_text(text));
  text_.assign(text);
  n_cp_ = cursor_cp_ = n;
  cursor_byte_ = text_.size();
  current_.reset();
  pending_tokenize_ms_ += ms_since(t0);
  return Status::Ok();
}

Status Session::edit(size_t pos_cp, size_t n_deleted_cp, std::string_view inserted) {
  cancel();  // an edit stops an in-flight suggestion: its text is out of date
  std::lock_guard<std::mutex> lock(mu_);
  return edit_locked(pos_cp, n_deleted_cp, inserted);
}

Status Session::edit_locked(size_t pos_cp, size_t n_deleted_cp, std::string_view inserted) {
  if (pos_cp > n_cp_) {
    return Status(StatusCode::kOutOfRange,
                  fmt::format("session edit at code point {}: the text has {} code points", pos_cp, n_cp_));
  }
  if (n_deleted_cp > n_cp_ - pos_cp) {
    return Status(StatusCode::kOutOfRange,
                  fmt::format("session edit deleting {} code points at {}: the text has {} code points", n_deleted_cp,
                              pos_cp, n_cp_));
  }
  size_t n_ins = 0;
  LAYA_TRY(check_utf8(inserted, "edit", &n_ins));
  const auto t0 = Clock::now();
  const size_t b = byte_of(pos_cp);
  const size_t e = byte_of(pos_cp + n_deleted_cp);
  // The prefix (text before the cursor) changes from min(pos, cursor) on:
  // the old prefix's tail there is replaced by the new text up to the new
  // cursor. This covers an edit before, at, across or after the cursor.
  const size_t a = std::min(b, cursor_byte_);
  const size_t old_tail = cursor_byte_ - a;
  text_.replace(b, e - b, inserted);
  n_cp_ = n_cp_ - n_deleted_cp + n_ins;
  cursor_cp_ = pos_cp + n_ins;
  cursor_byte_ = b + inserted.size();
  current_.reset();
  Status st = prefix_tok_.edit(a, old_tail, std::string_view(text_).substr(a, cursor_byte_ - a));
  pending_tokenize_ms_ += ms_since(t0);
  if (!st.ok()) {  // keep text and tokenizer in step whatever happened
    LAYA_TRY(prefix_tok_.set_text(std::string_view(text_).substr(0, cursor_byte_)));
  }
  return Status::Ok();
}

Status Session::move(size_t cursor_cp) {
  cancel();
  std::lock_guard<std::mutex> lock(mu_);
  if (cursor_cp > n_cp_) {
    return Status(StatusCode::kOutOfRange,
                  fmt::format("session move to code point {}: the text has {} code points", cursor_cp, n_cp_));
  }
  if (cursor_cp == cursor_cp_) return Status::Ok();
  const auto t0 = Clock::now();
  const size_t nb = byte_of(cursor_cp);
  Status st = nb > cursor_byte_
                  ? prefix_tok_.edit(cursor_byte_, 0, std::string_view(text_).substr(cursor_byte_, nb - cursor_byte_))
                  : prefix_tok_.edit(nb, cursor_byte_ - nb, {});
  cursor_cp_ = cursor_cp;
  cursor_byte_ = nb;
  current_.reset();
  if (!st.ok()) LAYA_TRY(prefix_tok_.set_text(std::string_view(text_).substr(0, cursor_byte_)));
  pending_tokenize_ms_ += ms_since(t0);
  return Status::Ok();
}

Status Session::accept(size_t n_chars) {
  cancel();
  std::lock_guard<std::mutex> lock(mu_);
  if (!current_) {
    return Status(StatusCode::kInvalidArgument,
                  "session accept: there is no suggestion to accept (suggest first; an edit or move drops it)");
  }
  size_t n = 0, bad = 0;
  count_utf8(current_->text, &n, &bad);  // valid: made of complete characters
  if (n_chars > n) {
    return Status(StatusCode::kOutOfRange,
                  fmt::format("session accept of {} code points: the suggestion has {}", n_chars, n));
  }
  size_t bytes = 0;
  for (size_t i = 0; i < n_chars; ++i) bytes += utf8_len(static_cast<unsigned char>(current_->text[bytes]));
  const std::string taken = current_->text.substr(0, bytes);  // edit_locked drops current_
  return edit_locked(cursor_cp_, 0, taken);
}

Status Session::check_options(const SuggestOptions& opt) const {
  const int64_t reserve = 1 + (tok_.add_bos_default() ? 1 : 0);  // at least one prompt token (+ BOS)
  if (opt.max_tokens < 1 || opt.max_tokens > seq_->n_ctx() - reserve) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("suggest: max_tokens {} must be in [1, {}] (the context is {} tokens)", opt.max_tokens,
                              seq_->n_ctx() - reserve, seq_->n_ctx()));
  }
  if (Status st = Sampler::validate(opt.sampling, static_cast<int>(eng_.n_vocab())); !st.ok()) {
    return Status(st.code(), fmt::format("suggest: {}", st.message()));
  }
  return Status::Ok();
}

// The prompt: BOS (where the model adds one) + the tokens of the text before
// the cursor. When they do not fit in the context with room for max_tokens,
// only the last tokens that fit are kept. That moves the prompt's start on
// every keystroke, so nothing cached is reusable there: the window proper
// (whole lines, moving in large steps, so the cache stays valid) is a later
// slice of issue 10.
void Session::build_prompt(int max_tokens) {
  prompt_.clear();
  const bool bos = tok_.add_bos_default() && tok_.bos_id() >= 0;
  const auto& ids = prefix_tok_.ids();
  const size_t room = static_cast<size_t>(seq_->n_ctx() - max_tokens - (bos ? 1 : 0));
  const size_t from = ids.size() > room ? ids.size() - room : 0;
  if (bos) prompt_.push_back(tok_.bos_id());
  prompt_.insert(prompt_.end(), ids.begin() + static_cast<std::ptrdiff_t>(from), ids.end());
}

// Cuts the sequence at the first token that differs from the prompt and
// computes only the rest (at least the last token, for its logits, unless the
// logits of exactly this prompt are still there).
Status Session::prefill_prompt(Suggestion& s) {
  const auto t0 = Clock::now();
  const auto& cached = seq_->tokens();
  const size_t n = std::min(cached.size(), prompt_.size());
  size_t common = static_cast<size_t>(
      std::mismatch(cached.begin(), cached.begin() + static_cast<std::ptrdiff_t>(n), prompt_.begin()).first -
      cached.begin());
  if (common == prompt_.size() && logits_at_ == static_cast<int64_t>(common) && seq_->n_past() == logits_at_) {
    s.timings.tokens_reused = static_cast<int64_t>(common);
    return Status::Ok();
  }
  if (common == prompt_.size()) --common;
  s.timings.tokens_reused = static_cast<int64_t>(common);
  logits_at_ = -1;
  if (cancel_.load()) {  // Engine::prefill checks only between its chunks
    s.cancelled = true;
    return Status::Ok();
  }
  const std::span<const int32_t> rest(prompt_.data() + common, prompt_.size() - common);
  Status st = eng_.prefill(*seq_, rest, static_cast<int64_t>(common), nullptr, &cancel_);
  s.timings.tokens_computed = std::max<int64_t>(0, seq_->n_past() - static_cast<int64_t>(common));
  s.timings.prefill_ms = ms_since(t0);
  if (st.code() == StatusCode::kCancelled) {  // the sequence holds the chunks done: a prefix of the prompt
    s.cancelled = true;
    return Status::Ok();
  }
  if (!st.ok()) return Status(st.code(), fmt::format("suggest: prefill of {} tokens: {}", rest.size(), st.message()));
  logits_at_ = seq_->n_past();
  return Status::Ok();
}

Sampler& Session::sampler_for(const SamplerParams& p) {
  if (!sampler_ || !same_params(sampler_->params(), p)) {
    sampler_ = std::make_unique<Sampler>(p, static_cast<int>(eng_.n_vocab()));
    sampler_->set_mask(masks_.control);  // control tokens (FIM markers, BOS) are never part of a suggestion
  }
  // The same draws for the same text, keystroke after keystroke: a suggestion
  // depends on the text and the options only (and so equals a fresh session's).
  sampler_->reseed(p.seed);
  return *sampler_;
}

// Appends a piece of text; with single_line, cuts it at a newline and returns
// false (stop).
bool Session::emit(std::string_view piece, bool single_line,
                   const std::function<void(std::string_view)>& on_piece, Suggestion& s) {
  bool go_on = true;
  if (single_line) {
    if (const size_t nl = piece.find('\n'); nl != std::string_view::npos) {
      piece = piece.substr(0, nl);
      go_on = false;
    }
  }
  s.text.append(piece);
  if (on_piece && !piece.empty()) on_piece(piece);
  return go_on;
}

Status Session::generate(const SuggestOptions& opt, std::optional<Clock::time_point> end,
                         const std::function<void(std::string_view)>& on_piece, Suggestion& s) {
  Sampler& smp = sampler_for(opt.sampling);
  const bool need_history = opt.sampling.repeat_penalty != 1.0f;
  history_.clear();
  if (need_history) history_.assign(prompt_.begin(), prompt_.end());
  detok_.reset();
  for (int i = 0; i < opt.max_tokens; ++i) {
    if (i > 0) {  // feed the previous token: its logits give this one
      if (cancel_.load()) {
        s.cancelled = true;
        break;
      }
      if (seq_->n_past() >= seq_->n_ctx()) break;
      const auto now = Clock::now();
      if (end && now + std::chrono::duration<double, std::milli>(last_step_ms_) > *end) {
        s.cut_by_deadline = true;
        break;
      }
      logits_at_ = -1;
      if (Status st = eng_.decode(*seq_, s.tokens.back()); !st.ok()) {
        return Status(st.code(), fmt::format("suggest: decode step {}: {}", i, st.message()));
      }
      logits_at_ = seq_->n_past();
      last_step_ms_ = ms_since(now);
      s.timings.decode_ms.push_back(last_step_ms_);
    }
    const int32_t id = smp.sample(seq_->logits(), history_);
    if (masks_.eog.contains(id) || masks_.control.contains(id)) break;  // control only when all are masked
    s.tokens.push_back(id);
    if (need_history) history_.push_back(id);
    const auto t0 = Clock::now();
    const std::string piece = detok_.push(id);
    s.timings.detokenize_ms += ms_since(t0);
    if (!emit(piece, opt.single_line, on_piece, s)) {
      s.tokens.pop_back();  // its text is cut at the newline
      break;
    }
  }
  // An incomplete character left at the end is not shown (detok_ holds it).
  return Status::Ok();
}

Result<Suggestion> Session::suggest(const SuggestOptions& opt, const std::function<void(std::string_view)>& on_piece) {
  const auto start = Clock::now();
  // A cancel() after this call began must stop it, even one that came while
  // it waited for the lock; one before it began must not.
  const uint64_t epoch = cancel_epoch_.load();
  std::lock_guard<std::mutex> lock(mu_);
  cancel_.store(false);
  if (cancel_epoch_.load() != epoch) cancel_.store(true);
  LAYA_TRY(check_options(opt));
  const std::optional<Clock::time_point> end = opt.deadline.end_for(start);
  current_.emplace();
  Suggestion& s = *current_;
  const auto t0 = Clock::now();
  build_prompt(opt.max_tokens);
  s.timings.tokenize_ms = pending_tokenize_ms_ + ms_since(t0);
  pending_tokenize_ms_ = 0;
  if (!prompt_.empty()) {
    Status st = prefill_prompt(s);
    if (st.ok() && !s.cancelled) st = generate(opt, end, on_piece, s);
    if (!st.ok()) {
      current_.reset();  // nothing to accept; the sequence still holds a correct prefix
      return st;
    }
  }
  s.timings.total_ms = ms_since(start);
  return s;
}

}  // namespace laya
