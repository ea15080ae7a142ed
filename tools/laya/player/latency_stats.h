// The one stats type of played traces: per-suggestion latencies and work,
// their nearest-rank percentiles and their JSON keys, plus the counts of the
// two ways of playing a trace (TracePlayer replays its recorded events;
// type_document simulates a typist writing its final text). `laya replay`,
// `laya bench-typing` and the HTML report read the same fields, so they
// measure the same moments and compute every key the same way;
// `laya bench-sessions` and the swap statistics use the same percentiles.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "player/model_swaps.h"

namespace laya {
struct Suggestion;
}

namespace laya::player {

// Nearest rank: the smallest value with at least p of the values <= it.
template <class T>
T percentile(std::vector<T> v, double p) {
  if (v.empty()) return T{};
  std::sort(v.begin(), v.end());
  const double rank = std::ceil(p * static_cast<double>(v.size()));
  const size_t i = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return v[std::min(i, v.size() - 1)];
}

// Linear interpolation between the two closest ranks (numpy's default), as
// `laya bench` reports decode steps, so that its numbers compare with
// llama-bench's; every per-event figure uses the nearest rank instead.
double interpolated_percentile(std::vector<double> v, double p);

// suggest_ms / first_token_ms: {p50, p90, p99, p999, max}.
inline nlohmann::json ms_json(const std::vector<double>& v) {
  return {{"p50", percentile(v, 0.5)}, {"p90", percentile(v, 0.9)}, {"p99", percentile(v, 0.99)},
          {"p999", percentile(v, 0.999)}, {"max", percentile(v, 1.0)}};
}

// tokens_computed_per_event: {p50, p99, max}.
inline nlohmann::json count_json(const std::vector<int64_t>& v) {
  return {{"p50", percentile(v, 0.5)}, {"p99", percentile(v, 0.99)}, {"max", percentile(v, 1.0)}};
}

// "p50 0.123 p90 ... max ..." for the text output.
inline std::string ms_line(const std::vector<double>& v) {
  return fmt::format("p50 {:.3f} p90 {:.3f} p99 {:.3f} p99.9 {:.3f} max {:.3f}", percentile(v, 0.5), percentile(v, 0.9),
                     percentile(v, 0.99), percentile(v, 0.999), percentile(v, 1.0));
}

struct LatencyStats {
  // Every completed suggestion, in event order.
  std::vector<double> suggest_ms, first_token_ms;
  std::vector<int64_t> computed;  // prompt tokens fed to the model by that suggestion (decode steps not counted)
  // Free keystroke: the user typed (or accepted) what the previous suggestion
  // predicted and the session reused the rest of it: no forward pass before
  // its first piece (Suggestion::typed_through > 0, no prompt token computed).
  std::vector<bool> free;
  std::vector<double> tokenize_ms, prefill_ms, decode_ms;  // the stages (Session timings; decode: all steps)
  int64_t free_keystrokes = 0, window_moves = 0, fim_events = 0, healed_events = 0;
  int64_t decode_steps = 0;  // of all completed suggestions
  // Forward passes over the weights per suggestion, for those that needed at
  // least one (a free keystroke needs none): the prefill of the edit's new
  // tokens counts 1, each decode pass 1 (one that checks drafted tokens too).
  std::vector<int64_t> passes;
  int64_t drafted_tokens = 0, accepted_draft_tokens = 0;  // Suggestion timings, summed

  // Events handed to the session (a replayed trace's events; the typist's
  // keystrokes, the first suggestion before any counted as one).
  int64_t events = 0;

  // TracePlayer: --verify's verdicts, accept events and what of their text
  // the engine's suggestion had predicted (code points), suggestions never
  // completed because the next event came first (at the recorded pace).
  int64_t mismatches = 0, near_ties = 0, accepts = 0, accept_chars = 0, accept_predicted = 0, superseded = 0;
  std::vector<SwapEventTime> times;  // synchronous replay: every event, for the swap statistics

  // type_document: the document's code points, the keystrokes typed (a Tab
  // is one), non-empty suggestions shown, those accepted and their code
  // points, and the wall time of the whole typing.
  int64_t chars = 0, keystrokes = 0, shown = 0, accepted = 0, accepted_chars = 0;
  double seconds = 0;

  void record(double suggest, double first, const Suggestion& sg);
  void add(const LatencyStats& o);
  // suggest_ms, first_token_ms, tokens_computed_per_event, free_keystrokes,
  // window_moves, fim_events, healed_events, passes_per_suggestion,
  // drafted_tokens, accepted_draft_tokens.
  void add_json(nlohmann::json* j) const;
  // The text output's latency lines: suggest_ms, first_token_ms, tokens computed.
  std::string lines() const;

  int64_t prefill_tokens() const;  // prompt tokens computed by all completed suggestions
  double passes_mean() const;      // over the suggestions that needed a pass
  double savings() const { return chars ? 1.0 - static_cast<double>(keystrokes) / static_cast<double>(chars) : 0.0; }
  double acceptance() const { return shown ? static_cast<double>(accepted) / static_cast<double>(shown) : 0.0; }
};

// Times one suggestion as an editor sees it: from start() (the keystroke is
// handed to the session, before the edit call) to stop() (suggest returned),
// and to the first piece of text (on_piece(), passed to suggest). With no
// piece (an empty suggestion), the first-piece time is the return: the editor
// learns then that there is nothing to show.
class SuggestClock {
 public:
  using Clock = std::chrono::steady_clock;
  SuggestClock();
  SuggestClock(const SuggestClock&) = delete;  // on_piece_ points at this object
  SuggestClock& operator=(const SuggestClock&) = delete;

  void start();
  const std::function<void(std::string_view)>& on_piece() const { return on_piece_; }
  // Notes the return of suggest and records `sg` into *s.
  void stop(const Suggestion& sg, LatencyStats* s);
  Clock::time_point started() const { return t0_; }
  Clock::time_point stopped() const { return t1_; }

 private:
  Clock::time_point t0_, t1_, first_;
  bool got_piece_ = false;
  std::function<void(std::string_view)> on_piece_;
};

}  // namespace laya::player
