#include "session/session.h"

#include <algorithm>
#include <fmt/format.h>

#include "core/foreground.h"
#include "core/utf8.h"

namespace laya {

namespace {

using Clock = Deadline::Clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

Status check_utf8(std::string_view s, const char* what, size_t* n_cp) {
  size_t bad = 0;
  if (!utf8::count(s, n_cp, &bad)) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("session {}: the text is not valid UTF-8 (byte {} of {})", what, bad, s.size()));
  }
  return Status::Ok();
}

bool same_params(const SamplerParams& a, const SamplerParams& b) {
  return a.temperature == b.temperature && a.top_k == b.top_k && a.top_p == b.top_p && a.min_p == b.min_p &&
         a.repeat_penalty == b.repeat_penalty && a.repeat_last_n == b.repeat_last_n && a.seed == b.seed;
}

// Only a greedy choice is a function of the logits alone, so only greedy
// chains can be reused (a draw depends on the random state, a repetition
// penalty on the history).
bool reusable(const SamplerParams& p) { return p.temperature <= 0.0f && p.repeat_penalty == 1.0f; }

// Token healing: whether token bytes `b` may come next while `left` (the
// healed bytes not yet generated) is pending: they must start with it. Tokens
// that are only a prefix of it are not allowed: measured on the public traces
// (bench-typing, default model), letting the greedy choice walk through short
// prefix tokens led to splits the model rarely saw ("The meeting will" →
// "rd is a simple tool"): 48.4 % keystroke savings against 51.1 % without.
bool heal_allows(std::string_view b, std::string_view left) { return left.empty() || b.starts_with(left); }

// What is left of `left` after a token with bytes `b` (heal_allows(b, left)).
std::string_view heal_advance(std::string_view b, std::string_view left) {
  return b.size() >= left.size() ? std::string_view() : left.substr(b.size());
}

// Whole lines of the suffix: at most this many bytes are looked at per token
// of the bound (a line longer than that is cut).
constexpr size_t kSuffixBytesPerToken = 8;
// Token healing takes back the last token of the last pre-token piece: with
// healed tokens allowed only where a token starts with all their bytes, two
// healed tokens often match no token at all (697 of 2,863 positions of the
// public traces showed no suggestion), one always matches (itself).
constexpr size_t kMaxHealTokens = 1;
// The smallest window room accepted (prompt tokens for the text).
constexpr int64_t kMinRoom = 16;

}  // namespace

void Suggestion::clear() {
  text.clear();
  tokens.clear();
  cut_by_deadline = cancelled = window_moved = fim = rebound = false;
  typed_through = 0;
  healed_bytes = 0;
  timings.tokenize_ms = timings.prefill_ms = timings.detokenize_ms = timings.total_ms = timings.rebind_ms = 0;
  timings.tokens_reused = timings.tokens_computed = 0;
  timings.decode_ms.clear();
}

Session::Session(Engine& engine, const tok::Tokenizer& tokenizer, const SessionOptions& options)
    : eng_(&engine),
      tok_(&tokenizer),
      opts_(options),
      prefix_tok_(tokenizer, /*parse_special=*/false),  // typed "<|endoftext|>" is text, not a control token
      suffix_tok_(tokenizer, /*parse_special=*/false),
      seq_(engine.new_sequence()) {
  init_model_state();
}

Session::Session(ModelSlot& slot, const SessionOptions& options) : Session(slot.current(), &slot, options) {}

Session::Session(std::shared_ptr<const ModelBundle> bundle, ModelSlot* slot, const SessionOptions& options)
    : Session(*bundle->engine, *bundle->tokenizer, options) {
  slot_ = slot;
  bundle_ = std::move(bundle);
  slot_->attach(this);
}

Session::~Session() {
  if (slot_) slot_->detach(this);  // waits for a prewarm of this session in progress
}

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
    b += utf8::sequence_length(static_cast<unsigned char>(text_[b]));
    ++c;
  }
  while (c > cp) {
    do --b;
    while (b > 0 && utf8::is_continuation(static_cast<unsigned char>(text_[b])));
    --c;
  }
  return b;
}

size_t Session::count_cp(size_t from_byte, size_t to_byte) const {
  size_t n = 0;
  for (size_t b = from_byte; b < to_byte; ++b) n += !utf8::is_continuation(static_cast<unsigned char>(text_[b]));
  return n;
}

