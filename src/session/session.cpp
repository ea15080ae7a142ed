#include "session/session.h"

#include "core/clock.h"

#include <algorithm>
#include <fmt/format.h>

#include "core/foreground.h"
#include "core/utf8.h"

namespace laya {

namespace {

using Clock = Deadline::Clock;

bool same_params(const SamplerParams& a, const SamplerParams& b) {
  return a.temperature == b.temperature && a.top_k == b.top_k && a.top_p == b.top_p && a.min_p == b.min_p &&
         a.repeat_penalty == b.repeat_penalty && a.repeat_last_n == b.repeat_last_n && a.seed == b.seed;
}

// Only a greedy choice is a function of the logits alone, so only greedy
// chains can be reused (a draw depends on the random state, a repetition
// penalty on the history).
bool reusable(const SamplerParams& p) { return p.temperature <= 0.0f && p.repeat_penalty == 1.0f; }

}  // namespace

void Suggestion::clear() {
  text.clear();
  tokens.clear();
  cut_by_deadline = cancelled = window_moved = fim = rebound = false;
  typed_through = 0;
  healed_bytes = 0;
  tokens_cached = 0;
  window_start_cp = 0;
  timings.tokenize_ms = timings.prefill_ms = timings.detokenize_ms = timings.total_ms = timings.rebind_ms = 0;
  timings.tokens_reused = timings.tokens_computed = 0;
  timings.decode_ms.clear();
}

Session::Session(Engine& engine, const tok::Tokenizer& tokenizer, const SessionOptions& options)
    : eng_(&engine),
      tok_(&tokenizer),
      opts_(options),
      plan_(tokenizer, options),
      reuse_(engine, tokenizer),
      generator_(&tokenizer, static_cast<int>(engine.n_vocab()),
                 continuation_masks(tokenizer, static_cast<int>(engine.n_vocab()), engine.hparams().eos_id)),
      drafter_(options.draft_max_tokens) {
  if (opts_.heal) (void)tok_->prefix_index();  // built now, not on the first keystroke (the slot built it already)
  // Drafting's buffers at their working size now: no keystroke allocates.
  if (opts_.draft_max_tokens > 0) {
    reuse_.reserve_rows(opts_.draft_max_tokens + 1);
    drafter_.reserve(static_cast<size_t>(reuse_.n_ctx()));
    prompt_draft_.reserve(static_cast<size_t>(opts_.draft_max_tokens));
  }
}

Session::Session(ModelSlot& slot, const SessionOptions& options) : Session(slot.current(), &slot, options) {}

Session::Session(std::shared_ptr<const ModelBundle> bundle, ModelSlot* slot, const SessionOptions& options)
    : Session(*bundle->engine, *bundle->tokenizer, options) {
  slot_ = slot;
  bundle_ = std::move(bundle);
  drafter_.reset(bundle_->drafts);
  slot_->attach(this);
}

Session::~Session() {
  if (slot_) slot_->detach(this);  // waits for a prewarm of this session in progress
}

void Session::cancel() {
  cancel_epoch_.fetch_add(1);
  cancel_.store(true);
}

// ---- the document ----------------------------------------------------------------

Status Session::set_text(std::string_view text) {
  cancel();
  std::lock_guard<std::mutex> lock(mu_);
  {
    std::lock_guard<std::mutex> pw(prewarm_mu_);
    LAYA_TRY(doc_.set_text(text));
    other_.unchanged = prepared_.unchanged = 0;
  }
  plan_.invalidate();  // the window is chosen (and tokenized) at the next suggest
  has_current_ = false;
  return Status::Ok();
}

Status Session::edit(size_t pos_cp, size_t n_deleted_cp, std::string_view inserted) {
  cancel();  // an edit stops an in-flight suggestion: its text is out of date
  std::lock_guard<std::mutex> lock(mu_);
  return edit_locked(pos_cp, n_deleted_cp, inserted);
}

Status Session::edit_locked(size_t pos_cp, size_t n_deleted_cp, std::string_view inserted) {
  size_t n_ins = 0;
  LAYA_TRY(doc_.check_edit(pos_cp, n_deleted_cp, inserted, &n_ins));
  const auto t0 = Clock::now();
  Document::Change c;
  {
    std::lock_guard<std::mutex> pw(prewarm_mu_);
    c = doc_.apply_edit(pos_cp, n_deleted_cp, inserted, n_ins);
    other_.unchanged = std::min(other_.unchanged, c.begin);
    prepared_.unchanged = std::min(prepared_.unchanged, c.begin);
  }
  has_current_ = false;
  plan_.on_edit(doc_, c);
  pending_tokenize_ms_ += ms_since(t0);
  return Status::Ok();
}

Status Session::edit_bytes(size_t pos, size_t n_deleted, std::string_view inserted) {
  size_t pos_cp = 0, n_deleted_cp = 0;
  cancel();
  std::lock_guard<std::mutex> lock(mu_);
  LAYA_TRY(doc_.cp_range_of_bytes(pos, n_deleted, &pos_cp, &n_deleted_cp));
  return edit_locked(pos_cp, n_deleted_cp, inserted);
}

Status Session::move_to_byte(size_t cursor_byte) {
  size_t cp = 0, n = 0;
  cancel();
  std::lock_guard<std::mutex> lock(mu_);  // the conversion and the move see the same text
  LAYA_TRY(doc_.cp_range_of_bytes(cursor_byte, 0, &cp, &n));
  return move_locked(cp);
}

Status Session::move(size_t cursor_cp) {
  cancel();
  std::lock_guard<std::mutex> lock(mu_);
  return move_locked(cursor_cp);
}

Status Session::move_locked(size_t cursor_cp) {
  LAYA_TRY(doc_.check_move(cursor_cp));
  if (cursor_cp == doc_.cursor_cp()) return Status::Ok();
  const auto t0 = Clock::now();
  const size_t old_cursor = doc_.cursor_byte();
  {
    std::lock_guard<std::mutex> pw(prewarm_mu_);
    doc_.apply_move(cursor_cp);
  }
  plan_.on_move(doc_, old_cursor);
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
  return edit_locked(doc_.cursor_cp(), 0, std::string_view(current_.text).substr(0, bytes));
}

Status Session::pin_window(size_t start_cp) {
  cancel();
  std::lock_guard<std::mutex> lock(mu_);
  if (start_cp > doc_.cursor_cp()) {
    return Status(StatusCode::kOutOfRange, fmt::format("session pin_window at code point {}: past the cursor ({})",
                                                       start_cp, doc_.cursor_cp()));
  }
  return plan_.set_window(doc_, doc_.byte_of(start_cp));
}

// ---- a suggestion ------------------------------------------------------------------

// A draft of the suggestion's first tokens, for the prompt's own pass to
// check (Reuse::prefill), so that a right draft saves the passes after it.
// Greedy suggestions only: a sampled first token is not drafted for.
std::span<const int32_t> Session::draft_after_prompt(const SuggestOptions& opt) {
  prefill_drafted_ = 0;
  if (opts_.draft_max_tokens <= 0 || !reusable(opt.sampling) || opt.max_tokens < 2 || prompt_.ids.empty()) return {};
  const auto before = std::span<const int32_t>(prompt_.ids).first(std::min(prompt_.prefix_end, prompt_.ids.size()));
  drafter_.begin();
  prompt_draft_.resize(static_cast<size_t>(std::min(opt.max_tokens - 1, opts_.draft_max_tokens)));
  int k = drafter_.propose_at_prompt(before.last(std::min<size_t>(before.size(), 8)), static_cast<int>(prompt_draft_.size()),
                                     prompt_draft_.data());
  // Healing: a first token that cannot start with the healed bytes is sure to be rejected.
  if (k > 0 && !heal_allows(tok_->token_bytes(prompt_draft_[0]), prompt_.heal)) k = 0;
  return std::span<const int32_t>(prompt_draft_).first(static_cast<size_t>(std::max(k, 0)));
}

int64_t Session::room(int max_tokens) const {
  return window_room(plan_.traits(), opts_, reuse_.n_ctx(), max_tokens);
}

Status Session::check_options(const SuggestOptions& opt) const {
  if (opt.max_tokens < 1 || room(opt.max_tokens) < kMinWindowRoom) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("suggest: max_tokens {} must be in [1, {}] (the context is {} tokens, {} of them kept "
                              "for the prompt)",
                              opt.max_tokens, std::max<int64_t>(1, opt.max_tokens + room(opt.max_tokens) - kMinWindowRoom),
                              reuse_.n_ctx(), kMinWindowRoom));
  }
  if (Status st = Sampler::validate(opt.sampling, static_cast<int>(eng_->n_vocab())); !st.ok()) {
    return Status(st.code(), fmt::format("suggest: {}", st.message()));
  }
  return Status::Ok();
}

