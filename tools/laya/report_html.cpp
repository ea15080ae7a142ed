#include "report_html.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "latency_stats.h"
#include "svg_plot.h"

namespace laya::cli {
namespace {

constexpr const char* kLaya = "#e4572e";
constexpr const char* kPeer = "#4c78a8";

std::string pct_row(const std::string& who, const std::vector<double>& v) {
  if (v.empty()) return "";
  return fmt::format("<tr><td>{}</td><td>{}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.3f}</td>"
                     "<td>{:.3f}</td></tr>\n",
                     svg::escape(who), v.size(), percentile(v, 0.5), percentile(v, 0.9), percentile(v, 0.99),
                     percentile(v, 0.999), percentile(v, 1.0));
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

std::string section(const ReportTrace& t, const std::string& peer_name) {
  std::string o = fmt::format("<section><h2>{}</h2>\n", svg::escape(t.name));
  const size_t n_free = static_cast<size_t>(std::count(t.free_keystroke.begin(), t.free_keystroke.end(), true));
  o += fmt::format("<p>{} keystrokes, {} free (the suggestion continued what was typed: no forward pass).</p>\n",
                   t.suggest_ms.size(), n_free);
  o += "<table><tr><th>keystroke → complete suggestion, ms</th><th>events</th><th>p50</th><th>p90</th><th>p99</th>"
       "<th>p99.9</th><th>max</th></tr>\n";
  o += pct_row("laya", t.suggest_ms) + pct_row("laya, first token", t.first_token_ms);
  o += pct_row(peer_name, t.peer_suggest_ms);
  o += "</table>\n";
  std::vector<svg::Series> s = {{"laya", t.suggest_ms, kLaya}};
  if (!t.peer_suggest_ms.empty()) s.push_back({peer_name, t.peer_suggest_ms, kPeer});
  o += "<div class=\"row\"><figure>" + svg::histogram(s, "keystroke → suggestion, ms (log scale)") +
       "<figcaption>Histogram: share of keystrokes per latency bin.</figcaption></figure>\n";
  o += "<figure>" + svg::cdf(s, "keystroke → suggestion, ms (log scale)") +
       "<figcaption>CDF: the share of keystrokes answered within x ms.</figcaption></figure></div>\n";
  o += "<figure>" +
       svg::timeline({"laya, keystroke → suggestion (ms)", t.suggest_ms, kLaya}, t.free_keystroke,
                     "free keystroke (typed through the suggestion)", "ms (log scale)", {1300, 240}) +
       "<figcaption>Every keystroke of the trace in order.</figcaption></figure>\n";
  const double tok = mean(t.tokenize_ms), pre = mean(t.prefill_ms), dec = mean(t.decode_ms);
  const double other = std::max(0.0, mean(t.suggest_ms) - tok - pre - dec);
  o += "<div class=\"row\"><figure><figcaption>Mean time per stage of a suggestion</figcaption>" +
       svg::bars({{"tokenize", tok}, {"prefill", pre}, {"decode steps", dec}, {"other (detokenize, queue)", other}},
                 "ms", {620, 0}) +
       "</figure>\n";
  std::vector<double> comp(t.computed.begin(), t.computed.end());
  o += "<figure><figcaption>Prompt tokens computed per keystroke</figcaption>" +
       svg::bars({{"p50", percentile(comp, 0.5)}, {"p90", percentile(comp, 0.9)}, {"p99", percentile(comp, 0.99)},
                  {"max", percentile(comp, 1.0)}},
                 "tokens", {620, 0}) +
       "</figure></div>\n";
  return o + "</section>\n";
}

}  // namespace

std::string report_html(const ReportInput& in) {
  std::string o =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>laya latency report</title>\n"
      "<style>body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1340px}"
      "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
      "td:first-child,th:first-child{text-align:left}.row{display:flex;flex-wrap:wrap;gap:16px}"
      "figure{margin:8px 0}figcaption{font-size:12px;color:#555}section{border-top:2px solid #eee;margin-top:18px}"
      "</style></head><body>\n";
  o += fmt::format("<h1>Keystroke → suggestion</h1>\n<p>Model <code>{}</code>, {} on {}.<br>Command: <code>{}</code></p>\n",
                   svg::escape(in.model), in.paced ? "events at their recorded pace" : "events back to back",
                   svg::escape(in.machine), svg::escape(in.command));
  if (in.traces.size() > 1) {
    ReportTrace all;
    all.name = "all traces";
    for (const ReportTrace& t : in.traces) {
      auto cat = [](auto& dst, const auto& src) { dst.insert(dst.end(), src.begin(), src.end()); };
      cat(all.suggest_ms, t.suggest_ms), cat(all.first_token_ms, t.first_token_ms), cat(all.computed, t.computed);
      cat(all.free_keystroke, t.free_keystroke), cat(all.tokenize_ms, t.tokenize_ms);
      cat(all.prefill_ms, t.prefill_ms), cat(all.decode_ms, t.decode_ms), cat(all.peer_suggest_ms, t.peer_suggest_ms);
    }
    o += section(all, in.peer_name);
  }
  for (const ReportTrace& t : in.traces) o += section(t, in.peer_name);
  return o + "</body></html>\n";
}

}  // namespace laya::cli
