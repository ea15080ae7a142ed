// Small SVG charts for the latency report (report_html.h): a histogram and a
// CDF of latencies on a log-scale x axis, a timeline of per-event values
// (log-scale y) with marked events, and horizontal bars. Each returns one
// self-contained <svg> element (no script, no external font); several series
// share the axes, each in its own colour with a legend.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace laya::cli::svg {

struct Series {
  std::string name;
  std::vector<double> values;  // milliseconds (> 0 for log axes; smaller values are drawn at the axis' low end)
  std::string color;           // CSS colour
};

struct Size {
  int width = 640, height = 260;
};

// Log-spaced bin edges covering [lo, hi] (lo > 0): n + 1 edges.
std::vector<double> log_edges(double lo, double hi, int n);
// Counts of `values` per bin of `edges` (values below the first edge go to
// the first bin, above the last to the last).
std::vector<int64_t> bin_counts(const std::vector<double>& values, const std::vector<double>& edges);
// Axis range for latencies: a power of ten at or below the smallest value
// (>= 0.001) and at or above the largest.
void log_range(const std::vector<Series>& s, double* lo, double* hi);

std::string histogram(const std::vector<Series>& s, const std::string& x_label, Size size = {});
std::string cdf(const std::vector<Series>& s, const std::string& x_label, Size size = {});
// values[i] at x = i; `marked` (same length or empty) draws those events in the mark colour.
std::string timeline(const Series& s, const std::vector<bool>& marked, const std::string& mark_label,
                     const std::string& y_label, Size size = {});
// One bar per (label, value), the value printed at its end.
std::string bars(const std::vector<std::pair<std::string, double>>& items, const std::string& unit, Size size = {});

// Text for SVG/HTML: & < > " ' escaped.
std::string escape(std::string_view s);

}  // namespace laya::cli::svg