Status Session::plan_prompt(int max_tokens, Suggestion& s) {
  bool moved = false;
  Status st = plan_.update_window(doc_, room(max_tokens), &moved);
  s.window_moved = moved;
  if (st.ok()) st = plan_.build(doc_, &prompt_);
  if (!st.ok()) {
    plan_.invalidate();
    reuse_.drop_chain();
  }
  return st;
}

Sampler& Session::sampler_for(const SamplerParams& p) {
  if (!sampler_ || !same_params(sampler_->params(), p)) {
    sampler_ = std::make_unique<Sampler>(p, static_cast<int>(eng_->n_vocab()));
    sampler_->set_mask(generator_.masks().control);  // control tokens (FIM markers, BOS) are never part of a suggestion
  }
  // The same draws for the same text, keystroke after keystroke: a suggestion
  // depends on the text and the options only (and so equals a fresh session's).
  sampler_->reseed(p.seed);
  return *sampler_;
}

// Runs the generator after the prompt: its first `known` tokens are the
// chain's (typed through), the rest decoded; every chosen token extends the
// chain, which stays only for a greedy suggestion.
Status Session::run_generation(const SuggestOptions& opt, std::optional<Clock::time_point> end, size_t known,
                               const std::function<void(std::string_view)>& on_piece, Suggestion& s) {
  Sampler& smp = sampler_for(opt.sampling);
  Chain& chain = reuse_.chain();
  if (known == 0) {
    chain.tokens.clear();
    chain.start = prompt_.ids.size();
    chain.heal = prompt_.heal;
  }
  GenerateOptions g;
  g.max_tokens = opt.max_tokens;
  g.single_line = opt.single_line;
  g.heal = chain.heal;
  g.known = std::span<const int32_t>(chain.tokens).first(known);
  g.deadline = end;
  g.cancel = &cancel_;
  g.drafter = opts_.draft_max_tokens > 0 ? &drafter_ : nullptr;
  g.draft_sampled = opt.draft_sampled;
  if (g.drafter && known == 0) g.drafted = std::span<const int32_t>(prompt_draft_).first(prefill_drafted_);
  g.draft_context = std::span<const int32_t>(prompt_.ids).first(std::min(prompt_.prefix_end, prompt_.ids.size()));
  const StopStream::Sink sink{[](void* f, std::string_view piece) {
                                const auto& fn = *static_cast<const std::function<void(std::string_view)>*>(f);
                                if (fn) fn(piece);
                                return true;
                              },
                              const_cast<std::function<void(std::string_view)>*>(&on_piece)};
  Status st = generator_.run(reuse_, prompt_.ids, smp, g, sink, &gen_);
  chain.tokens.insert(chain.tokens.end(), gen_.chosen.begin(), gen_.chosen.end());
  // Only a greedy suggestion is indexed: the next ones are greedy, and a
  // draw's tokens would take the place of what greedy decoding continues with.
  if (g.drafter && reusable(opt.sampling)) drafter_.observe_output(prompt_.ids, gen_.tokens);
  if (!reusable(opt.sampling)) reuse_.drop_chain();
  if (!st.ok()) return Status(st.code(), fmt::format("suggest: {}", st.message()));
  s.text.assign(gen_.text);
  s.tokens.assign(gen_.tokens.begin(), gen_.tokens.end());
  s.timings.decode_ms.assign(gen_.decode_ms.begin(), gen_.decode_ms.end());
  s.timings.drafted_tokens = gen_.drafted;
  s.timings.accepted_draft_tokens = gen_.accepted;
  s.timings.detokenize_ms = gen_.detokenize_ms;
  s.cut_by_deadline = gen_.stop == StopReason::kDeadline;
  s.cancelled = gen_.stop == StopReason::kCancelled;
  return Status::Ok();
}

