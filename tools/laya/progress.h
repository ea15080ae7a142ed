// A progress bar for long CLI work (replay, bench-typing, bench-sessions,
// mkmodel, preparing a large model): one line on stderr, redrawn in place
// with '\r', only where stderr is a terminal and --quiet was not given, so
// pipes, files and the tests that read the output never see it. At most ~10
// redraws a second (a keystroke takes well under a millisecond: drawing each
// would cost more than the work), and the line is wiped when the work ends
// or before the command prints a result line of its own (clear()).
//
// The line's text is a pure function (progress_line), unit-tested.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace laya::cli {

// What one line shows. `unit` follows the counts ("events", "MB"); counts are
// divided by `scale` first (1e6 for bytes shown as MB).
struct ProgressView {
  std::string_view label;
  uint64_t done = 0, total = 0;  // total 0: unknown (no bar, percent or ETA)
  double elapsed_s = 0;
  std::string_view unit;
  double scale = 1;
};

// "label [#######.......] 120/400 events  30%  0:04 ETA 0:09", at most
// width - 1 columns (the last column stays free: writing it makes some
// terminals wrap, and '\r' then returns to the wrong line). The bar shrinks
// first, then goes; the label is cut last. ETA: the rate so far applied to
// what is left, "--:--" until there is a rate to go by.
std::string progress_line(const ProgressView& v, int width);
// "0:07", "12:03", "1:02:03"; "--:--" for a negative or non-finite value.
std::string format_duration(double seconds);

// Whether a bar may be drawn: not --quiet, and stderr is a terminal.
bool progress_allowed(bool quiet);

// One bar. Not thread-safe: update it from one thread (the one doing the work).
class Progress {
 public:
  using Clock = std::chrono::steady_clock;
  // `enabled` false: every call does nothing (see progress_allowed).
  Progress(std::string label, uint64_t total, bool enabled, std::string unit = "", double scale = 1);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Sets the count done (redrawn when 100 ms have passed since the last draw).
  void update(uint64_t done);
  // A new stage on the same line: label, total, count and clock start again.
  void restart(std::string label, uint64_t total);
  // The same work, another part of it (e.g. the next trace): the label only.
  void set_label(std::string label) { label_ = std::move(label); }
  // Wipes the line (before printing a result; the next update draws again).
  void clear();
  bool enabled() const { return enabled_; }

 private:
  void draw();
  std::string label_, unit_;
  uint64_t total_ = 0, done_ = 0;
  double scale_ = 1;
  bool enabled_ = false;
  Clock::time_point start_, last_draw_;
  size_t drawn_ = 0;  // columns of the line on screen now (0: none)
};

// For EngineOptions::on_prepare_progress (and MkModelOptions::progress):
// a bar labelled `label` over byte counts, drawn only when the total is at
// least `min_bytes` and progress_allowed(quiet); wiped when done reaches the
// total. The callback is safe to call from one thread at a time (a later
// load, e.g. a model swap on another thread, starts a new bar).
std::function<void(uint64_t done, uint64_t total)> byte_progress(std::string label, bool quiet, uint64_t min_bytes);

// Models smaller than this load in well under a second: no bar.
inline constexpr uint64_t kLoadProgressMinBytes = 200'000'000;

}  // namespace laya::cli