Status Session::set_text(std::string_view text) {
  cancel();
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  LAYA_TRY(check_utf8(text, "set_text", &n));
  {
    std::lock_guard<std::mutex> pw(prewarm_mu_);
    text_.assign(text);
    other_unchanged_ = prepared_unchanged_ = 0;
    n_cp_ = cursor_cp_ = n;
    cursor_byte_ = text_.size();
  }
  win_dirty_ = true;  // the window is chosen (and tokenized) at the next suggest
  has_current_ = false;
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
  // An edit that starts before the window (its line start may be gone, and
  // the cursor ends before it) makes the next suggest choose it again.
  if (b < win_byte_) win_dirty_ = true;
  // The window's text changes from min(pos, cursor) on: the old text's tail
  // there is replaced by the new text up to the new cursor. This covers an
  // edit before, at, across or after the cursor.
  const size_t a = std::min(b, cursor_byte_);
  const size_t old_tail = cursor_byte_ - a;
  {
    std::lock_guard<std::mutex> pw(prewarm_mu_);
    text_.replace(b, e - b, inserted);
    other_unchanged_ = std::min(other_unchanged_, b);
    prepared_unchanged_ = std::min(prepared_unchanged_, b);
    n_cp_ = n_cp_ - n_deleted_cp + n_ins;
    cursor_cp_ = pos_cp + n_ins;
    cursor_byte_ = b + inserted.size();
  }
  has_current_ = false;
  if (!win_dirty_) {
    const std::string_view now = std::string_view(text_).substr(a, cursor_byte_ - a);
    if (!prefix_tok_.edit(a - win_byte_, old_tail, now).ok()) win_dirty_ = true;  // re-tokenized at suggest
  }
  pending_tokenize_ms_ += ms_since(t0);
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
  if (nb < win_byte_) win_dirty_ = true;
  if (!win_dirty_) {
    const std::string_view t(text_);
    Status st = nb > cursor_byte_ ? prefix_tok_.edit(cursor_byte_ - win_byte_, 0, t.substr(cursor_byte_, nb - cursor_byte_))
                                  : prefix_tok_.edit(nb - win_byte_, cursor_byte_ - nb, {});
    if (!st.ok()) win_dirty_ = true;
  }
  {
    std::lock_guard<std::mutex> pw(prewarm_mu_);
    cursor_cp_ = cursor_cp;
    cursor_byte_ = nb;
  }
  has_current_ = false;
  pending_tokenize_ms_ += ms_since(t0);
  return Status::Ok();
}

Status Session::accept(size_t n_chars) {
  cancel();
  std::lock_guard<std::mutex> lock(mu_);
  if (!has_current_) {
    return Status(StatusCode::kInvalidArgument,
                  "session accept: there is no suggestion to accept (suggest first; an edit or move drops it)");
  }
  // Only the valid UTF-8 prefix can be taken: a model may emit byte tokens
  // that never form a character (seen with random-weight models: a suggestion
  // "ab\xff..." whose first two characters an accept takes).
  size_t n = 0, bad = 0;
  if (!utf8::count(current_.text, &n, &bad)) utf8::count(std::string_view(current_.text).substr(0, bad), &n, nullptr);
  if (n_chars > n) {
    return Status(StatusCode::kOutOfRange,
                  fmt::format("session accept of {} code points: the suggestion has {}", n_chars, n));
  }
  const size_t bytes = utf8::offset_of(current_.text, n_chars);
  // edit_locked drops current_ (has_current_), but its text stays intact
  // until the next suggest writes it, so it can be inserted directly.
  return edit_locked(cursor_cp_, 0, std::string_view(current_.text).substr(0, bytes));
}

Status Session::pin_window(size_t start_cp) {
  cancel();
  std::lock_guard<std::mutex> lock(mu_);
  if (start_cp > cursor_cp_) {
    return Status(StatusCode::kOutOfRange,
                  fmt::format("session pin_window at code point {}: past the cursor ({})", start_cp, cursor_cp_));
  }
  return set_window(byte_of(start_cp));
}

// ---- the window ---------------------------------------------------------------

