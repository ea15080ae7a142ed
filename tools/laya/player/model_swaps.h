// `laya replay --swap-to OTHER --swap-every N [--swap-bad FILE]`: hot model
// swaps while the traces play (issue 12, scope 3).
//
// SwapDriver owns a thread that calls ModelSlot::swap_model, so a swap's
// loading, packing and probing overlap the keystrokes the replay thread is
// computing, as an application swapping in the background would. The replay
// thread calls after_event() after each event; every N events it asks for the
// next swap (-m <-> OTHER, alternately) and goes on at once. Once, at the
// first request past half of the events, the target is the --swap-bad file
// instead: that swap must fail, leave the old model serving, and is reported.
// A request that comes while a swap still runs is skipped (counted).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "session/model_slot.h"

namespace laya::player {

struct SwapRecord {
  std::chrono::steady_clock::time_point start, end;  // swap_model's call and return
  std::string target;
  bool bad = false;  // the --swap-bad file
  bool ok = false;
  bool old_model_kept = false;  // on failure: the slot serves what it served before
  std::string message;          // on failure
};

// VmRSS of this process in MB (/proc/self/status), or -1 where unknown.
double rss_mb();

class SwapDriver {
 public:
  SwapDriver(ModelSlot& slot, std::string model_a, std::string model_b, std::string bad, int64_t every,
             int64_t total_events);
  ~SwapDriver();
  SwapDriver(const SwapDriver&) = delete;
  SwapDriver& operator=(const SwapDriver&) = delete;

  // The replay thread, after each event: may request a swap; never waits.
  void after_event();
  // Waits for the swap in flight and stops the thread (idempotent).
  void finish();

  // After finish():
  const std::vector<SwapRecord>& records() const { return records_; }
  int64_t skipped() const { return skipped_; }
  double rss_mb_after_first_swap() const { return rss_first_; }

 private:
  void loop();

  ModelSlot& slot_;
  const std::string a_, b_, bad_;
  const int64_t every_, total_;
  int64_t events_ = 0;  // replay thread only
  bool bad_done_ = false, next_b_ = true;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string pending_;  // the target asked for ("" none); guarded by mu_
  bool pending_bad_ = false, busy_ = false, stop_ = false;
  int64_t skipped_ = 0;
  std::vector<SwapRecord> records_;  // written by the swap thread, read after finish()
  double rss_first_ = -1;
  std::thread thread_;  // last: started when everything above exists
};

// One event's suggest as the swap statistics need it (synchronous replay).
struct SwapEventTime {
  std::chrono::steady_clock::time_point t0, t1;  // handed to the session .. suggestion complete
  double ms = 0;
  bool on_b = false;    // computed on the --swap-to model
  bool rebound = false;  // the session's first suggestion on a model it had just moved to
  double rebind_ms = 0;  // SuggestTimings::rebind_ms
};

// The JSON additions: swaps, swaps_failed, swap_added_ms, ... (definitions
// in replay_swap.cpp). base_a / base_b: the same events' suggest_ms in replays
// without swaps on -m and on OTHER (empty: not measured, swap_added_ms null).
nlohmann::json swap_json(const SwapDriver& d, const std::vector<SwapEventTime>& ev, const std::vector<double>& base_a,
                         const std::vector<double>& base_b, double rss_end_mb);

}  // namespace laya::player
