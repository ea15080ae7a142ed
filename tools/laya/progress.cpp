#include "progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include <fmt/format.h>

namespace laya::cli {
namespace {

// Columns of UTF-8 text, one per code point (labels are file and trace names).
size_t columns(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// The first `cols` code points of s.
std::string_view first_columns(std::string_view s, size_t cols) {
  size_t i = 0;
  for (size_t n = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && n++ == cols) break;
  }
  return s.substr(0, i);
}

std::string count(uint64_t v, double scale) {
  return scale == 1 ? std::to_string(v) : fmt::format("{:.0f}", static_cast<double>(v) / scale);
}

// The width of the terminal on stderr (80 when it does not say).
int terminal_width() {
  winsize ws{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

// Before the first draw: work that ends sooner never flashes a bar.
constexpr auto kFirstDraw = std::chrono::milliseconds(250);
constexpr auto kRedraw = std::chrono::milliseconds(100);  // ~10 redraws a second
constexpr size_t kBarMax = 30, kBarMin = 10;

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const auto s = static_cast<uint64_t>(seconds);
  if (s < 3600) return fmt::format("{}:{:02}", s / 60, s % 60);
  return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
}

std::string progress_line(const ProgressView& v, int width) {
  const size_t w = width > 1 ? static_cast<size_t>(width - 1) : 0;
  std::string tail = count(v.done, v.scale);
  if (v.total > 0) tail += fmt::format("/{}", count(v.total, v.scale));
  if (!v.unit.empty()) tail += fmt::format(" {}", v.unit);
  std::string bar;
  if (v.total > 0) {
    const uint64_t done = std::min(v.done, v.total);
    const double eta = done >= v.total ? 0.0
                       : done == 0     ? -1.0
                                       : v.elapsed_s * static_cast<double>(v.total - done) / static_cast<double>(done);
    tail += fmt::format("  {}%  {} ETA {}", done * 100 / v.total, format_duration(v.elapsed_s), format_duration(eta));
    // [###....]: as wide as fits beside the label and the tail, up to kBarMax.
    const size_t fixed = columns(v.label) + 1 + 2 + 1 + columns(tail);
    if (fixed + kBarMin <= w) {
      const size_t n = std::min(kBarMax, w - fixed);
      const auto filled = static_cast<size_t>(static_cast<double>(n) * static_cast<double>(done) /
                                              static_cast<double>(v.total));
      bar = fmt::format("[{}{}] ", std::string(filled, '#'), std::string(n - filled, '.'));
    }
  } else {
    tail += fmt::format("  {}", format_duration(v.elapsed_s));
  }
  const size_t rest = bar.size() + columns(tail);
  if (rest + 1 >= w) return std::string(first_columns(tail, w));  // no room for a label
  const std::string_view label = first_columns(v.label, w - rest - 1);
  return fmt::format("{} {}{}", label, bar, tail);
}

bool progress_allowed(bool quiet) { return !quiet && isatty(STDERR_FILENO) == 1; }

Progress::Progress(std::string label, uint64_t total, bool enabled, std::string unit, double scale)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), scale_(scale), enabled_(enabled),
      start_(Clock::now()) {}

Progress::~Progress() { clear(); }

void Progress::update(uint64_t done) {
  done_ = done;
  if (!enabled_) return;
  const auto now = Clock::now();
  if (now - start_ < kFirstDraw || (drawn_ > 0 && now - last_draw_ < kRedraw)) return;
  last_draw_ = now;
  draw();
}

void Progress::restart(std::string label, uint64_t total) {
  clear();
  label_ = std::move(label);
  total_ = total;
  done_ = 0;
  start_ = Clock::now();
}

void Progress::draw() {
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  std::string line = progress_line({label_, done_, total_, elapsed, unit_, scale_}, terminal_width());
  const size_t cols = columns(line);
  if (cols < drawn_) line.append(drawn_ - cols, ' ');  // over the end of a longer line drawn before
  line.insert(line.begin(), '\r');
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  drawn_ = std::max(drawn_, cols);
}

void Progress::clear() {
  if (drawn_ == 0) return;
  const std::string blank = fmt::format("\r{}\r", std::string(drawn_, ' '));
  std::fwrite(blank.data(), 1, blank.size(), stderr);
  std::fflush(stderr);
  drawn_ = 0;
}

std::function<void(uint64_t, uint64_t)> byte_progress(std::string label, bool quiet, uint64_t min_bytes) {
  struct State {
    std::mutex mu;
    std::unique_ptr<Progress> bar;
  };
  if (!progress_allowed(quiet)) return {};
  return [label = std::move(label), min_bytes, st = std::make_shared<State>()](uint64_t done, uint64_t total) {
    if (total < min_bytes) return;
    std::lock_guard<std::mutex> lock(st->mu);
    if (!st->bar) st->bar = std::make_unique<Progress>(label, total, true, "MB", 1e6);
    st->bar->update(done);
    if (done >= total) st->bar.reset();  // wiped; a later load starts a bar of its own
  };
}

}  // namespace laya::cli
