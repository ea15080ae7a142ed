#include "player/latency_stats.h"

#include <numeric>

#include "session/session.h"

namespace laya::player {
namespace {

template <class T>
void append(std::vector<T>& dst, const std::vector<T>& src) {
  dst.insert(dst.end(), src.begin(), src.end());
}

double ms_between(SuggestClock::Clock::time_point a, SuggestClock::Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

double interpolated_percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double idx = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(idx);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

void LatencyStats::record(double suggest, double first, const Suggestion& sg) {
  suggest_ms.push_back(suggest);
  first_token_ms.push_back(first);
  computed.push_back(sg.timings.tokens_computed);
  const bool f = sg.typed_through > 0 && sg.timings.tokens_computed == 0;
  free.push_back(f);
  free_keystrokes += f;
  tokenize_ms.push_back(sg.timings.tokenize_ms);
  prefill_ms.push_back(sg.timings.prefill_ms);
  double d = 0;
  for (double x : sg.timings.decode_ms) d += x;
  decode_ms.push_back(d);
  decode_steps += static_cast<int64_t>(sg.timings.decode_ms.size());
  const int64_t n_passes = sg.timings.passes();
  if (n_passes > 0) passes.push_back(n_passes);
  drafted_tokens += sg.timings.drafted_tokens;
  accepted_draft_tokens += sg.timings.accepted_draft_tokens;
  window_moves += sg.window_moved;
  fim_events += sg.fim;
  healed_events += sg.healed_bytes > 0;
}

void LatencyStats::add(const LatencyStats& o) {
  append(suggest_ms, o.suggest_ms);
  append(first_token_ms, o.first_token_ms);
  append(computed, o.computed);
  append(free, o.free);
  append(tokenize_ms, o.tokenize_ms);
  append(prefill_ms, o.prefill_ms);
  append(decode_ms, o.decode_ms);
  free_keystrokes += o.free_keystrokes;
  window_moves += o.window_moves;
  fim_events += o.fim_events;
  healed_events += o.healed_events;
  decode_steps += o.decode_steps;
  append(passes, o.passes);
  drafted_tokens += o.drafted_tokens;
  accepted_draft_tokens += o.accepted_draft_tokens;
  events += o.events;
  mismatches += o.mismatches;
  near_ties += o.near_ties;
  accepts += o.accepts;
  accept_chars += o.accept_chars;
  accept_predicted += o.accept_predicted;
  superseded += o.superseded;
  append(times, o.times);
  chars += o.chars;
  keystrokes += o.keystrokes;
  shown += o.shown;
  accepted += o.accepted;
  accepted_chars += o.accepted_chars;
  seconds += o.seconds;
}

void LatencyStats::add_json(nlohmann::json* j) const {
  nlohmann::json& o = *j;
  o["suggest_ms"] = ms_json(suggest_ms);
  o["first_token_ms"] = ms_json(first_token_ms);
  o["tokens_computed_per_event"] = count_json(computed);
  o["free_keystrokes"] = free_keystrokes;
  o["window_moves"] = window_moves;
  o["fim_events"] = fim_events;        // suggestions whose prompt held a suffix
  o["healed_events"] = healed_events;  // suggestions with token healing
  const double mean_passes = passes_mean();
  o["passes_per_suggestion"] = {{"p50", percentile(passes, 0.5)}, {"p99", percentile(passes, 0.99)},
                                {"mean", mean_passes}, {"suggestions", passes.size()}};
  o["drafted_tokens"] = drafted_tokens;
  o["accepted_draft_tokens"] = accepted_draft_tokens;
}

std::string LatencyStats::lines() const {
  const double mean_passes = passes_mean();
  return fmt::format(
      "  suggest_ms      {}\n  first_token_ms  {}\n  tokens computed per event p50 {} p99 {} max {}\n"
      "  passes per suggestion (of {} that needed one) p50 {} p99 {} mean {:.2f}; drafted {} tokens, {} taken\n",
      ms_line(suggest_ms), ms_line(first_token_ms), percentile(computed, 0.5), percentile(computed, 0.99),
      percentile(computed, 1.0), passes.size(), percentile(passes, 0.5), percentile(passes, 0.99), mean_passes,
      drafted_tokens, accepted_draft_tokens);
}

double LatencyStats::passes_mean() const {
  if (passes.empty()) return 0.0;
  return static_cast<double>(std::accumulate(passes.begin(), passes.end(), int64_t{0})) /
         static_cast<double>(passes.size());
}

int64_t LatencyStats::prefill_tokens() const { return std::accumulate(computed.begin(), computed.end(), int64_t{0}); }

SuggestClock::SuggestClock()
    : on_piece_([this](std::string_view) {
        if (got_piece_) return;
        first_ = Clock::now();
        got_piece_ = true;
      }) {}

void SuggestClock::start() {
  got_piece_ = false;
  t0_ = Clock::now();
}

void SuggestClock::stop(const Suggestion& sg, LatencyStats* s) {
  t1_ = Clock::now();
  s->record(ms_between(t0_, t1_), ms_between(t0_, got_piece_ ? first_ : t1_), sg);
}

}  // namespace laya::player
