// The CLI's progress bar (tools/laya/progress.h): the line's text as a pure
// function, its width on any terminal, and the drawing itself (on a file put
// in place of stderr): nothing when disabled, few redraws, wiped at the end.
// Also the one stats type replay and bench-typing fill (player/latency_stats.h).
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>

#include "player/latency_stats.h"
#include "progress.h"
#include "report_html.h"
#include "session/session.h"
#include "test_util.h"

namespace laya::cli {
namespace {

size_t columns(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

size_t count(const std::string& s, char c) { return static_cast<size_t>(std::count(s.begin(), s.end(), c)); }

TEST(Progress, DurationFormat) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(59.9), "0:59");
  EXPECT_EQ(format_duration(61), "1:01");
  EXPECT_EQ(format_duration(3599), "59:59");
  EXPECT_EQ(format_duration(3725), "1:02:05");
  EXPECT_EQ(format_duration(-1), "--:--");
  EXPECT_EQ(format_duration(std::nan("")), "--:--");
  EXPECT_EQ(format_duration(INFINITY), "--:--");
}

TEST(Progress, LineShowsCountsPercentElapsedAndEta) {
  // 50 of 200 in 10 s: 25 %, 30 s to go at that rate; the bar is 30 wide, 7 filled.
  EXPECT_EQ(progress_line({"replay", 50, 200, 10.0, "events"}, 100),
            "replay [#######.......................] 50/200 events  25%  0:10 ETA 0:30");
  // Bytes shown as MB.
  EXPECT_EQ(progress_line({"loading m.gguf", 120'000'000, 400'000'000, 2.0, "MB", 1e6}, 100),
            "loading m.gguf [#########.....................] 120/400 MB  30%  0:02 ETA 0:04");
  // Nothing done yet: no rate, no ETA; all done: a full bar and nothing to go.
  const std::string start = progress_line({"x", 0, 10, 0.0, ""}, 80);
  EXPECT_EQ(count(start, '#'), 0u) << start;
  EXPECT_NE(start.find("0/10  0%  0:00 ETA --:--"), std::string::npos) << start;
  const std::string end = progress_line({"x", 10, 10, 5.0, ""}, 80);
  EXPECT_EQ(count(end, '.'), 0u) << end;
  EXPECT_NE(end.find("10/10  100%  0:05 ETA 0:00"), std::string::npos) << end;
  // Past the total (a count that overshoots) is shown as done, never past 100 %.
  EXPECT_NE(progress_line({"x", 12, 10, 5.0, ""}, 80).find("100%"), std::string::npos);
  // Unknown total: the count and the time only.
  EXPECT_EQ(progress_line({"bench", 7, 0, 65.0, "docs"}, 80), "bench 7 docs  1:05");
}

TEST(Progress, LineFitsEveryWidth) {
  const ProgressView views[] = {
      {"replay a_rather_long_trace_name_that_goes_on", 1234, 56789, 12.5, "events"},
      {"zh_会议纪要_trace", 3, 9, 1.0, "chars"},  // cut by code points, never inside one
      {"", 1, 2, 1.0, ""},
      {"x", 5, 0, 3.0, ""},
  };
  for (const ProgressView& v : views) {
    for (int w = 0; w <= 140; ++w) {
      const std::string line = progress_line(v, w);
      // The last column stays free: writing it makes terminals wrap.
      EXPECT_LE(columns(line), static_cast<size_t>(std::max(w - 1, 0))) << w << ": " << line;
      EXPECT_EQ(line.find('\r'), std::string::npos);
      EXPECT_EQ(line.find('\n'), std::string::npos);
      EXPECT_FALSE(!line.empty() && (static_cast<unsigned char>(line.back()) & 0xC0) == 0xC0) << w << ": " << line;
    }
    // Wide enough: the whole label and a bar when there is a total.
    const std::string wide = progress_line(v, 200);
    EXPECT_EQ(wide.rfind(std::string(v.label), 0), 0u) << wide;
    EXPECT_EQ(wide.find('[') != std::string::npos, v.total > 0) << wide;
  }
  // Narrow: the bar goes before the label is cut.
  const std::string mid = progress_line({"replay t", 1, 2, 1.0, "events"}, 40);
  EXPECT_EQ(mid.find('['), std::string::npos) << mid;
  EXPECT_EQ(mid.rfind("replay t ", 0), 0u) << mid;
}

// What a Progress writes, on a temporary file in place of stderr.
class StderrCapture {
 public:
  StderrCapture() : path_(testing::TempDir() + "progress_stderr_" + std::to_string(::getpid())) {
    std::fflush(stderr);
    saved_ = ::dup(STDERR_FILENO);
    FILE* f = std::fopen(path_.c_str(), "w");
    ::dup2(::fileno(f), STDERR_FILENO);
    std::fclose(f);
  }
  ~StderrCapture() { restore(); }
  std::string text() {
    restore();
    return test::read_text_file(path_);
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    saved_ = -1;
  }
  std::string path_;
  int saved_ = -1;
};

TEST(Progress, DisabledWritesNothing) {
  StderrCapture cap;
  {
    Progress p("quiet", 10, false);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    for (uint64_t i = 0; i <= 10; ++i) p.update(i);
    p.clear();
  }
  EXPECT_EQ(cap.text(), "");
}

TEST(Progress, DrawsAFewTimesASecondAndWipesItself) {
  StderrCapture cap;
  using Clock = std::chrono::steady_clock;
  {
    Progress p("work", 1000, true, "items");
    p.update(1);  // too soon: a short job never flashes a bar
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto t0 = Clock::now();
    uint64_t i = 0;
    while (Clock::now() - t0 < std::chrono::milliseconds(450)) p.update(++i % 1000);
  }
  const std::string out = cap.text();
  // Each draw starts with '\r'; the wipe is "\r<spaces>\r". 450 ms at <= 10
  // redraws a second: at most 5 draws (+ 2 for the wipe), however many updates.
  const size_t cr = count(out, '\r');
  EXPECT_GE(cr, 3u) << out;  // at least one draw and the wipe
  EXPECT_LE(cr, 7u) << out;
  EXPECT_NE(out.find("\rwork ["), std::string::npos) << out;
  EXPECT_NE(out.find("/1000 items"), std::string::npos) << out;
  EXPECT_EQ(out.find('\n'), std::string::npos) << out;
  // It ends wiped: the last '\r' follows a run of spaces back to the one before.
  ASSERT_EQ(out.back(), '\r');
  const size_t prev = out.rfind('\r', out.size() - 2);
  ASSERT_NE(prev, std::string::npos);
  EXPECT_EQ(out.substr(prev + 1, out.size() - prev - 2), std::string(out.size() - prev - 2, ' '));
}

TEST(LatencyStats, RecordAddJsonAndReport) {
  Suggestion a, b;
  a.timings.tokens_computed = 5;
  a.timings.tokenize_ms = 0.1;
  a.timings.prefill_ms = 2;
  a.timings.decode_ms = {1, 1.5};
  a.window_moved = true;
  a.healed_bytes = 2;
  b.typed_through = 1;  // typed through with nothing computed: free
  player::LatencyStats s, t;
  s.record(4, 1, a);
  t.record(0.01, 0.01, b);
  s.add(t);
  EXPECT_EQ(s.suggest_ms, (std::vector<double>{4, 0.01}));
  EXPECT_EQ(s.free, (std::vector<bool>{false, true}));
  EXPECT_EQ(s.decode_ms, (std::vector<double>{2.5, 0}));
  EXPECT_EQ(s.free_keystrokes, 1);
  EXPECT_EQ(s.window_moves, 1);
  EXPECT_EQ(s.healed_events, 1);
  EXPECT_EQ(s.decode_steps, 2);
  EXPECT_EQ(s.prefill_tokens(), 5);
  nlohmann::json j;
  s.add_json(&j);
  EXPECT_EQ(j["suggest_ms"]["max"], 4.0);
  EXPECT_EQ(j["suggest_ms"]["p50"], 0.01);
  EXPECT_EQ(j["tokens_computed_per_event"]["max"], 5);
  EXPECT_EQ(j["free_keystrokes"], 1);
  EXPECT_EQ(j["fim_events"], 0);
  const ReportTrace r = report_trace(s, "t");
  EXPECT_EQ(r.name, "t");
  EXPECT_EQ(r.computed, (std::vector<long long>{5, 0}));
  EXPECT_EQ(r.free_keystroke, s.free);
  EXPECT_EQ(r.prefill_ms, s.prefill_ms);
  EXPECT_NE(s.lines().find("suggest_ms      p50 0.010"), std::string::npos) << s.lines();
  EXPECT_EQ(r.typing.chars, 0);  // not a typist's run: no keystroke figures in the report
}

// The typist's counts add up and give the savings and acceptance replay's
// report and bench-typing print.
TEST(LatencyStats, TypingCountsAddUp) {
  player::LatencyStats a, b;
  a.chars = 10, a.keystrokes = 6, a.shown = 4, a.accepted = 2, a.accepted_chars = 5;
  b.chars = 10, b.keystrokes = 10, b.shown = 4, b.accepted = 0;
  a.add(b);
  EXPECT_DOUBLE_EQ(a.savings(), 1.0 - 16.0 / 20.0);
  EXPECT_DOUBLE_EQ(a.acceptance(), 2.0 / 8.0);
  EXPECT_EQ(report_trace(a, "t").typing.accepted_chars, 5);
  EXPECT_DOUBLE_EQ(player::LatencyStats{}.savings(), 0.0);
}

// laya bench's decode steps: interpolated between ranks, as llama-bench's.
TEST(LatencyStats, InterpolatedPercentile) {
  EXPECT_DOUBLE_EQ(player::interpolated_percentile({1, 2, 3, 4}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(player::percentile(std::vector<double>{1, 2, 3, 4}, 0.5), 2.0);
  EXPECT_DOUBLE_EQ(player::interpolated_percentile({}, 0.5), 0.0);
}

}  // namespace
}  // namespace laya::cli
