// Drafts: tokens proposed to follow what the generator has so far, taken from
// text already there, so that one forward pass can check several of them
// (generator.h) instead of computing them one pass each. A person's next
// words are mostly on the screen already: code repeats identifiers, calls and
// whole lines; prose repeats names and phrases; a suggestion cut by a
// keystroke is usually right again a few keys later.
//
// An NgramTable remembers, for each run of kOrder tokens it was shown, the
// tokens that came after its latest occurrence. Bounded by construction (a
// fixed number of slots, a newer n-gram overwrites an older one in its
// slot), so it is fed incrementally — a keystroke's newly computed prompt
// tokens, each suggestion's tokens — and never rebuilt. A stale entry (text
// since edited away) costs only a rejected draft: verification keeps the
// output exact whatever a draft says.
//
// DocumentDrafter, a session's, looks in its own document first (the prompt
// holds the text before and after the cursor), then in a table shared by the
// sessions of one model (other open documents), then at the document's
// 2-grams and 1-grams. How many tokens it proposes weighs what a draft gains against
// what it costs, both measured as it goes: per source, the chance that a
// drafted token is taken (its recent record); per pass, the time of one
// token and of each drafted token more. A draft of k tokens yields
// 1 + p + ... + p^k tokens for the time of a (k+1)-token pass, so it
// proposes the k that yields the most tokens per millisecond, and none where
// one token a pass does better (where drafts keep failing, or where a
// drafted token costs nearly a pass: a CPU whose passes are bound by
// arithmetic rather than by reading the weights).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "session/generator.h"

namespace laya {

class NgramTable {
 public:
  static constexpr int kFollow = 12;  // tokens kept after each n-gram

  // order: tokens that key an entry (>= 1); slots: rounded up to a power of two.
  NgramTable(int order, size_t slots);

  // Records every n-gram of `tokens` that some token follows, those starting
  // at or after `from` (the ones before were recorded by an earlier call).
  void add(std::span<const int32_t> tokens, size_t from = 0);
  // The first start worth recording again after tokens from `first_new` on
  // changed: the n-grams whose following tokens reach into them.
  size_t refresh_from(size_t first_new) const {
    const size_t back = static_cast<size_t>(order_ + kFollow);
    return first_new > back ? first_new - back : 0;
  }
  // Up to `max` tokens that followed the last kOrder tokens of `context`;
  // returns how many were written to `out`.
  int lookup(std::span<const int32_t> context, int max, int32_t* out) const;
  int order() const { return order_; }
  size_t bytes() const { return slots_.size() * sizeof(Slot); }
  void clear();

 private:
  struct Slot {
    uint64_t key = 0;  // 0: empty
    int32_t next[kFollow];
    int32_t n = 0;
  };
  uint64_t key_of(const int32_t* gram) const;

  int order_;
  std::vector<Slot> slots_;
};

// The ngram tables of one model's open documents together (bounded: 64K
// slots, ~3.4 MB), for the DocumentDrafters of every session on that model.
class SharedDrafts {
 public:
  SharedDrafts();
  void add(std::span<const int32_t> tokens, size_t from);
  int lookup(std::span<const int32_t> context, int max, int32_t* out) const;

 private:
  mutable std::mutex mu_;
  NgramTable table_;
};

class DocumentDrafter final : public Drafter {
 public:
  // At most max_tokens proposed at once (the pass checks one row more); 0: none.
  explicit DocumentDrafter(int max_tokens = 8);
  // Another model (a hot swap): token ids mean other things now.
  void reset(std::shared_ptr<SharedDrafts> shared);
  // Room for prompts of up to n tokens (no allocation while observing them).
  void reserve(size_t n) { last_prompt_.reserve(n); }

  // A keystroke's prompt: the n-grams that reach into what changed since the
  // last one are recorded.
  void observe_prompt(std::span<const int32_t> prompt);
  // A suggestion's tokens after its prompt (the prompt's tail gives their context).
  void observe_output(std::span<const int32_t> prompt, std::span<const int32_t> tokens);

  int propose(std::span<const int32_t> context, int max, int32_t* out) override;
  // The same for the suggestion's first tokens, checked by the prompt's own
  // pass: its record is kept apart (the token after a keystroke is the
  // hardest to guess; its misses must not stop the drafts after it).
  int propose_at_prompt(std::span<const int32_t> context, int max, int32_t* out);
  void feedback(int proposed, int accepted) override;
  void observe_pass(int rows, double ms) override;
  void begin() override { live_ = 0; }

  // The draft length that yields the most tokens per millisecond for a
  // drafted token's chance p of being taken (0: none), at the measured
  // costs; at most `max`.
  int best_length(double p, int max) const;
  // The measured costs (ms): one token a pass, and each drafted token more.
  double pass_ms() const { return pass_ms_; }
  double extra_ms() const { return extra_ms_; }

 private:
  enum Source { kDoc3, kShared, kDoc2, kDoc1, kSources };
  int lookup(std::span<const int32_t> context, int max, int32_t* out, int place);
  int max_tokens_;
  NgramTable doc3_, doc2_, doc1_;  // keyed by the last 3 / 2 / 1 tokens
  std::shared_ptr<SharedDrafts> shared_;
  // Per place (0: in the generation, 1: at the prompt) and source: the
  // recent chance that a drafted token is taken.
  double taken_[2][kSources];
  Source last_ = kDoc3;     // the source of the proposal in flight
  int place_ = 0;           // and its place
  double pass_ms_ = 0, extra_ms_ = 0;  // 0: not measured yet
  int declined_ = 0;                   // lookups found a draft that did not pay, in a row
  size_t live_ = 0;                    // the generation's context recorded so far
  std::vector<int32_t> last_prompt_;  // the prompt observed last
  std::vector<int32_t> joined_;       // a prompt's tail and the output, for observe_output
};

}  // namespace laya
