// laya serve's /metrics: Prometheus text exposition format 0.0.4 (the format
// every Prometheus server and Grafana agent scrapes). Latency histograms per
// stage of a suggestion, tokens reused / computed, requests by endpoint and
// status. Updated under one mutex: a few hundred nanoseconds per request,
// nothing next to a forward pass.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "session/session.h"

namespace laya::server {

// Cumulative buckets in milliseconds, from a fraction of a keystroke budget to
// a cold prompt of a large model.
class LatencyHistogram {
 public:
  static constexpr std::array<double, 14> kBoundsMs = {0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096};
  void observe(double ms);
  // "<name>_bucket{<labels>,le="..."} n" lines, _sum and _count.
  void write(std::string* out, const std::string& name, const std::string& labels) const;

 private:
  std::array<uint64_t, kBoundsMs.size() + 1> counts_{};  // the last: +Inf
  double sum_ = 0;
  uint64_t n_ = 0;
};

struct SessionGauges {
  size_t resident = 0;
  int64_t created = 0, evicted = 0, superseded = 0, routed_existing = 0, routed_ahead = 0;
  int64_t swaps = 0, swaps_failed = 0;
  // Connections (http_guard.h).
  int64_t connections_held = 0, refused_busy = 0, refused_client = 0, timed_out = 0, too_large = 0, idle_closed = 0;
};

class ServerMetrics {
 public:
  void request(const std::string& endpoint, int status);
  void suggestion(const Suggestion& s, double http_ms);
  // The whole exposition text; `g` are read by the caller from their owners.
  std::string render(const SessionGauges& g) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  LatencyHistogram tokenize_, prefill_, decode_step_, suggest_, http_;
  uint64_t tokens_reused_ = 0, tokens_computed_ = 0, tokens_generated_ = 0, free_keystrokes_ = 0, suggestions_ = 0;
};

}  // namespace laya::server
