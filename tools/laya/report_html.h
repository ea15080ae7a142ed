// The latency report: one self-contained HTML file (inline SVG from
// svg_plot.h, inline CSS, no script, nothing fetched from the network) with,
// per trace and overall, the keystroke -> suggestion histogram and CDF (log
// scale, llama-server's on the same axes when given), the timeline of every
// keystroke with the free (typed-through) ones marked, the mean time per
// stage, and the tokens computed per keystroke; for `laya bench-typing`, the
// keystroke savings of its simulated user too.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "player/latency_stats.h"

namespace laya::cli {

struct ReportTrace {
  std::string name;
  std::vector<double> suggest_ms, first_token_ms;
  std::vector<long long> computed;
  std::vector<bool> free_keystroke;
  // Per event, the stages of the suggestion (Session timings).
  std::vector<double> tokenize_ms, prefill_ms, decode_ms;
  std::vector<double> peer_suggest_ms;  // llama-server's, same trace (empty: not run)
  // bench-typing's simulated user (chars 0: not measured, as in replay):
  // characters of the text, keystrokes (typed + Tab), suggestions shown and
  // accepted, characters taken with Tab.
  struct Typing {
    int64_t chars = 0, keystrokes = 0, shown = 0, accepted = 0, accepted_chars = 0;
    void add(const Typing& o) {
      chars += o.chars, keystrokes += o.keystrokes, shown += o.shown, accepted += o.accepted;
      accepted_chars += o.accepted_chars;
    }
  } typing;
};

struct ReportInput {
  std::string model, command, machine;
  bool paced = false;
  // What an event is and how they came, when not replay's ("events at their
  // recorded pace" / "events back to back"): bench-typing says its own.
  std::string how;
  std::string peer_name = "llama-server";
  std::vector<ReportTrace> traces;  // an "overall" section is made from all of them
};

std::string report_html(const ReportInput& in);

// One trace's section from what the player measured: its latency samples and,
// when a simulated typist made them (chars > 0), the keystroke figures; no
// peer samples.
ReportTrace report_trace(const player::LatencyStats& s, std::string name);

// "laya replay --fast t.jsonl --html r.html": the command as typed (argv of the subcommand).
std::string command_line(int argc, char** argv);

// "Intel(R) Xeon(R) Processor, 2 cores, 2 threads" from /proc/cpuinfo (threads 0: all cores).
std::string machine_description(int threads);

// The first bytes of every report (an earlier report may be replaced).
inline constexpr std::string_view kReportHtmlHead = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>laya latency report";

// Per trace name, the client-side suggest_ms samples of a
// bench/llamacpp_typing_client.py --json file ("traces": {name: {"samples": {"suggest_ms": [...]}}}).
Result<std::map<std::string, std::vector<double>>> load_peer_samples(const std::string& path);

}  // namespace laya::cli
