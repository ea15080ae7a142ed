#include "session/draft.h"

#include <algorithm>
#include <bit>

namespace laya {

NgramTable::NgramTable(int order, size_t slots) : order_(std::max(order, 1)), slots_(std::bit_ceil(std::max<size_t>(slots, 2))) {}

void NgramTable::clear() { std::fill(slots_.begin(), slots_.end(), Slot{}); }

// splitmix64's finaliser over the ids; never 0 (0 marks an empty slot).
uint64_t NgramTable::key_of(const int32_t* gram) const {
  uint64_t h = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(order_);
  for (int i = 0; i < order_; ++i) {
    h ^= static_cast<uint32_t>(gram[i]);
    h += 0x9E3779B97F4A7C15ull;
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    h ^= h >> 31;
  }
  return h | 1;
}

void NgramTable::add(std::span<const int32_t> tokens, size_t from) {
  const size_t n = tokens.size(), ord = static_cast<size_t>(order_);
  const size_t mask = slots_.size() - 1;
  for (size_t j = from; j + ord < n; ++j) {
    const uint64_t key = key_of(tokens.data() + j);
    Slot& s = slots_[static_cast<size_t>(key) & mask];
    s.key = key;
    s.n = static_cast<int32_t>(std::min<size_t>(kFollow, n - j - ord));
    std::copy_n(tokens.data() + j + ord, s.n, s.next);
  }
}

int NgramTable::lookup(std::span<const int32_t> context, int max, int32_t* out) const {
  if (context.size() < static_cast<size_t>(order_) || max <= 0) return 0;
  const uint64_t key = key_of(context.data() + context.size() - static_cast<size_t>(order_));
  const Slot& s = slots_[static_cast<size_t>(key) & (slots_.size() - 1)];
  if (s.key != key) return 0;
  const int n = std::min(max, static_cast<int>(s.n));
  std::copy_n(s.next, n, out);
  return n;
}

SharedDrafts::SharedDrafts() : table_(3, size_t{1} << 16) {}

void SharedDrafts::add(std::span<const int32_t> tokens, size_t from) {
  std::lock_guard<std::mutex> lock(mu_);
  table_.add(tokens, from);
}

int SharedDrafts::lookup(std::span<const int32_t> context, int max, int32_t* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  return table_.lookup(context, max, out);
}

// 16K slots each (~0.9 MB a session): a window of a few thousand tokens
// fits with few collisions.
DocumentDrafter::DocumentDrafter(int max_tokens)
    : max_tokens_(std::max(max_tokens, 0)), doc3_(3, size_t{1} << 14), doc2_(2, size_t{1} << 14), doc1_(1, size_t{1} << 13) {
  reset(nullptr);
}

// Until measured: a drafted token is taken half the time (the public traces:
// 0.4-0.65 by source), and costs a tenth of a pass (memory-bound decoding,
// where each weight row read serves every token of the pass).
constexpr double kPriorTaken = 0.5, kPriorExtra = 0.1;
// Recent record: each compared token moves the chance by this much of the gap.
constexpr double kTakenRate = 0.1;
// Costs: the pass times' moving average weight.
constexpr double kCostRate = 0.2;
// A draft that did not pay is still proposed once in this many times, so
// that a record gone bad (or a cost measured in a noisy moment) can recover.
constexpr int kExploreEvery = 16;

void DocumentDrafter::reset(std::shared_ptr<SharedDrafts> shared) {
  doc3_.clear();
  doc2_.clear();
  doc1_.clear();
  last_prompt_.clear();
  shared_ = std::move(shared);
  for (auto& place : taken_) std::fill(std::begin(place), std::end(place), kPriorTaken);
  pass_ms_ = extra_ms_ = 0;
  declined_ = 0;
  live_ = 0;
}

void DocumentDrafter::observe_prompt(std::span<const int32_t> prompt) {
  if (max_tokens_ == 0) return;
  const size_t n = std::min(prompt.size(), last_prompt_.size());
  const auto computed = static_cast<size_t>(
      std::mismatch(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(n), last_prompt_.begin()).first -
      prompt.begin());
  if (computed == prompt.size() && computed == last_prompt_.size()) return;
  if (last_prompt_.capacity() < prompt.size()) last_prompt_.reserve(2 * prompt.size());
  last_prompt_.assign(prompt.begin(), prompt.end());
  doc3_.add(prompt, doc3_.refresh_from(computed));
  doc2_.add(prompt, doc2_.refresh_from(computed));
  doc1_.add(prompt, doc1_.refresh_from(computed));
  if (shared_) shared_->add(prompt, doc3_.refresh_from(computed));
}

void DocumentDrafter::observe_output(std::span<const int32_t> prompt, std::span<const int32_t> tokens) {
  if (max_tokens_ == 0 || tokens.empty()) return;
  const size_t tail = std::min<size_t>(prompt.size(), 3);
  if (joined_.capacity() < tail + tokens.size()) joined_.reserve(2 * (tail + tokens.size()));
  joined_.assign(prompt.end() - static_cast<std::ptrdiff_t>(tail), prompt.end());
  joined_.insert(joined_.end(), tokens.begin(), tokens.end());
  doc3_.add(joined_);
  doc2_.add(joined_);
  doc1_.add(joined_);
  if (shared_) shared_->add(joined_, 0);
}

int DocumentDrafter::best_length(double p, int max) const {
  const double one = pass_ms_ > 0 ? pass_ms_ : 1.0;
  const double extra = extra_ms_ > 0 ? extra_ms_ : kPriorExtra * one;
  double best_rate = 1.0 / one, yield = 1.0, pk = 1.0;
  int best = 0;
  for (int k = 1; k <= max; ++k) {
    pk *= p;
    yield += pk;  // 1 + p + ... + p^k
    if (const double rate = yield / (one + extra * k); rate > best_rate * 1.02) {
      best_rate = rate;
      best = k;
    }
  }
  return best;
}

// The document's own 3-gram first (the most specific), then the other open
// documents', then the document's 2-gram and 1-gram (whether a source's
// drafts are proposed at all is its record's and the cost's to say).
int DocumentDrafter::propose_at_prompt(std::span<const int32_t> context, int max, int32_t* out) {
  return lookup(context, max, out, 1);
}

int DocumentDrafter::propose(std::span<const int32_t> context, int max, int32_t* out) {
  return lookup(context, max, out, 0);
}

int DocumentDrafter::lookup(std::span<const int32_t> context, int max, int32_t* out, int place) {
  if (max_tokens_ == 0 || max <= 0) return 0;
  place_ = place;
  // The generation so far joins the document's tables as it grows: a model
  // that repeats a line of its own output is drafted from the first copy
  // (the default model's 128-token suggestions often do).
  doc3_.add(context, doc3_.refresh_from(live_));
  doc2_.add(context, doc2_.refresh_from(live_));
  doc1_.add(context, doc1_.refresh_from(live_));
  live_ = context.size();
  const int want = std::min(max, max_tokens_);
  int n = doc3_.lookup(context, want, out);
  last_ = kDoc3;
  if (n == 0 && shared_) n = shared_->lookup(context, want, out), last_ = kShared;
  if (n == 0) n = doc2_.lookup(context, want, out), last_ = kDoc2;
  if (n == 0) n = doc1_.lookup(context, want, out), last_ = kDoc1;
  if (n == 0) return 0;
  int k = best_length(taken_[place_][last_], n);
  if (k == 0 && ++declined_ >= kExploreEvery) k = std::min(n, 2);
  if (k > 0) declined_ = 0;
  return k;
}

void DocumentDrafter::feedback(int proposed, int accepted) {
  if (proposed <= 0) return;
  double& p = taken_[place_][last_];
  for (int i = 0; i < accepted; ++i) p += kTakenRate * (1.0 - p);
  if (accepted < proposed) p -= kTakenRate * p;
}

void DocumentDrafter::observe_pass(int rows, double ms) {
  if (rows <= 1) {
    pass_ms_ = pass_ms_ > 0 ? pass_ms_ + kCostRate * (ms - pass_ms_) : ms;
  } else if (pass_ms_ > 0) {
    const double extra = std::max(0.0, (ms - pass_ms_) / (rows - 1));
    extra_ms_ = extra_ms_ > 0 ? extra_ms_ + kCostRate * (extra - extra_ms_) : extra;
  }
}

}  // namespace laya
