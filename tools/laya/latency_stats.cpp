#include "latency_stats.h"

#include "report_html.h"
#include "session/session.h"

namespace laya::cli {
namespace {

template <class T>
void append(std::vector<T>& dst, const std::vector<T>& src) {
  dst.insert(dst.end(), src.begin(), src.end());
}

double ms_between(SuggestClock::Clock::time_point a, SuggestClock::Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

void LatencySamples::record(double suggest, double first, const Suggestion& sg) {
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
  window_moves += sg.window_moved;
  fim_events += sg.fim;
  healed_events += sg.healed_bytes > 0;
}

void LatencySamples::add(const LatencySamples& o) {
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
}

void LatencySamples::add_json(nlohmann::json* j) const {
  nlohmann::json& o = *j;
  o["suggest_ms"] = ms_json(suggest_ms);
  o["first_token_ms"] = ms_json(first_token_ms);
  o["tokens_computed_per_event"] = count_json(computed);
  o["free_keystrokes"] = free_keystrokes;
  o["window_moves"] = window_moves;
  o["fim_events"] = fim_events;        // suggestions whose prompt held a suffix
  o["healed_events"] = healed_events;  // suggestions with token healing
}

std::string LatencySamples::lines() const {
  return fmt::format("  suggest_ms      {}\n  first_token_ms  {}\n  tokens computed per event p50 {} p99 {} max {}\n",
                     ms_line(suggest_ms), ms_line(first_token_ms), percentile(computed, 0.5),
                     percentile(computed, 0.99), percentile(computed, 1.0));
}

ReportTrace LatencySamples::report_trace(std::string name) const {
  ReportTrace t;
  t.name = std::move(name);
  t.suggest_ms = suggest_ms;
  t.first_token_ms = first_token_ms;
  t.computed.assign(computed.begin(), computed.end());
  t.free_keystroke = free;
  t.tokenize_ms = tokenize_ms;
  t.prefill_ms = prefill_ms;
  t.decode_ms = decode_ms;
  return t;
}

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

void SuggestClock::stop(const Suggestion& sg, LatencySamples* s) {
  t1_ = Clock::now();
  s->record(ms_between(t0_, t1_), ms_between(t0_, got_piece_ ? first_ : t1_), sg);
}

}  // namespace laya::cli
