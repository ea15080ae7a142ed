#include "server/request_log.h"

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "session/session.h"

namespace laya::server {

RequestNote& request_note() {
  thread_local RequestNote note;
  return note;
}

void RequestNote::note(const Suggestion& s, size_t doc, bool created, bool was_superseded) {
  suggestion = true;
  document = doc;
  new_document = created;
  superseded = was_superseded;
  cut_by_deadline = s.cut_by_deadline;
  reused = s.timings.tokens_reused;
  computed = s.timings.tokens_computed;
  generated = static_cast<int64_t>(s.tokens.size());
  passes = s.timings.passes();
  drafted = s.timings.drafted_tokens;
  taken = s.timings.accepted_draft_tokens;
  typed_through = s.typed_through;
}

Result<std::unique_ptr<RequestLog>> RequestLog::open(bool text, const std::string& json_path) {
  std::unique_ptr<RequestLog> log(new RequestLog());
  log->text_ = text;
  if (!json_path.empty()) {
    log->json_ = std::fopen(json_path.c_str(), "a");
    if (!log->json_)
      return Status(StatusCode::kIo, fmt::format("--log-json {}: cannot open for appending: {}", json_path,
                                                 std::strerror(errno)));
  }
  return log;
}

RequestLog::~RequestLog() {
  if (json_) std::fclose(json_);
}

namespace {
const char* outcome_of(int status, const RequestNote& n) {
  if (status >= 400) return status == 409 ? "superseded" : "error";
  if (!n.suggestion) return "ok";
  if (n.superseded) return "superseded";
  return n.cut_by_deadline ? "deadline" : "ok";
}
}  // namespace

void RequestLog::write(const std::string& method, const std::string& path, int status, const std::string& client,
                       const RequestNote& n) {
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - n.start).count();
  const char* outcome = outcome_of(status, n);
  std::lock_guard<std::mutex> lock(mu_);
  if (text_) {
    std::string line = fmt::format("laya serve: {} {} {} {} {:.1f} ms {}", client, method, path, status, ms, outcome);
    if (n.suggestion)
      line += fmt::format(" doc {}{} reused {} computed {} generated {} passes {} drafted {} taken {}", n.document,
                          n.new_document ? " (new)" : "", n.reused, n.computed, n.generated, n.passes, n.drafted,
                          n.taken);
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  if (json_) {
    nlohmann::json j = {{"method", method}, {"path", path}, {"status", status}, {"client", client},
                        {"ms", ms},         {"outcome", outcome}};
    if (n.suggestion) {
      j["document"] = n.document;
      j["new_document"] = n.new_document;
      j["tokens_reused"] = n.reused;
      j["tokens_computed"] = n.computed;
      j["tokens_generated"] = n.generated;
      j["typed_through"] = n.typed_through;
      j["passes"] = n.passes;
      j["drafted_tokens"] = n.drafted;
      j["accepted_draft_tokens"] = n.taken;
    }
    const std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::fprintf(json_, "%s\n", s.c_str());
    std::fflush(json_);
  }
}

}  // namespace laya::server