int64_t Session::window_room(int max_tokens) const {
  int64_t ctx = seq_->n_ctx();
  if (opts_.context_tokens > 0) ctx = std::min(ctx, opts_.context_tokens);
  const bool bos = tok_->add_bos_default() && tok_->bos_id() >= 0;
  // The FIM part is reserved whether or not this keystroke has a suffix, so
  // the room (and with it the window) does not change as the cursor moves.
  const int64_t fim = fim_mid_ >= 0 ? 3 + opts_.fim_suffix_tokens : 0;
  return ctx - max_tokens - (bos ? 1 : 0) - fim;
}

Status Session::set_window(size_t start_byte) {
  win_byte_ = start_byte;
  win_cp_ = count_cp(0, start_byte);
  win_dirty_ = false;
  return prefix_tok_.set_text(std::string_view(text_).substr(start_byte, cursor_byte_ - start_byte));
}

// Chooses the window for the cursor: the text from the first line start whose
// text up to the cursor holds at most room / 2 tokens (all of it when it fits
// in the room). Half the room, so typing adds room / 2 tokens before the next
// move. When no line start qualifies (one very long line), or the best one
// leaves less than room / 4 tokens (a long line just before the cursor), the
// start is a code point found the same way. Deterministic: the same text,
// cursor and room give the same window.
Status Session::choose_window(int64_t room) {
  const size_t c = cursor_byte_;
  const std::string_view t(text_);
  std::vector<int32_t> ids;
  auto tokens = [&](size_t s) -> int64_t {
    ids.clear();
    (void)tok_->encode_append(t.substr(s, c - s), false, &ids);
    return static_cast<int64_t>(ids.size());
  };
  const int64_t target = room / 2;
  // Bytes bound tokens; a long text is not tokenized whole just to find out.
  if (static_cast<int64_t>(c) < room || (c <= static_cast<size_t>(16 * room) && tokens(0) <= room)) return set_window(0);
  // Candidates: line starts within 16 bytes per token of room before the cursor.
  const size_t lo_byte = c > static_cast<size_t>(16 * room) ? c - static_cast<size_t>(16 * room) : 0;
  std::vector<size_t> starts;
  for (size_t b = lo_byte; b < c; ++b)
    if (b == 0 || t[b - 1] == '\n') starts.push_back(b);
  // Smallest index whose text holds <= target tokens (token counts fall as the start moves right).
  auto first_fitting = [&](const std::vector<size_t>& cand) {
    size_t lo = 0, hi = cand.size();
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      if (tokens(cand[mid]) <= target) hi = mid; else lo = mid + 1;
    }
    return lo;
  };
  size_t k = first_fitting(starts);
  if (k < starts.size() && tokens(starts[k]) >= room / 4) return set_window(starts[k]);
  // A code point start between the last line start that does not fit and the cursor.
  const size_t from = k == 0 ? lo_byte : starts[k - 1];
  std::vector<size_t> cps;
  for (size_t b = from; b < c; ++b)
    if (!utf8::is_continuation(static_cast<unsigned char>(t[b]))) cps.push_back(b);
  k = first_fitting(cps);
  return set_window(k < cps.size() ? cps[k] : c);
}

Status Session::update_window(int max_tokens, Suggestion& s) {
  const int64_t room = window_room(max_tokens);
  const size_t before = win_cp_;
  const bool was_dirty = win_dirty_;
  if (!win_dirty_) {
    const auto n = static_cast<int64_t>(prefix_tok_.ids().size());
    if (n <= room && (win_byte_ == 0 || n >= room / 4)) return Status::Ok();
  }
  LAYA_TRY(choose_window(room));
  if (!was_dirty || win_cp_ != before) {
    s.window_moved = true;
    ++window_moves_;
  }
  return Status::Ok();
}

// ---- the prompt ----------------------------------------------------------------

