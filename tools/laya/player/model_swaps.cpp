#include "player/model_swaps.h"

#include <fstream>
#include <utility>

#include "player/latency_stats.h"

namespace laya::player {

double rss_mb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // "VmRSS:   123456 kB"
  }
  return -1;
}

SwapDriver::SwapDriver(ModelSlot& slot, std::string model_a, std::string model_b, std::string bad, int64_t every,
                       int64_t total_events)
    : slot_(slot), a_(std::move(model_a)), b_(std::move(model_b)), bad_(std::move(bad)), every_(every),
      total_(total_events) {
  bad_done_ = bad_.empty();
  thread_ = std::thread([this] { loop(); });
}

SwapDriver::~SwapDriver() { finish(); }

void SwapDriver::after_event() {
  if (++events_ % every_ != 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (busy_ || !pending_.empty()) {
    ++skipped_;
    return;
  }
  // The bad file once, at the first request past the middle of the run.
  if (!bad_done_ && 2 * events_ >= total_) {
    bad_done_ = true;
    pending_ = bad_;
    pending_bad_ = true;
  } else {
    pending_ = next_b_ ? b_ : a_;
    pending_bad_ = false;
  }
  cv_.notify_one();
}

void SwapDriver::finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void SwapDriver::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
    if (pending_.empty()) return;  // stop_, nothing asked: done (an asked swap still runs, then we stop)
    SwapRecord r;
    r.target = std::exchange(pending_, std::string());
    r.bad = pending_bad_;
    busy_ = true;
    lock.unlock();
    const uint64_t before = slot_.current_id();
    r.start = std::chrono::steady_clock::now();
    const Status st = slot_.swap_model(r.target);
    r.end = std::chrono::steady_clock::now();
    r.ok = st.ok();
    r.old_model_kept = !st.ok() && slot_.current_id() == before;
    if (!st.ok()) r.message = st.message();
    const bool first_ok = r.ok && rss_first_ < 0;
    if (first_ok) rss_first_ = rss_mb();
    lock.lock();
    if (r.ok && !r.bad) next_b_ = !next_b_;
    records_.push_back(std::move(r));
    busy_ = false;
  }
}

// Definitions (all over the synchronous replay's events, in order):
//   swaps / swaps_failed   swap_model calls that succeeded / failed (the
//                          --swap-bad one included in swaps_failed).
//   swap_ms                a successful swap_model call, start to return
//                          (load + prepare + probe; ~0 for a swap back to the
//                          kept bundle), on the swap thread.
//   affected events        events whose suggestion overlapped a swap_model
//                          call in time, or was the session's first on a model
//                          it had just moved to (Suggestion::rebound).
//   swap_added_ms          for each affected event: its suggest_ms minus the
//                          same event's suggest_ms in a replay of the same
//                          traces without swaps on the model that computed it
//                          (-m or OTHER). It holds everything the swap cost
//                          that keystroke: the cores the loading thread took,
//                          the switch itself (rebind_ms), and the prompt
//                          recomputed on the new model where its pool held no
//                          blocks for it. Negative values are measurement
//                          noise and are kept (no clamping), so p50 is honest.
//   rebind_ms              the switch on the keystroke path: re-tokenizing
//                          state reset, new sequence (SuggestTimings::rebind_ms).
nlohmann::json swap_json(const SwapDriver& d, const std::vector<SwapEventTime>& ev, const std::vector<double>& base_a,
                         const std::vector<double>& base_b, double rss_end_mb) {
  using json = nlohmann::json;
  json j;
  int64_t ok = 0, failed = 0;
  std::vector<double> swap_ms;
  json bad = nullptr, errors = json::array();
  for (const SwapRecord& r : d.records()) {
    (r.ok ? ok : failed) += 1;
    if (r.ok) swap_ms.push_back(std::chrono::duration<double, std::milli>(r.end - r.start).count());
    if (!r.ok && !r.bad) errors.push_back(r.message);
    if (r.bad) bad = {{"file", r.target}, {"failed", !r.ok}, {"old_model_kept", r.old_model_kept}, {"message", r.message}};
  }
  j["swaps"] = ok;
  j["swaps_failed"] = failed;
  j["swap_requests_skipped"] = d.skipped();  // asked while a swap still ran
  j["bad_swap"] = bad;
  j["swap_errors"] = errors;  // failures other than the --swap-bad one
  j["swap_ms"] = {{"p50", percentile(swap_ms, 0.5)}, {"max", percentile(swap_ms, 1.0)}};
  const bool have_base = !ev.empty() && base_a.size() == ev.size() && base_b.size() == ev.size();
  std::vector<double> added, added_first, added_overlap, rebind;
  int64_t affected = 0;
  for (size_t k = 0; k < ev.size(); ++k) {
    if (ev[k].rebound) rebind.push_back(ev[k].rebind_ms);
    bool overlap = false;
    for (const SwapRecord& r : d.records()) overlap = overlap || (r.start < ev[k].t1 && r.end > ev[k].t0);
    if (!overlap && !ev[k].rebound) continue;
    ++affected;
    if (!have_base) continue;
    const double x = ev[k].ms - (ev[k].on_b ? base_b[k] : base_a[k]);
    added.push_back(x);
    (ev[k].rebound ? added_first : added_overlap).push_back(x);
  }
  j["swap_affected_events"] = affected;
  j["swap_added_ms"] = have_base ? json{{"p50", percentile(added, 0.5)},
                                        {"p99", percentile(added, 0.99)},
                                        {"max", percentile(added, 1.0)}}
                                 : json(nullptr);
  // The same split by cause: the first suggestion on the new model (it may
  // also have overlapped a load), and the others that overlapped a swap_model call.
  auto three = [](const std::vector<double>& v) {
    return json{{"n", v.size()}, {"p50", percentile(v, 0.5)}, {"p99", percentile(v, 0.99)}, {"max", percentile(v, 1.0)}};
  };
  j["swap_added_ms_by_cause"] = have_base ? json{{"first_on_new_model", three(added_first)},
                                                 {"overlapped_a_load", three(added_overlap)}}
                                          : json(nullptr);
  j["rebind_ms"] = {{"p50", percentile(rebind, 0.5)}, {"max", percentile(rebind, 1.0)}};
  j["rss_mb_after_first_swap"] = d.rss_mb_after_first_swap();
  j["rss_mb_end"] = rss_end_mb;
  return j;
}

}  // namespace laya::player
