#include "svg_plot.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace laya::cli::svg {
namespace {

// Plot area inside the svg: room for the y labels on the left and the x
// labels and legend below.
struct Frame {
  double x0, y0, x1, y1;  // plot area (y0 top)
};

Frame frame(Size s) { return {56, 12, s.width - 12.0, s.height - 46.0}; }

std::string open(Size s) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"system-ui, sans-serif\" font-size=\"11\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"#fff\"/>\n",
      s.width, s.height);
}

std::string num(double v) {
  if (v >= 100 || v == std::floor(v)) return fmt::format("{:g}", v);
  return fmt::format("{:.3g}", v);
}

double log_x(double v, double lo, double hi, const Frame& f) {
  const double t = (std::log10(std::max(v, lo)) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
  return f.x0 + std::clamp(t, 0.0, 1.0) * (f.x1 - f.x0);
}

// The x axis: ticks at powers of ten (and 2, 5 between them), labelled.
std::string log_x_axis(double lo, double hi, const Frame& f, const std::string& label) {
  std::string o = fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/>\n", f.x0, f.y1, f.x1, f.y1);
  for (double d = lo; d <= hi * 1.0001; d *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double v = d * m;
      if (v > hi * 1.0001) break;
      const double x = log_x(v, lo, hi, f);
      o += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/>\n", x, f.y0, f.y1);
      o += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\" fill=\"#333\">{}</text>\n", x, f.y1 + 14,
                       num(v));
    }
  }
  o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#333\">{}</text>\n", (f.x0 + f.x1) / 2,
                   f.y1 + 28, escape(label));
  return o;
}

std::string legend(const std::vector<Series>& s, Size size) {
  std::string o;
  double x = 60;
  for (const Series& e : s) {
    o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/>", x, size.height - 12, e.color);
    o += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#333\">{} ({} events)</text>\n", x + 14, size.height - 3,
                     escape(e.name), e.values.size());
    x += 30 + 7.0 * static_cast<double>(e.name.size() + 12);
  }
  return o;
}

std::string y_axis(double top, const Frame& f, const std::string& label, bool percent) {
  std::string o = fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/>\n", f.x0, f.y0, f.x0, f.y1);
  for (int i = 0; i <= 4; ++i) {
    const double v = top * i / 4.0;
    const double y = f.y1 - (f.y1 - f.y0) * i / 4.0;
    o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\" fill=\"#333\">{}</text>\n", f.x0 - 4, y + 4,
                     percent ? fmt::format("{:.0f}%", v * 100) : num(v));
  }
  o += fmt::format("<text transform=\"translate(12 {}) rotate(-90)\" text-anchor=\"middle\" fill=\"#333\">{}</text>\n",
                   (f.y0 + f.y1) / 2, escape(label));
  return o;
}

}  // namespace

