#include "report_html.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <thread>

#include <fmt/format.h>

#include "core/io.h"
#include "core/json.h"
#include "player/latency_stats.h"
#include "svg_plot.h"

namespace laya::cli {

using player::percentile;
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

// bench-typing: keystroke savings, acceptance and the keystrokes as bars.
std::string typing_part(const ReportTrace& t) {
  const ReportTrace::Typing& y = t.typing;
  if (y.chars <= 0) return "";
  auto pct = [](int64_t a, int64_t b) { return b > 0 ? 100.0 * static_cast<double>(a) / static_cast<double>(b) : 0.0; };
  int64_t tokens = 0;
  for (long long c : t.computed) tokens += c;
  std::string o = fmt::format(
      "<p class=\"savings\"><b>Keystroke savings {:.1f} %</b>: {} keystrokes (typed or Tab) for {} characters. "
      "{} of {} suggestions shown were accepted ({:.1f} %), {} characters with Tab. "
      "Prompt tokens computed: {:.2f} per keystroke.</p>\n",
      100.0 - pct(y.keystrokes, y.chars), y.keystrokes, y.chars, y.accepted, y.shown, pct(y.accepted, y.shown),
      y.accepted_chars, y.keystrokes > 0 ? static_cast<double>(tokens) / static_cast<double>(y.keystrokes) : 0.0);
  o += "<figure><figcaption>The text typed by hand and with Tab</figcaption>" +
       svg::bars({{"characters in the text", static_cast<double>(y.chars)},
                  {"keystrokes (typed + Tab)", static_cast<double>(y.keystrokes)},
                  {"characters taken with Tab", static_cast<double>(y.accepted_chars)},
                  {"Tab presses", static_cast<double>(y.accepted)}},
                 "", {620, 0}) +
       "</figure>\n";
  return o;
}

std::string section(const ReportTrace& t, const std::string& peer_name) {
  std::string o = fmt::format("<section><h2>{}</h2>\n", svg::escape(t.name));
  o += typing_part(t);
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

std::string command_line(int argc, char** argv) {
  std::string c = "laya";
  for (int i = 0; i < argc; ++i) (c += ' ') += argv[i];
  return c;
}

std::string machine_description(int threads) {
  std::string cpu = "unknown CPU";
  std::ifstream f("/proc/cpuinfo");  // a /proc file reports size 0: read it as a stream
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  const unsigned cores = std::thread::hardware_concurrency();
  return fmt::format("{}, {} cores, {} threads", cpu, cores, threads > 0 ? threads : static_cast<int>(cores));
}

Result<std::map<std::string, std::vector<double>>> load_peer_samples(const std::string& path) {
  LAYA_ASSIGN_OR_RETURN(std::string text, read_file(path, size_t{256} << 20));
  LAYA_ASSIGN_OR_RETURN(nlohmann::json j, parse_json(text, path));
  std::map<std::string, std::vector<double>> out;
  if (!j.is_object() || !j.contains("traces") || !j["traces"].is_object())
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("{}: no \"traces\" object (expected bench/llamacpp_typing_client.py --json output)", path));
  for (const auto& [name, t] : j["traces"].items()) {
    if (!t.is_object() || !t.contains("samples") || !t["samples"].is_object() || !t["samples"].contains("suggest_ms") ||
        !t["samples"]["suggest_ms"].is_array())
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("{}: trace {} has no samples.suggest_ms (run the client of this version)", path, name));
    std::vector<double>& v = out[name];
    for (const auto& x : t["samples"]["suggest_ms"]) {
      if (!x.is_number())
        return Status(StatusCode::kInvalidArgument, fmt::format("{}: trace {}: a sample is not a number", path, name));
      v.push_back(x.get<double>());
    }
  }
  return out;
}

std::string report_html(const ReportInput& in) {
  std::string o = std::string(kReportHtmlHead) + "</title>\n"
      "<style>body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1340px}"
      "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
      "td:first-child,th:first-child{text-align:left}.row{display:flex;flex-wrap:wrap;gap:16px}"
      "figure{margin:8px 0}figcaption{font-size:12px;color:#555}section{border-top:2px solid #eee;margin-top:18px}"
      "</style></head><body>\n";
  const std::string how =
      !in.how.empty() ? in.how : in.paced ? "events at their recorded pace" : "events back to back";
  o += fmt::format("<h1>Keystroke → suggestion</h1>\n<p>Model <code>{}</code>, {} on {}.<br>Command: <code>{}</code></p>\n",
                   svg::escape(in.model), svg::escape(how), svg::escape(in.machine), svg::escape(in.command));
  if (in.traces.size() > 1) {
    ReportTrace all;
    all.name = "all traces";
    for (const ReportTrace& t : in.traces) {
      auto cat = [](auto& dst, const auto& src) { dst.insert(dst.end(), src.begin(), src.end()); };
      cat(all.suggest_ms, t.suggest_ms), cat(all.first_token_ms, t.first_token_ms), cat(all.computed, t.computed);
      cat(all.free_keystroke, t.free_keystroke), cat(all.tokenize_ms, t.tokenize_ms);
      cat(all.prefill_ms, t.prefill_ms), cat(all.decode_ms, t.decode_ms), cat(all.peer_suggest_ms, t.peer_suggest_ms);
      all.typing.add(t.typing);
    }
    o += section(all, in.peer_name);
  }
  for (const ReportTrace& t : in.traces) o += section(t, in.peer_name);
  return o + "</body></html>\n";
}

ReportTrace report_trace(const player::LatencyStats& s, std::string name) {
  ReportTrace t;
  t.name = std::move(name);
  t.suggest_ms = s.suggest_ms;
  t.first_token_ms = s.first_token_ms;
  t.computed.assign(s.computed.begin(), s.computed.end());
  t.free_keystroke = s.free;
  t.tokenize_ms = s.tokenize_ms;
  t.prefill_ms = s.prefill_ms;
  t.decode_ms = s.decode_ms;
  t.typing = {s.chars, s.keystrokes, s.shown, s.accepted, s.accepted_chars};
  return t;
}

}  // namespace laya::cli
