// The latency report: one self-contained HTML file (inline SVG from
// svg_plot.h, inline CSS, no script, nothing fetched from the network) with,
// per trace and overall, the keystroke -> suggestion histogram and CDF (log
// scale, llama-server's on the same axes when given), the timeline of every
// keystroke with the free (typed-through) ones marked, the mean time per
// stage, and the tokens computed per keystroke.
#pragma once

#include <string>
#include <vector>

namespace laya::cli {

struct ReportTrace {
  std::string name;
  std::vector<double> suggest_ms, first_token_ms;
  std::vector<long long> computed;
  std::vector<bool> free_keystroke;
  // Per event, the stages of the suggestion (Session timings).
  std::vector<double> tokenize_ms, prefill_ms, decode_ms;
  std::vector<double> peer_suggest_ms;  // llama-server's, same trace (empty: not run)
};

struct ReportInput {
  std::string model, command, machine;
  bool paced = false;
  std::string peer_name = "llama-server";
  std::vector<ReportTrace> traces;  // an "overall" section is made from all of them
};

std::string report_html(const ReportInput& in);

}  // namespace laya::cli