// The bounded suffix: up to fim_suffix_lines lines after the cursor (at most
// kSuffixBytesPerToken bytes per token of the bound), then whole lines dropped
// from the end until its tokens fit; a single line too long is cut to its
// first tokens. Re-tokenized only when that text changed (typing at the
// cursor leaves it as it was).
Status Session::build_suffix() {
  const std::string_view t(text_);
  const size_t cap = kSuffixBytesPerToken * static_cast<size_t>(std::max(opts_.fim_suffix_tokens, 1));
  size_t end = cursor_byte_;
  for (int line = 0; line < opts_.fim_suffix_lines && end < t.size(); ++line) {
    const size_t nl = t.find('\n', end);
    end = nl == std::string_view::npos ? t.size() : nl + 1;
  }
  if (end - cursor_byte_ > cap) {
    end = cursor_byte_ + cap;
    while (end > cursor_byte_ && utf8::is_continuation(static_cast<unsigned char>(t[end]))) --end;
  }
  std::string_view suffix = t.substr(cursor_byte_, end - cursor_byte_);
  if (suffix_valid_ && suffix == suffix_text_) return Status::Ok();
  suffix_text_.assign(suffix);
  suffix_ids_.clear();
  suffix_valid_ = true;
  if (suffix.find_first_not_of(" \t\r\n") == std::string_view::npos) return Status::Ok();  // blank: no FIM
  const auto bound = static_cast<size_t>(opts_.fim_suffix_tokens);
  // Tokenized by editing suffix_tok_ from its last text into this one (its ids
  // always equal encode_append's): no allocation once warm, and little work.
  auto tokenize = [&](std::string_view s) {
    const std::string_view old = suffix_tok_.text();
    size_t p = 0, q = 0;
    while (p < old.size() && p < s.size() && old[p] == s[p]) ++p;
    while (p > 0 && p < s.size() && utf8::is_continuation(static_cast<unsigned char>(s[p]))) --p;
    while (q < old.size() - p && q < s.size() - p && old[old.size() - 1 - q] == s[s.size() - 1 - q]) ++q;
    while (q > 0 && utf8::is_continuation(static_cast<unsigned char>(s[s.size() - q]))) --q;
    return suffix_tok_.edit(p, old.size() - p - q, s.substr(p, s.size() - p - q));
  };
  while (true) {
    LAYA_TRY(tokenize(suffix));
    if (suffix_tok_.ids().size() <= bound) break;
    const size_t last_nl = suffix.substr(0, suffix.size() - 1).rfind('\n');
    if (last_nl == std::string_view::npos) break;  // one line too long: cut to its first tokens
    suffix = suffix.substr(0, last_nl + 1);
  }
  const auto& ids = suffix_tok_.ids();
  suffix_ids_.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), bound)));
  return Status::Ok();
}

// The prompt: [BOS] + the window's tokens minus the healed ones, wrapped in
// FIM markers with the suffix when there is one.
void Session::build_prompt() {
  prompt_.clear();
  const auto& ids = prefix_tok_.ids();
  const bool bos = tok_->add_bos_default() && tok_->bos_id() >= 0;
  const bool fim = fim_mid_ >= 0 && !suffix_ids_.empty();
  size_t heal_n = opts_.heal ? std::min(prefix_tok_.last_piece_tokens(), kMaxHealTokens) : 0;
  heal_n = std::min(heal_n, ids.size());
  if (!bos && !fim && heal_n == ids.size() && heal_n > 0) --heal_n;  // keep one token to start from
  const size_t keep = ids.size() - heal_n;
  heal_.clear();
  for (size_t i = keep; i < ids.size(); ++i) heal_ += tok_->token_bytes(ids[i]);
  if (bos) prompt_.push_back(tok_->bos_id());
  auto add_prefix = [&] { prompt_.insert(prompt_.end(), ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(keep)); };
  if (!fim) {
    add_prefix();
  } else if (opts_.fim == FimOrder::kSpm) {
    prompt_.push_back(fim_suf_);
    prompt_.insert(prompt_.end(), suffix_ids_.begin(), suffix_ids_.end());
    prompt_.push_back(fim_pre_);
    add_prefix();
    prompt_.push_back(fim_mid_);
  } else {
    prompt_.push_back(fim_pre_);
    add_prefix();
    prompt_.push_back(fim_suf_);
    prompt_.insert(prompt_.end(), suffix_ids_.begin(), suffix_ids_.end());
    prompt_.push_back(fim_mid_);
  }
}