Result<Suggestion> Session::suggest(const SuggestOptions& opt, const std::function<void(std::string_view)>& on_piece) {
  Suggestion s;
  LAYA_TRY(suggest_into(opt, &s, on_piece));
  return s;
}

Status Session::suggest_into(const SuggestOptions& opt, Suggestion* out,
                             const std::function<void(std::string_view)>& on_piece) {
  // A cancel() after this call began must stop it, even one that came while
  // it waited for the lock; one before it began must not.
  return suggest_since(cancel_epoch_.load(), opt, out, on_piece);
}

Status Session::suggest_since(uint64_t epoch, const SuggestOptions& opt, Suggestion* out,
                              const std::function<void(std::string_view)>& on_piece) {
  const auto start = Clock::now();
  // A hot swap preparing the next model gives way while this runs.
  const foreground::Scope busy;
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
  Suggestion& s = current_;
  s.clear();
  has_current_ = false;
  s.rebound = rebind_ms >= 0;
  s.timings.rebind_ms = std::max(rebind_ms, 0.0);
  const auto t0 = Clock::now();
  LAYA_TRY(plan_prompt(opt.max_tokens, s));
  s.fim = prompt_.fim;
  s.healed_bytes = prompt_.heal.size();
  s.timings.tokenize_ms = pending_tokenize_ms_ + ms_since(t0);
  pending_tokenize_ms_ = 0;
  if (!prompt_.ids.empty()) {
    const bool greedy = reusable(opt.sampling) && sampler_ && reusable(sampler_->params());
    const size_t known = reuse_.take_chain(prompt_, opt.max_tokens, greedy, generator_.masks());
    if (opts_.draft_max_tokens > 0) drafter_.observe_prompt(prompt_.ids);
    Status st;
    if (known > 0) {
      s.typed_through = static_cast<int>(known);
      s.timings.tokens_reused = static_cast<int64_t>(prompt_.ids.size());
    } else {
      PrefillReport r;
      st = reuse_.prefill(prompt_.ids, cancel_, &r, draft_after_prompt(opt));
      prefill_drafted_ = static_cast<size_t>(r.drafted);
      if (!st.ok()) st = Status(st.code(), fmt::format("suggest: {}", st.message()));
      s.timings.tokens_reused = r.reused;
      s.timings.tokens_computed = r.computed;
      s.timings.prefill_ms = r.ms;
      s.cancelled = r.cancelled;
    }
    if (st.ok() && !s.cancelled) st = run_generation(opt, opt.deadline.end_for(start), known, on_piece, s);
    if (!st.ok() || s.cancelled) reuse_.drop_chain();
    if (!st.ok()) return st;  // nothing to accept; the sequence still holds a correct prefix
  }
  s.tokens_cached = static_cast<int64_t>(reuse_.sequence().tokens().size());
  s.window_start_cp = plan_.window_cp();
  s.timings.total_ms = ms_since(start);
  has_current_ = true;
  done_epoch_ = cancel_epoch_.load();
  *out = s;  // copy-assignment reuses out's capacity
  return Status::Ok();
}

