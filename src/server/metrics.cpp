#include "server/metrics.h"

#include <fmt/format.h>

namespace laya::server {

void LatencyHistogram::observe(double ms) {
  size_t i = 0;
  while (i < kBoundsMs.size() && ms > kBoundsMs[i]) ++i;
  ++counts_[i];
  sum_ += ms;
  ++n_;
}

void LatencyHistogram::write(std::string* out, const std::string& name, const std::string& labels) const {
  const std::string sep = labels.empty() ? "" : ",";
  uint64_t cum = 0;
  for (size_t i = 0; i < kBoundsMs.size(); ++i) {
    cum += counts_[i];
    *out += fmt::format("{}_bucket{{{}{}le=\"{}\"}} {}\n", name, labels, sep, kBoundsMs[i], cum);
  }
  cum += counts_.back();
  *out += fmt::format("{}_bucket{{{}{}le=\"+Inf\"}} {}\n", name, labels, sep, cum);
  const std::string l = labels.empty() ? "" : "{" + labels + "}";
  *out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, l, sum_, name, l, n_);
}

void ServerMetrics::request(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, status}];
}

void ServerMetrics::suggestion(const Suggestion& s, double http_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  tokenize_.observe(s.timings.tokenize_ms);
  prefill_.observe(s.timings.prefill_ms);
  for (double d : s.timings.decode_ms) decode_step_.observe(d);
  suggest_.observe(s.timings.total_ms);
  http_.observe(http_ms);
  tokens_reused_ += static_cast<uint64_t>(s.timings.tokens_reused);
  tokens_computed_ += static_cast<uint64_t>(s.timings.tokens_computed);
  tokens_generated_ += s.tokens.size();
  free_keystrokes_ += s.typed_through > 0 && s.timings.tokens_computed == 0;
  ++suggestions_;
}

std::string ServerMetrics::render(const SessionGauges& g) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string o;
  o += "# HELP laya_requests_total HTTP requests by endpoint and status code.\n# TYPE laya_requests_total counter\n";
  for (const auto& [k, n] : requests_)
    o += fmt::format("laya_requests_total{{endpoint=\"{}\",code=\"{}\"}} {}\n", k.first, k.second, n);
  o += "# HELP laya_stage_ms Time of each stage of a suggestion, milliseconds.\n# TYPE laya_stage_ms histogram\n";
  tokenize_.write(&o, "laya_stage_ms", "stage=\"tokenize\"");
  prefill_.write(&o, "laya_stage_ms", "stage=\"prefill\"");
  decode_step_.write(&o, "laya_stage_ms", "stage=\"decode_step\"");
  suggest_.write(&o, "laya_stage_ms", "stage=\"suggest\"");
  o += "# HELP laya_request_ms Request received to response ready (suggestion endpoints), milliseconds.\n"
       "# TYPE laya_request_ms histogram\n";
  http_.write(&o, "laya_request_ms", "");
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    o += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, v);
  };
  auto gauge = [&](const char* name, const char* help, double v) {
    o += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help, name, name, v);
  };
  counter("laya_suggestions_total", "Suggestions computed.", suggestions_);
  counter("laya_prompt_tokens_reused_total", "Prompt tokens whose KV was already cached.", tokens_reused_);
  counter("laya_prompt_tokens_computed_total", "Prompt tokens fed to the model.", tokens_computed_);
  counter("laya_generated_tokens_total", "Tokens generated.", tokens_generated_);
  counter("laya_free_keystrokes_total", "Suggestions served from the previous one with no forward pass.",
          free_keystrokes_);
  const uint64_t all = tokens_reused_ + tokens_computed_;
  gauge("laya_cache_hit_ratio", "Prompt tokens reused / all prompt tokens, since start.",
        all ? static_cast<double>(tokens_reused_) / static_cast<double>(all) : 0.0);
  gauge("laya_resident_sessions", "Sessions kept warm.", static_cast<double>(g.resident));
  counter("laya_sessions_created_total", "Sessions made for a new document.", static_cast<uint64_t>(g.created));
  counter("laya_requests_routed_ahead_total",
          "Requests routed to a session as its text with its last suggestion accepted (a plugin's look-ahead).",
          static_cast<uint64_t>(g.routed_ahead));
  counter("laya_sessions_evicted_total", "Sessions dropped for room (their KV stays cached until needed).",
          static_cast<uint64_t>(g.evicted));
  counter("laya_requests_superseded_total", "Requests cancelled by a newer one on the same session.",
          static_cast<uint64_t>(g.superseded));
  counter("laya_model_swaps_total", "Model swaps done.", static_cast<uint64_t>(g.swaps));
  counter("laya_model_swaps_failed_total", "Model swaps refused (the old model kept serving).",
          static_cast<uint64_t>(g.swaps_failed));
  gauge("laya_connections_held", "Connections open now (each holds a thread).", static_cast<double>(g.connections_held));
  counter("laya_connections_refused_busy_total", "Connections answered 503: every slot held.",
          static_cast<uint64_t>(g.refused_busy));
  counter("laya_connections_refused_client_total", "Connections answered 503: the client's address held its cap.",
          static_cast<uint64_t>(g.refused_client));
  counter("laya_requests_timed_out_total", "Requests not received whole within --request-timeout (408).",
          static_cast<uint64_t>(g.timed_out));
  counter("laya_requests_too_large_total", "Requests stopped at the header or body limit while read (413, 431).",
          static_cast<uint64_t>(g.too_large));
  counter("laya_idle_connections_closed_total", "Idle keep-alive connections closed to give their thread back.",
          static_cast<uint64_t>(g.idle_closed));
  return o;
}

}  // namespace laya::server