Status Session::check_options(const SuggestOptions& opt) const {
  if (opt.max_tokens < 1 || window_room(opt.max_tokens) < kMinRoom) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("suggest: max_tokens {} must be in [1, {}] (the context is {} tokens, {} of them kept "
                              "for the prompt)",
                              opt.max_tokens, std::max<int64_t>(1, opt.max_tokens + window_room(opt.max_tokens) - kMinRoom),
                              seq_->n_ctx(), kMinRoom));
  }
  if (Status st = Sampler::validate(opt.sampling, static_cast<int>(eng_->n_vocab())); !st.ok()) {
    return Status(st.code(), fmt::format("suggest: {}", st.message()));
  }
  return Status::Ok();
}

// ---- reuse of the last suggestion's tokens ---------------------------------------

// When the prompt is the last prompt plus the first k chain tokens (the user
// typed or accepted them), the chain's next tokens are what a fresh greedy
// computation would choose as long as each is still allowed and was chosen
// from a set at least as large: at chain position j the old healing left
// R_old(j), the new one leaves R_new; the old set contains the new one when
// R_old(j) is a prefix of R_new (empty R_old: every token), and the token
// itself must be allowed under R_new. The arg-max of a superset that lies in
// the subset is the subset's arg-max, so the choice is the same. Returns how
// many chain tokens the new suggestion starts with (the chain is re-based on
// the new prompt, and cut where the argument stops holding).
size_t Session::reuse_chain(const SuggestOptions& opt) {
  if (chain_.empty() || !reusable(opt.sampling) || !sampler_ || !reusable(sampler_->params())) return 0;
  const size_t m = prompt_.size();
  if (m < chain_start_ || m - chain_start_ >= chain_.size()) return 0;
  const size_t k = m - chain_start_;
  const auto& cached = seq_->tokens();
  if (cached.size() < chain_start_ || !std::equal(prompt_.begin(), prompt_.begin() + static_cast<std::ptrdiff_t>(chain_start_), cached.begin()))
    return 0;
  if (!std::equal(prompt_.begin() + static_cast<std::ptrdiff_t>(chain_start_), prompt_.end(), chain_.begin())) return 0;
  std::string_view r_old = chain_heal_;
  for (size_t j = 0; j < k; ++j) {
    if (!heal_allows(tok_->token_bytes(chain_[j]), r_old)) return 0;
    r_old = heal_advance(tok_->token_bytes(chain_[j]), r_old);
  }
  std::string_view r_new = heal_;
  size_t v = 0;  // valid chain tokens from k on
  for (size_t j = k; j < chain_.size(); ++j, ++v) {
    const std::string& b = tok_->token_bytes(chain_[j]);
    if (!r_new.starts_with(r_old) || !heal_allows(b, r_new)) break;
    if (!r_new.empty() && masks_.eog.contains(chain_[j])) break;  // healing never ends on end-of-generation
    r_old = heal_advance(b, r_old);
    r_new = heal_advance(b, r_new);
  }
  if (v == 0) return 0;
  // Re-base: the chain now follows the new prompt; cut the sequence where the
  // valid part ends (it held chain tokens past it).
  chain_.erase(chain_.begin(), chain_.begin() + static_cast<std::ptrdiff_t>(k));
  chain_.resize(v);
  chain_start_ = m;
  chain_heal_ = heal_;
  if (seq_->n_past() > static_cast<int64_t>(m + v)) {
    if (!truncate_to(static_cast<int64_t>(m + v)).ok()) {
      drop_chain();
      return 0;
    }
    logits_at_ = -1;
  }
  return std::min(v, static_cast<size_t>(opt.max_tokens));
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
  if (common == prompt_.size() && saved_at_ == static_cast<int64_t>(common)) {
    // The same prompt as a suggestion ago (typing inside a healed word that
    // left the model's path): its logits were kept, the generated tokens go.
    LAYA_TRY(truncate_to(static_cast<int64_t>(common)));
    first_logits_ = saved_logits_.data();
    s.timings.tokens_reused = static_cast<int64_t>(common);
    return Status::Ok();
  }
  // An empty sequence (a new session, one whose KV was released) looks for
  // its prompt's blocks too: another document with the same head, or this
  // one's own blocks still cached since release_kv().
  if (common < static_cast<size_t>(eng_->options().kv_block_positions) &&
      ((seq_->n_past() > static_cast<int64_t>(common) && prompt_.size() > 2 * common) || seq_->n_past() == 0)) {
    // Only the first few tokens (BOS) match: the prompt switched between plain
    // and FIM (PSM puts the prefix marker after BOS: a move into a line with
    // text after it, and back), or the window moved. The cut blocks stay in
    // the pool's cache under their content keys, so the variant used before
    // is adopted again instead of recomputed (measured on zh_meeting_memo:
    // ~700-token prefills at every move into the text and back). At worst
    // the < one block of common tokens is computed again.
    LAYA_TRY(truncate_to(0));
    common = static_cast<size_t>(std::min<int64_t>(eng_->reuse_cached_prefix(*seq_, prompt_),
                                                   static_cast<int64_t>(prompt_.size())));
  }
  if (rebound_ && seq_->n_past() == 0) {
    // The first prompt after a swap: the model may be one this session used
    // before (the slot's kept bundle), whose pool still holds the blocks of
    // this prompt under their content keys (model_slot.h). Taken, not recomputed.
    common = static_cast<size_t>(
        std::min<int64_t>(eng_->reuse_cached_prefix(*seq_, prompt_), static_cast<int64_t>(prompt_.size())));
  }
  rebound_ = false;
  if (common == prompt_.size()) --common;
  s.timings.tokens_reused = static_cast<int64_t>(common);
  logits_at_ = -1;
  if (cancel_.load()) {  // Engine::prefill checks only between its chunks
    s.cancelled = true;
    return Status::Ok();
  }
  if (static_cast<int64_t>(common) < saved_at_) saved_at_ = -1;  // the prefill cuts what the saved logits followed
  const std::span<const int32_t> rest(prompt_.data() + common, prompt_.size() - common);
  Status st = eng_->prefill(*seq_, rest, static_cast<int64_t>(common), nullptr, &cancel_);
  s.timings.tokens_computed = std::max<int64_t>(0, seq_->n_past() - static_cast<int64_t>(common));
  s.timings.prefill_ms = ms_since(t0);
  if (st.code() == StatusCode::kCancelled) {  // the sequence holds the chunks done: a prefix of the prompt
    s.cancelled = true;
    return Status::Ok();
  }
  if (!st.ok()) return Status(st.code(), fmt::format("suggest: prefill of {} tokens: {}", rest.size(), st.message()));
  logits_at_ = seq_->n_past();
  // Kept for the next keystroke (32 KB for the default model; a copy costs
  // microseconds, the forward pass it saves ~0.6 ms).
  saved_logits_.assign(seq_->logits(), seq_->logits() + eng_->n_vocab());
  saved_at_ = logits_at_;
  return Status::Ok();
}

