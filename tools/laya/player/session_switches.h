// Many documents on one engine, switched between in a random order: the
// harness behind `laya bench-sessions` (its file has the definitions of the
// figures: switch, keystroke, recompute, resident documents).
//
// Documents: `docs` texts of about `tokens` tokens each, cut at line starts
// from typing traces' final texts (generated code-like text when there are
// none), each from another offset, so no two are alike; the first half of
// them (two at least) start with one common head of `head_tokens` tokens.
// One Session per document on one Engine; when the KV pool cannot take the
// next document, the least recently used documents release their KV
// (Session::release_kv).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "session/session.h"

namespace laya::player {

struct DocSpec {
  int docs = 100;
  int64_t tokens = 2000;
  int64_t head_tokens = 256;
  uint64_t seed = 1;
};

// The fixtures' traces: $LAYA_FIXTURES/traces, else shared/fixtures/traces in
// a folder above the binary (the build tree's layout).
std::vector<std::string> default_traces();

// The documents of `spec`, cut from the final texts of `traces` (generated
// text when they hold less than 4 KB).
Result<std::vector<std::string>> build_doc_texts(const std::vector<std::string>& traces, const tok::Tokenizer& tk,
                                                 const DocSpec& spec);

// What the caller hears while the harness runs; each may be empty.
struct SwitchHooks {
  std::function<void(const std::string& label, uint64_t total)> start_phase;
  std::function<void(uint64_t done)> progress;
  // A switch whose suggestion differs from the one computed from scratch.
  std::function<void(const std::string& message)> on_mismatch;
};

// The documents' sessions on one engine, with least-recently-used release.
struct SessionSet {
  SessionSet(Engine& e, const tok::Tokenizer& t) : eng(e), tk(t) {}
  Engine& eng;
  const tok::Tokenizer& tk;
  SuggestOptions opt;
  std::vector<std::unique_ptr<Session>> docs;
  std::vector<uint64_t> last_use;  // for the least-recently-used release
  std::vector<bool> active;        // holds its KV
  uint64_t clock = 0;
  int64_t released = 0;
  int64_t max_held = 0;  // the most blocks one document has held: what the next may need

  // Doc d's suggestion, after releasing least recently used documents until
  // there is room for it.
  Result<Suggestion> suggest(size_t d);
  // One session per text, one warm-up suggestion each; returns the warm-up's ms.
  Result<double> build(const std::vector<std::string>& texts, const SwitchHooks& hooks);
  // Takes the sessions of a store (session_store.h); every one holds its KV.
  void adopt(std::vector<std::unique_ptr<Session>> sessions);
  // KV in use, and what sharing saves, in MB.
  std::pair<double, double> kv_memory() const;

 private:
  Result<bool> release_lru(size_t d);
  Status make_room(size_t d);
};

struct SwitchResults {
  std::vector<double> switch_ms, recompute_ms, key_ms;
  std::vector<int64_t> switch_computed;
  std::set<size_t> switched, not_resident;
  int mismatches = 0;
  double save_ms = -1, load_ms = -1, warmup_ms = 0;  // -1: not done
  int64_t load_shared_blocks = 0;
};

struct SwitchPlan {
  int switches = 300, keys = 1, n_recompute = 30;
  uint64_t seed = 1;
};

// The switches: focus change -> suggestion, `keys` keystrokes, and for the
// first n_recompute the same switch without the store on `rc` (a second
// engine whose cache is emptied each time; nullptr: none).
Status run_switches(SessionSet& set, Engine* rc, const SwitchPlan& plan, const SwitchHooks& hooks, SwitchResults* r);

// Documents whose KV was resident whenever it was needed.
size_t resident_docs(const SessionSet& set, const SwitchResults& r);

}  // namespace laya::player
