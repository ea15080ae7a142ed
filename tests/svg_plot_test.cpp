// The latency report's SVG module (tools/laya/svg_plot.h): binning on log
// axes, and charts checked by counting and measuring their elements.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "report_html.h"
#include "svg_plot.h"

namespace laya::cli::svg {
namespace {

int count(const std::string& s, const std::string& needle) {
  int n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

// The first bar's x, y, width and height, in that order and each a number
// ([0-9.]+), as in `class="bin" x="1" y="2" width="3" height="4"`. A scanner
// rather than std::regex: <regex> made this file the test build's slowest
// (its instantiations at -O0, for one search).
bool bar_attributes(const std::string& s, std::vector<std::string>* out) {
  size_t p = s.find("class=\"bin\"");
  if (p == std::string::npos) return false;
  p += 11;
  out->clear();
  for (const char* name : {" x=\"", " y=\"", " width=\"", " height=\""}) {
    const std::string key = name;
    if (s.compare(p, key.size(), key) != 0) return false;
    p += key.size();
    const size_t end = s.find_first_not_of("0123456789.", p);
    if (end == std::string::npos || end == p || s[end] != '"') return false;
    out->push_back(s.substr(p, end - p));
    p = end + 1;
  }
  return true;
}

TEST(SvgPlot, LogBinsAndCounts) {
  const auto e = log_edges(0.1, 100, 3);
  ASSERT_EQ(e.size(), 4u);
  EXPECT_NEAR(e[0], 0.1, 1e-12);
  EXPECT_NEAR(e[1], 1, 1e-12);
  EXPECT_NEAR(e[2], 10, 1e-12);
  EXPECT_NEAR(e[3], 100, 1e-9);
  // Below the first edge to the first bin, above the last to the last.
  const auto c = bin_counts({0.05, 0.5, 5, 9.99, 50, 500}, e);
  EXPECT_EQ(c, (std::vector<int64_t>{2, 2, 2}));
  double lo = 0, hi = 0;
  log_range({{"a", {0.04, 3.0}, "red"}}, &lo, &hi);
  EXPECT_DOUBLE_EQ(lo, 0.01);
  EXPECT_DOUBLE_EQ(hi, 10);
}

TEST(SvgPlot, HistogramBarsAreShares) {
  // All four values in one bin: one bar, as tall as the plot (share 100 %).
  const std::string s = histogram({{"laya", {1.01, 1.02, 1.03, 1.04}, "#e00"}}, "ms");
  EXPECT_EQ(count(s, "class=\"bin\""), 1);
  std::vector<std::string> m;
  ASSERT_TRUE(bar_attributes(s, &m)) << s;
  EXPECT_NEAR(std::stod(m[1]), 12.0, 0.05);            // the plot's top
  EXPECT_NEAR(std::stod(m[3]), 260 - 46 - 12.0, 0.05);  // the plot's full height
  // Two series: bars of both colours, and a legend entry each.
  const std::string two = histogram({{"laya", {1, 2}, "#e00"}, {"peer", {30, 40}, "#00e"}}, "ms");
  EXPECT_EQ(count(two, "fill=\"#e00\" fill-opacity"), 2);
  EXPECT_EQ(count(two, "fill=\"#00e\" fill-opacity"), 2);
  EXPECT_NE(two.find("peer (2 events)"), std::string::npos);
}

TEST(SvgPlot, CdfTimelineBarsAndEscaping) {
  EXPECT_EQ(count(cdf({{"a", {1, 2, 3}, "#e00"}, {"b", {4}, "#00e"}}, "ms"), "<polyline"), 2);
  const std::string t = timeline({"s", {1, 2, 3}, "#e00"}, {false, true, false}, "free", "ms");
  EXPECT_EQ(count(t, "class=\"marks\""), 1);
  EXPECT_EQ(count(t, "h1.5"), 3);
  EXPECT_EQ(count(timeline({"s", {1, 2}, "#e00"}, {}, "free", "ms"), "class=\"marks\""), 0);
  EXPECT_EQ(count(bars({{"a", 1}, {"b", 2}}, "ms"), "class=\"bar\""), 2);
  EXPECT_EQ(escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
  EXPECT_NE(histogram({{"<script>", {1}, "#e00"}}, "ms").find("&lt;script&gt;"), std::string::npos);
}

TEST(ReportHtml, SelfContainedWithEverySection) {
  ReportInput in;
  in.model = "m.gguf";
  in.command = "laya replay --html r.html";
  in.machine = "test";
  ReportTrace a{"a", {1, 2, 3}, {0.5, 0.5, 0.5}, {0, 1, 2}, {false, true, false}, {0.1, 0.1, 0.1}, {0.2, 0.2, 0.2},
                {1, 1, 1}, {40, 50}, {}};
  ReportTrace b = a;
  b.name = "b";
  in.traces = {a, b};
  const std::string h = report_html(in);
  EXPECT_EQ(count(h, "<section>"), 3);  // all traces, a, b
  EXPECT_EQ(count(h, "<svg"), 3 * 5);
  EXPECT_EQ(h.find("<script"), std::string::npos);
  EXPECT_EQ(h.find("http://"), h.find("http://www.w3.org/2000/svg"));  // nothing fetched
  EXPECT_NE(h.find("llama-server"), std::string::npos);
}

// bench-typing's report: each section adds the keystroke savings (a sentence
// and one more chart); the overall section sums the traces' keystrokes.
TEST(ReportHtml, BenchTypingSectionsShowKeystrokeSavings) {
  ReportInput in;
  in.model = "m.gguf";
  in.how = "a simulated user <typing>";
  // 10 characters in 4 keystrokes: 60 % saved; 2 of 3 suggestions shown accepted, 7 characters with Tab.
  ReportTrace a{"a", {1, 2, 3, 4}, {0.5, 0.5, 0.5, 0.5}, {4, 0, 2, 2}, {false, true, false, false}, {0, 0, 0, 0},
                {1, 1, 1, 1}, {1, 1, 1, 1}, {}, {10, 4, 3, 2, 7}};
  ReportTrace b = a;
  b.name = "b";
  b.typing = {30, 30, 5, 0, 0};  // nothing saved
  in.traces = {a, b};
  const std::string h = report_html(in);
  EXPECT_EQ(count(h, "<section>"), 3);
  EXPECT_EQ(count(h, "<svg"), 3 * 6);
  EXPECT_NE(h.find("a simulated user &lt;typing&gt;"), std::string::npos);  // in place of the pace, escaped
  EXPECT_EQ(h.find("events back to back"), std::string::npos);
  EXPECT_NE(h.find("<b>Keystroke savings 60.0 %</b>: 4 keystrokes (typed or Tab) for 10 characters. "
                   "2 of 3 suggestions shown were accepted (66.7 %), 7 characters with Tab. "
                   "Prompt tokens computed: 2.00 per keystroke."),
            std::string::npos);
  EXPECT_NE(h.find("<b>Keystroke savings 0.0 %</b>: 30 keystrokes (typed or Tab) for 30 characters."), std::string::npos);
  // All traces: 40 characters in 34 keystrokes.
  EXPECT_NE(h.find("<b>Keystroke savings 15.0 %</b>: 34 keystrokes (typed or Tab) for 40 characters. "
                   "2 of 8 suggestions shown were accepted (25.0 %)"),
            std::string::npos);
  // Replay's report has no such part.
  for (ReportTrace& t : in.traces) t.typing = {};
  EXPECT_EQ(report_html(in).find("Keystroke savings"), std::string::npos);
}

}  // namespace
}  // namespace laya::cli::svg