std::string escape(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

std::vector<double> log_edges(double lo, double hi, int n) {
  std::vector<double> e(static_cast<size_t>(n) + 1);
  const double a = std::log10(lo), b = std::log10(hi);
  for (int i = 0; i <= n; ++i) e[static_cast<size_t>(i)] = std::pow(10.0, a + (b - a) * i / n);
  return e;
}

std::vector<int64_t> bin_counts(const std::vector<double>& values, const std::vector<double>& edges) {
  std::vector<int64_t> c(edges.size() - 1, 0);
  for (double v : values) {
    const auto it = std::upper_bound(edges.begin() + 1, edges.end() - 1, v);
    ++c[static_cast<size_t>(it - (edges.begin() + 1))];
  }
  return c;
}

void log_range(const std::vector<Series>& s, double* lo, double* hi) {
  double mn = 1e300, mx = 0;
  for (const Series& e : s)
    for (double v : e.values) mn = std::min(mn, std::max(v, 0.001)), mx = std::max(mx, v);
  if (mx <= 0) mn = 0.01, mx = 1;
  *lo = std::pow(10.0, std::floor(std::log10(mn)));
  *hi = std::pow(10.0, std::ceil(std::log10(std::max(mx, *lo * 10))));
}

std::string histogram(const std::vector<Series>& s, const std::string& x_label, Size size) {
  double lo = 0, hi = 0;
  log_range(s, &lo, &hi);
  const int per_decade = 12;
  const int n = std::max(1, static_cast<int>(std::lround(std::log10(hi / lo))) * per_decade);
  const std::vector<double> edges = log_edges(lo, hi, n);
  const Frame f = frame(size);
  // Each series as the share of its events per bin, so runs of different lengths compare.
  std::vector<std::vector<double>> share;
  double top = 0;
  for (const Series& e : s) {
    const auto c = bin_counts(e.values, edges);
    std::vector<double> sh(c.size());
    for (size_t i = 0; i < c.size(); ++i) {
      sh[i] = e.values.empty() ? 0 : static_cast<double>(c[i]) / static_cast<double>(e.values.size());
      top = std::max(top, sh[i]);
    }
    share.push_back(std::move(sh));
  }
  top = top <= 0 ? 1 : std::ceil(top * 20) / 20;
  std::string o = open(size) + y_axis(top, f, "share of keystrokes", true) + log_x_axis(lo, hi, f, x_label);
  for (size_t k = 0; k < s.size(); ++k) {
    for (size_t i = 0; i + 1 < edges.size(); ++i) {
      if (share[k][i] <= 0) continue;
      const double x0 = log_x(edges[i], lo, hi, f), x1 = log_x(edges[i + 1], lo, hi, f);
      const double h = (f.y1 - f.y0) * share[k][i] / top;
      o += fmt::format("<rect class=\"bin\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\" "
                       "fill-opacity=\"0.6\"><title>{}: {}–{} ms, {:.1f}%</title></rect>\n",
                       x0 + 0.5, f.y1 - h, std::max(0.5, x1 - x0 - 1), h, s[k].color, escape(s[k].name),
                       num(edges[i]), num(edges[i + 1]), share[k][i] * 100);
    }
  }
  return o + legend(s, size) + "</svg>\n";
}

std::string cdf(const std::vector<Series>& s, const std::string& x_label, Size size) {
  double lo = 0, hi = 0;
  log_range(s, &lo, &hi);
  const Frame f = frame(size);
  std::string o = open(size) + y_axis(1.0, f, "keystrokes at or below", true) + log_x_axis(lo, hi, f, x_label);
  for (const Series& e : s) {
    if (e.values.empty()) continue;
    std::vector<double> v = e.values;
    std::sort(v.begin(), v.end());
    std::string pts;
    // At most ~600 points: every value of a small run, evenly chosen ranks of a large one.
    const size_t step = std::max<size_t>(1, v.size() / 600);
    for (size_t i = 0; i < v.size(); i += step) {
      const double x = log_x(v[i], lo, hi, f);
      const double y = f.y1 - (f.y1 - f.y0) * static_cast<double>(i + 1) / static_cast<double>(v.size());
      pts += fmt::format("{:.1f},{:.1f} ", x, y);
    }
    pts += fmt::format("{:.1f},{:.1f}", log_x(v.back(), lo, hi, f), f.y0);
    o += fmt::format("<polyline class=\"cdf\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n",
                     e.color, pts);
  }
  return o + legend(s, size) + "</svg>\n";
}

std::string timeline(const Series& s, const std::vector<bool>& marked, const std::string& mark_label,
                     const std::string& y_label, Size size) {
  double lo = 0, hi = 0;
  log_range({s}, &lo, &hi);
  const Frame f = frame(size);
  std::string o = open(size);
  o += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/>\n", f.x0, f.y0, f.x0, f.y1);
  for (double d = lo; d <= hi * 1.0001; d *= 10) {
    const double y = f.y1 - (std::log10(d) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) * (f.y1 - f.y0);
    o += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>", f.x0, y, f.x1, y);
    o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\" fill=\"#333\">{}</text>\n", f.x0 - 4, y + 4, num(d));
  }
  o += fmt::format("<text transform=\"translate(12 {}) rotate(-90)\" text-anchor=\"middle\" fill=\"#333\">{}</text>\n",
                   (f.y0 + f.y1) / 2, escape(y_label));
  o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#333\">keystroke (event) 1 … {}</text>\n",
                   (f.x0 + f.x1) / 2, f.y1 + 28, s.values.size());
  const double n = std::max<double>(1, static_cast<double>(s.values.size()) - 1);
  std::string plain, marks;
  for (size_t i = 0; i < s.values.size(); ++i) {
    const double x = f.x0 + (f.x1 - f.x0) * static_cast<double>(i) / n;
    const double t = (std::log10(std::max(s.values[i], lo)) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
    const double y = f.y1 - std::clamp(t, 0.0, 1.0) * (f.y1 - f.y0);
    (i < marked.size() && marked[i] ? marks : plain) += fmt::format("M{:.1f} {:.1f}h1.5", x, y);
  }
  o += fmt::format("<path class=\"points\" d=\"{}\" stroke=\"{}\" stroke-width=\"2\"/>\n", plain, s.color);
  if (!marks.empty()) o += fmt::format("<path class=\"marks\" d=\"{}\" stroke=\"#2a9d3a\" stroke-width=\"2\"/>\n", marks);
  o += fmt::format("<rect x=\"60\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"74\" y=\"{}\" "
                   "fill=\"#333\">{}</text>",
                   size.height - 12, s.color, size.height - 3, escape(s.name));
  o += fmt::format("<rect x=\"260\" y=\"{}\" width=\"10\" height=\"10\" fill=\"#2a9d3a\"/><text x=\"274\" y=\"{}\" "
                   "fill=\"#333\">{}</text>\n",
                   size.height - 12, size.height - 3, escape(mark_label));
  return o + "</svg>\n";
}

std::string bars(const std::vector<std::pair<std::string, double>>& items, const std::string& unit, Size size) {
  double top = 0;
  for (const auto& [name, v] : items) top = std::max(top, v);
  if (top <= 0) top = 1;
  const double row = 22, x0 = 150, x1 = size.width - 80.0;
  size.height = static_cast<int>(row * static_cast<double>(items.size()) + 10);
  std::string o = open(size);
  for (size_t i = 0; i < items.size(); ++i) {
    const double y = 5 + row * static_cast<double>(i);
    const double w = (x1 - x0) * items[i].second / top;
    o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\" fill=\"#333\">{}</text>", x0 - 6, y + 14,
                     escape(items[i].first));
    o += fmt::format("<rect class=\"bar\" x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"16\" fill=\"#4c78a8\"/>", x0, y,
                     std::max(0.5, w));
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#333\">{} {}</text>\n", x0 + w + 4, y + 14,
                     num(items[i].second), escape(unit));
  }
  return o + "</svg>\n";
}

}  // namespace laya::cli::svg
