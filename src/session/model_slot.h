// ModelSlot: the model an application serves, replaceable while it serves
// (issue 12, scope 3: hot model swap).
//
// Why a slot and not Engine::swap_model(): an Engine is one model's weights,
// packed copies, scratch, RoPE table and KV pool, and its sequences point
// into that pool; a Session also needs the model's tokenizer, which the
// engine layer does not know. Making every one of those members replaceable
// inside Engine would put a lock or an atomic on every forward pass and
// entangle the two models' memory. Instead a swap builds a complete new
// {model, tokenizer, engine} bundle beside the old one and replaces one
// std::shared_ptr: Engine stays single-model and simple, and the old bundle
// is freed by whoever drops the last reference to it (the slot, or a session
// when it moves to the new one).
//
// swap_model(path) runs on the calling thread (never a keystroke's):
//   1. load: Model::load maps the file and checks the shapes against the
//      metadata (model/validate.h); the tokenizer loads and fits the model;
//   2. prepare: Engine::create packs the weights, makes the scratch and the
//      KV pool (all memory a keystroke will touch exists before the switch);
//   3. probe: the tokenizer round-trips a probe text (encode -> decode gives
//      it back) and a forward pass over it gives finite logits;
//   4. prewarm: the current prompts of the sessions used last (up to
//      ModelSlotOptions::prewarm_sessions) are computed on the new model, so
//      their first keystroke after the switch computes only what was typed
//      since (not the whole re-tokenized prompt);
//   5. switch: under a short lock, the new bundle becomes current.
// Steps 2-4 run in the background (ModelSlotOptions::background): the new
// engine on the swapping thread alone, giving way to every keystroke.
// A failure in 1-3 returns a Status saying which step and why, and the old
// bundle keeps serving (nothing of it was touched); a prewarm that fails only
// leaves that session to start cold on the new model.
//
// Sessions made on a slot (Session(ModelSlot&, ...)) compare the slot's
// current bundle id with theirs at each suggest (one atomic load): a
// suggestion in flight finishes on the bundle it started on (the session
// holds a reference), the next one rebinds the session to the new bundle
// (re-tokenizes its text, new sequence, no reuse of the old chain), so no
// suggestion mixes two models.
//
// Switching back: the slot keeps the bundle it replaced (a one-entry LRU).
// A swap to that bundle's file (same canonical path, file unchanged on disk)
// takes it back with no load. A session keeps its sequence on the model it
// left while the slot keeps that model, and resumes it on a swap back
// (computing only what its text changed since); a session without one adopts
// the blocks its pool still holds for the prompt (keyed by content) instead
// of recomputing them. Memory stays bounded: the slot holds at most two
// bundles (current + previous), sessions one sequence on each; a third swap
// frees the oldest as soon as no session still holds it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "model/model.h"
#include "session/draft.h"
#include "tokenizer/tokenizer.h"

namespace laya {

// One loaded, validated model with its tokenizer and engine. Immutable once
// made; shared by the slot and the sessions bound to it.
struct ModelBundle {
  std::string path;       // as given to load / swap_model
  std::string canonical;  // absolute, symlinks resolved: what "the same file" means for the LRU
  uint64_t id = 0;        // unique per bundle in the process (never reused)
  std::shared_ptr<const Model> model;
  std::shared_ptr<const tok::Tokenizer> tokenizer;
  std::shared_ptr<Engine> engine;  // keeps the model alive too
  // What the sessions on this model draft from besides their own document
  // (session/draft.h): the other open documents' n-grams, bounded.
  std::shared_ptr<SharedDrafts> drafts = std::make_shared<SharedDrafts>();
  double load_ms = 0;              // load + prepare + probe
};

// What a slot asks of what is bound to it (a Session): implemented
// privately, called by the slot only, while attached.
class SlotClient {
 public:
  // Steady-clock ns of its last use (0: none): the order in which a swap prewarms.
  virtual int64_t last_used_ns() const = 0;
  // Computes its current prompt on `next` before the switch (step 4).
  virtual void prewarm_for(const std::shared_ptr<const ModelBundle>& next) = 0;

