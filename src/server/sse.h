// What the HTTP endpoints write: compact JSON, and server-sent events as
// OpenAI's streaming endpoints send them ("data: <json>\n\n" per chunk,
// "data: [DONE]\n\n" at the end), for /v1/completions and /v1/chat/completions.
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace laya::server {

// Compact; a string that is not valid UTF-8 (a model's partial character)
// is written with U+FFFD instead of throwing.
inline std::string dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// One event; false once the client has gone (the caller stops generating).
inline bool sse_send(httplib::DataSink& sink, const nlohmann::json& j) {
  const std::string line = "data: " + dump(j) + "\n\n";
  return sink.is_writable() && sink.write(line.data(), line.size());
}

// The closing "data: [DONE]" and the end of the stream.
inline void sse_done(httplib::DataSink& sink) {
  static constexpr std::string_view kDone = "data: [DONE]\n\n";
  if (sink.is_writable()) sink.write(kDone.data(), kDone.size());
  sink.done();
}

}  // namespace laya::server
