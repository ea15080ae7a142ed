// laya serve's request log, off by default: with -v a line per request on
// stderr; with --log-json FILE a JSON object per line, appended. Each says
// the route, the status, the client, the document (the session serving it,
// and whether this request made it), prompt tokens reused and computed,
// tokens generated, forward passes and drafted / taken tokens, the time from
// the request's routing to its answer, and the outcome. Enough to see from
// a plugin's traffic what each keystroke cost and why.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "core/status.h"

namespace laya {
struct Suggestion;
}

namespace laya::server {

// What a handler learned about the request this HTTP thread serves
// (request_note(): one per thread, reset as each request is routed).
struct RequestNote {
  std::chrono::steady_clock::time_point start;
  bool suggestion = false;  // a suggestion ran (the fields below are set)
  size_t document = 0;
  bool new_document = false, superseded = false, cut_by_deadline = false;
  int64_t reused = 0, computed = 0, generated = 0, passes = 0, drafted = 0, taken = 0, typed_through = 0;
  void note(const Suggestion& s, size_t doc, bool created, bool was_superseded);
};
RequestNote& request_note();

class RequestLog {
 public:
  // text: lines on stderr; json_path: JSON lines appended there (empty:
  // none). kIo naming the file when it cannot be opened.
  static Result<std::unique_ptr<RequestLog>> open(bool text, const std::string& json_path);
  ~RequestLog();
  RequestLog(const RequestLog&) = delete;
  RequestLog& operator=(const RequestLog&) = delete;

  // One request, answered with `status`; the note is this thread's.
  void write(const std::string& method, const std::string& path, int status, const std::string& client,
             const RequestNote& note);

 private:
  RequestLog() = default;
  bool text_ = false;
  std::FILE* json_ = nullptr;
  std::mutex mu_;
};

}  // namespace laya::server