// Cuts the sequence back to n tokens; logits kept for a longer prefix are stale.
Status Session::truncate_to(int64_t n) {
  if (n < saved_at_) saved_at_ = -1;
  if (n < seq_->n_past()) logits_at_ = -1;
  return eng_->truncate(*seq_, n);
}

Sampler& Session::sampler_for(const SamplerParams& p) {
  if (!sampler_ || !same_params(sampler_->params(), p)) {
    sampler_ = std::make_unique<Sampler>(p, static_cast<int>(eng_->n_vocab()));
    sampler_->set_mask(masks_.control);  // control tokens (FIM markers, BOS) are never part of a suggestion
  }
  // The same draws for the same text, keystroke after keystroke: a suggestion
  // depends on the text and the options only (and so equals a fresh session's).
  sampler_->reseed(p.seed);
  return *sampler_;
}

// The next token. While healed bytes are pending, only tokens that agree with
// them may come (from the prefix index, not a scan of the vocabulary), and
// the choice among them is the greedy one whatever the sampling options: the
// healed bytes are the user's, not the model's to vary. -1: nothing allowed.
int32_t Session::pick(const SuggestOptions& opt, Sampler& smp, std::string_view heal_left) {
  const float* lg = first_logits_ ? first_logits_ : seq_->logits();
  first_logits_ = nullptr;
  if (heal_left.empty()) return smp.sample(lg, history_);
  int32_t best = -1;
  auto consider = [&](int32_t id) {
    if (id >= eng_->n_vocab() || masks_.control.contains(id) || masks_.eog.contains(id)) return;
    if (best < 0 || lg[id] > lg[best] || (lg[id] == lg[best] && id < best)) best = id;
  };
  for (int32_t id : tok_->prefix_index().starting_with(heal_left)) consider(id);
  (void)opt;
  return best;
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

// One decode step of the chain: feeds chain token at-1-chain_start_ (the
// sequence is cut back to at-1 tokens first when it holds more), so the
// logits after the first `at` tokens are current. `step` names it in errors.
Status Session::decode_chain_token(int64_t at, int step) {
  logits_at_ = -1;
  if (seq_->n_past() >= at) LAYA_TRY(truncate_to(at - 1));
  const int32_t token = chain_[static_cast<size_t>(at - 1) - chain_start_];
  if (Status st = eng_->decode(*seq_, token); !st.ok()) {
    return Status(st.code(), fmt::format("suggest: decode step {}: {}", step, st.message()));
  }
  logits_at_ = seq_->n_past();
  return Status::Ok();
}

// Produces up to max_tokens tokens: the first `reused` come from the chain
// (no forward pass), the rest are decoded. Every chosen token is recorded in
// the chain (the sequence always holds the prompt plus a prefix of it).
Status Session::generate(const SuggestOptions& opt, std::optional<Clock::time_point> end, size_t reused,
                         const std::function<void(std::string_view)>& on_piece, Suggestion& s) {
  Sampler& smp = sampler_for(opt.sampling);
  const bool need_history = opt.sampling.repeat_penalty != 1.0f;
  history_.clear();
  if (need_history) history_.assign(prompt_.begin(), prompt_.end());
  if (reused == 0) {
    chain_.clear();
    chain_start_ = prompt_.size();
    chain_heal_ = heal_;
  }
  std::string_view heal_left = chain_heal_;
  pending_.clear();
  const int64_t base = static_cast<int64_t>(prompt_.size());
  for (size_t i = 0; i < static_cast<size_t>(opt.max_tokens); ++i) {
    int32_t id;
    if (i < reused) {
      id = chain_[i];
    } else {
      if (i > 0) {  // the logits after the previous token
        const int64_t at = base + static_cast<int64_t>(i);  // sequence length once it is fed
        if (!(seq_->n_past() == at && logits_at_ == at)) {
          if (cancel_.load()) {
            s.cancelled = true;
            break;
          }
          if (at > seq_->n_ctx()) break;
          const auto now = Clock::now();
          if (end && now + std::chrono::duration<double, std::milli>(last_step_ms_) > *end) {
            s.cut_by_deadline = true;
            break;
          }
          LAYA_TRY(decode_chain_token(at, static_cast<int>(i)));
          last_step_ms_ = ms_since(now);
          s.timings.decode_ms.push_back(last_step_ms_);
        }
      }
      id = pick(opt, smp, heal_left);
      if (id < 0) break;
      chain_.push_back(id);
    }
    if (masks_.eog.contains(id) || masks_.control.contains(id)) break;  // control only when all are masked
    s.tokens.push_back(id);
    if (need_history) history_.push_back(id);
    const auto t0 = Clock::now();
    const std::string& b = tok_->token_bytes(id);
    const size_t skip = std::min(b.size(), heal_left.size());
    heal_left = heal_advance(b, heal_left);
    pending_.append(b, skip);
    const size_t ready = pending_.size() - utf8::incomplete_tail(pending_);
    s.timings.detokenize_ms += ms_since(t0);
    if (ready > 0) {
      const bool go_on = emit(std::string_view(pending_).substr(0, ready), opt.single_line, on_piece, s);
      pending_.erase(0, ready);
      if (!go_on) {
        s.tokens.pop_back();  // its text is cut at the newline
        break;
      }
    }
  }
  if (!reusable(opt.sampling)) drop_chain();
  // An incomplete character left at the end is not shown (pending_ holds it).
  return Status::Ok();
}

Result<Suggestion> Session::suggest(const SuggestOptions& opt, const std::function<void(std::string_view)>& on_piece) {
  Suggestion s;
  LAYA_TRY(suggest_into(opt, &s, on_piece));
  return s;
}

Status Session::suggest_into(const SuggestOptions& opt, Suggestion* out,
                             const std::function<void(std::string_view)>& on_piece) {
  const auto start = Clock::now();
  // A hot swap preparing the next model gives way while this runs.
  const foreground::Scope busy;
  // A cancel() after this call began must stop it, even one that came while
  // it waited for the lock; one before it began must not.
  const uint64_t epoch = cancel_epoch_.load();
  std::lock_guard<std::mutex> lock(mu_);
  cancel_.store(false);
  if (cancel_epoch_.load() != epoch) cancel_.store(true);
  // A hot swap since the last suggest: move to the new model first (one
  // atomic load when there was none).
  double rebind_ms = -1;
  if (slot_ && slot_->current_id() != bundle_->id) {
    const auto tr = Clock::now();
    rebind_locked(slot_->current());
    rebind_ms = ms_since(tr);
  }
  // The backend's threads wake while the prompt is built (~1-3 ms for a
  // sleeping core of a VM; nothing when they are awake).
  eng_->wake();
  LAYA_TRY(check_options(opt));
  last_max_tokens_.store(opt.max_tokens, std::memory_order_relaxed);
  last_used_ns_.store(start.time_since_epoch().count(), std::memory_order_relaxed);
  const std::optional<Clock::time_point> end = opt.deadline.end_for(start);
  Suggestion& s = current_;
  s.clear();
  has_current_ = false;
  first_logits_ = nullptr;
  s.rebound = rebind_ms >= 0;
  s.timings.rebind_ms = std::max(rebind_ms, 0.0);
  const auto t0 = Clock::now();
  Status st = update_window(opt.max_tokens, s);
  if (st.ok() && fim_mid_ >= 0) st = build_suffix();
  if (!st.ok()) {
    win_dirty_ = true;
    drop_chain();
    return st;
  }
  build_prompt();
  s.fim = prompt_.back() == fim_mid_ && fim_mid_ >= 0;
  s.healed_bytes = heal_.size();
  s.timings.tokenize_ms = pending_tokenize_ms_ + ms_since(t0);
  pending_tokenize_ms_ = 0;
  if (!prompt_.empty()) {
    const size_t reused = reuse_chain(opt);
    if (reused > 0) {
      s.typed_through = static_cast<int>(reused);
      s.timings.tokens_reused = static_cast<int64_t>(prompt_.size());
    } else {
      st = prefill_prompt(s);
    }
    if (st.ok() && !s.cancelled) st = generate(opt, end, reused, on_piece, s);
    if (!st.ok() || s.cancelled) drop_chain();
    if (!st.ok()) return st;  // nothing to accept; the sequence still holds a correct prefix
  }
  s.timings.total_ms = ms_since(start);
  has_current_ = true;
  done_epoch_ = cancel_epoch_.load();
  *out = s;  // copy-assignment reuses out's capacity
  return Status::Ok();
}

int Session::extend_chain(int n_tokens) {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return 0;  // an edit or a suggest holds it: they come first
  if (!has_current_ || cancel_epoch_.load() != done_epoch_ || chain_.empty() || !sampler_ ||
      !reusable(sampler_->params()))
    return 0;
  if (masks_.eog.contains(chain_.back()) || masks_.control.contains(chain_.back())) return 0;  // it ended
  // The sequence holds the prompt and a prefix of the chain (generate()).
  const auto& cached = seq_->tokens();
  if (cached.size() < chain_start_ || cached.size() > chain_start_ + chain_.size()) return 0;
  std::string_view heal_left = chain_heal_;
  for (int32_t id : chain_) heal_left = heal_advance(tok_->token_bytes(id), heal_left);
  Sampler& smp = *sampler_;
  const SuggestOptions opt;
  first_logits_ = nullptr;
  int added = 0;
  while (added < n_tokens && cancel_epoch_.load() == done_epoch_) {
    const int64_t at = static_cast<int64_t>(chain_start_ + chain_.size());  // once chain_.back() is fed
    if (at > seq_->n_ctx()) break;
    if (!(seq_->n_past() == at && logits_at_ == at)) {
      if (seq_->n_past() < at - 1) break;  // the chain's earlier tokens are not all cached
      if (!decode_chain_token(at, static_cast<int>(chain_.size())).ok()) break;
    }
    const int32_t id = pick(opt, smp, heal_left);
    if (id < 0) break;
    chain_.push_back(id);
    ++added;
    heal_left = heal_advance(tok_->token_bytes(id), heal_left);
    if (masks_.eog.contains(id) || masks_.control.contains(id)) break;
  }
  return added;
}

}  // namespace laya