// ---- idle-time work ----------------------------------------------------------------

int Session::extend_chain(int n_tokens) {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return 0;  // an edit or a suggest holds it: they come first
  Chain& chain = reuse_.chain();
  if (!has_current_ || cancel_epoch_.load() != done_epoch_ || chain.tokens.empty() || !sampler_ ||
      !reusable(sampler_->params()))
    return 0;
  if (generator_.ends(chain.tokens.back())) return 0;  // it ended
  // The sequence holds the prompt and a prefix of the chain (run_generation()).
  const auto& cached = reuse_.sequence().tokens();
  if (cached.size() < chain.start || cached.size() > chain.start + chain.tokens.size()) return 0;
  std::string_view heal_left = chain.heal;
  for (int32_t id : chain.tokens) heal_left = heal_advance(tok_->token_bytes(id), heal_left);
  int added = 0;
  while (added < n_tokens && cancel_epoch_.load() == done_epoch_) {
    const auto at = static_cast<int64_t>(chain.start + chain.tokens.size());  // once chain.tokens.back() is fed
    if (at > reuse_.n_ctx()) break;
    const float* lg = reuse_.logits_at(at);
    if (!lg) {
      if (reuse_.sequence().n_past() < at - 1) break;  // the chain's earlier tokens are not all cached
      if (!reuse_.feed(at, chain.tokens.back()).ok()) break;
      lg = reuse_.logits_at(at);
    }
    const int32_t id = heal_left.empty() ? sampler_->sample(lg, {}) : generator_.pick_healed(lg, heal_left);
    if (id < 0) break;
    chain.tokens.push_back(id);
    ++added;
    heal_left = heal_advance(tok_->token_bytes(id), heal_left);
    if (generator_.ends(id)) break;
  }
  return added;
}

}  // namespace laya