 protected:
  ~SlotClient() = default;
};

struct ModelSlotOptions {
  // For every model loaded. n_ctx is a cap: min(n_ctx, the model's trained
  // context) (0: the engine's default); the rest is used as given.
  EngineOptions engine;
  // Keep the replaced bundle for a swap back (see the top of this file).
  // false: a bundle is freed as soon as no session uses it.
  bool keep_previous = true;
  // Sessions (the most recently used first) whose prompt a swap computes on
  // the new model before switching (step 4). Each costs the swapping thread
  // one prefill of that session's prompt; 0: none (the first keystroke after
  // a swap then recomputes what the new model's pool does not hold).
  int prewarm_sessions = 4;
  // Do a swap's packing, probe and prewarm in the background: the new
  // engine's forward passes on the swapping thread alone
  // (Engine::set_background), each op and each packed matrix waiting first
  // while a keystroke's suggestion runs (core/foreground.h), so the swap uses
  // the cores between keystrokes. Without it a swap's 2-thread probe and
  // prefills fought the serving engine's threads on a 2-core machine
  // (swap_added_ms p50 67 / p99 348 ms in `laya replay --swap-to`). false:
  // the backend's full width at once (a swap while nothing is serving).
  bool background = true;
};

// How many full contexts b's KV pool holds (at least 1, at most 1024): the
// sessions that may each grow to one without failing for want of a block.
int64_t kv_contexts(const ModelBundle& b);

class ModelSlot {
 public:
  // Loads, prepares and validates `path` (as swap_model does) as the first
  // model; the error says which step failed.
  static Result<std::unique_ptr<ModelSlot>> create(const std::string& path, const ModelSlotOptions& opt = {});
  // Loads, prepares and validates one bundle without publishing it (what
  // create and swap_model do before the switch).
  // background: the engine is made in background mode (EngineOptions) and
  // left so; the caller switches it off before publishing it.
  static Result<std::shared_ptr<const ModelBundle>> load(const std::string& path, const ModelSlotOptions& opt,
                                                         bool background = false);
  // The checks of step 3 on a prepared bundle: kCorrupt naming the file and
  // what was wrong (a token's logit that is NaN or infinite, a text the
  // tokenizer does not give back).
  static Status probe(const ModelBundle& b);

  // Replaces the current model by the one at `path` (see the top of this
  // file). Serialised: a second call waits for the first. On failure the
  // current model is unchanged and the Status says "swap to <path>: <step>:
  // <why>". The file already serving (unchanged on disk): Ok, nothing done.
  Status swap_model(const std::string& path);

  // The bundle new suggestions use. Cheap (a short lock and a reference
  // count); never waits for a swap's loading.
  std::shared_ptr<const ModelBundle> current() const;
  // current()->id without the reference count: what sessions poll.
  uint64_t current_id() const { return current_id_.load(std::memory_order_acquire); }
  const ModelSlotOptions& options() const { return opt_; }
  // Whether the slot holds bundle `id` (current or kept for a swap back).
  bool keeps(uint64_t id) const;
  // Successful swaps so far (a swap back to the kept bundle included).
  int64_t swaps() const { return swaps_.load(std::memory_order_relaxed); }

  // Sessions made on the slot register themselves, for the prewarm. detach
  // waits for a prewarm in progress (the client may be destroyed after).
  void attach(SlotClient* c);
  void detach(SlotClient* c);

 private:
  explicit ModelSlot(const ModelSlotOptions& opt) : opt_(opt) {}
  void publish(std::shared_ptr<const ModelBundle> next);
  Status swap_locked(const std::string& path);  // swap_model's work, swap_mu_ held
  void prewarm(const std::shared_ptr<const ModelBundle>& next);

  ModelSlotOptions opt_;
  std::mutex swap_mu_;         // one swap at a time (held while loading: never by a keystroke)
  mutable std::mutex mu_;      // guards current_ and previous_ (held for a pointer copy only)
  std::shared_ptr<const ModelBundle> current_;
  std::shared_ptr<const ModelBundle> previous_;  // the one-entry LRU
  std::atomic<uint64_t> current_id_{0};
  std::atomic<int64_t> swaps_{0};
  // Held while a swap prewarms sessions: a session constructed or destroyed
  // meanwhile waits for it (never a keystroke: suggest and edits do not take it).
  std::mutex sessions_mu_;
  std::vector<SlotClient*> sessions_;
};

}  // namespace laya
