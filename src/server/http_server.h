// laya serve: HTTP/1.1 (cpp-httplib, from Debian) over the session layer.
//
//   POST /infill                llama.cpp's fill-in-the-middle endpoint, so llama.vim and
//                               llama.vscode work unchanged (see requests.h for the fields)
//   POST /v1/completions        OpenAI completions (prompt + suffix = FIM), streamed as
//                               server-sent events with "stream": true
//   POST /v1/chat/completions   OpenAI chat, for ChatML and Llama 3 templates (chat.h)
//   GET  /v1/models             the served model
//   POST /tokenize, /detokenize llama.cpp's
//   GET  /health                {"status": "ok"} (no API key needed: load balancers probe it)
//   GET  /metrics               Prometheus text (metrics.h)
//   POST /admin/model           {"model": "path.gguf"}: hot swap (ModelSlot), only with an API key
//
// Safe by default: loopback unless the host says otherwise; with an API key
// every endpoint but /health needs "Authorization: Bearer KEY" (compared in
// constant time); bodies past RequestLimits::max_body_bytes are refused (413)
// before they are read, chunked ones when they reach it; a request must
// arrive whole within --request-timeout, connections are capped in total and
// per client with a reserve for /health, and past a cap the answer is 503 at
// once (http_guard.h); JSON past RequestLimits::json is refused before it is
// parsed; every
// malformed request is a 400 naming the field (requests.h); errors use
// OpenAI's / llama.cpp's shape {"error": {"code", "message", "type"}}.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "server/connection_limits.h"
#include "server/metrics.h"
#include "server/request_log.h"
#include "server/requests.h"
#include "server/server_sessions.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace laya::server {

class GuardedServer;

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8012;  // llama.vim's and llama.vscode's default endpoint; 0: any free port
  // Keys a request must carry (any one of them; none: no key needed). Each
  // key is its own owner of documents (server_sessions.h: routing is per owner).
  std::vector<std::string> api_keys;
  ConnectionLimits conn;  // connections, per client, /health reserve, request deadline (connection_limits.h)
  int write_timeout_s = 30;
  int64_t default_predict = 32;  // tokens when a request gives no (or a negative) n_predict
  RequestLimits limits;
  // The request log (request_log.h): a line per request on stderr, and/or
  // JSON lines appended to this file. Both off by default.
  bool log_requests = false;
  std::string log_json;
  // /infill: keep a suggestion's repeated lines and unfinished last line
  // (off: cut, see cut_repeated_line).
  bool keep_repeated_lines = false;
};

class HttpServer {
 public:
  HttpServer(ServerSessions& sessions, const HttpOptions& opt);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port (kIo naming both and the OS's reason when it cannot).
  Status bind();
  int port() const { return port_; }
  // Serves until stop(); returns kIo if the listener failed.
  Status run();
  void stop();

  const ServerMetrics& metrics() const { return metrics_; }

 private:
  void routes();
  // The index of the API key the request carries (-1: none of them).
  int key_index(const httplib::Request& req) const;
  bool authorized(const httplib::Request& req) const { return opt_.api_keys.empty() || key_index(req) >= 0; }
  // Who the request is from, for routing: its key and its client's address.
  RequestFrom request_from(const httplib::Request& req, const std::optional<std::string>& session,
                           size_t context_bytes = 0) const;
  void infill(const httplib::Request& req, httplib::Response& res);
  void completions(const httplib::Request& req, httplib::Response& res);
  void chat(const httplib::Request& req, httplib::Response& res);
  void tokenize(const httplib::Request& req, httplib::Response& res);
  void detokenize(const httplib::Request& req, httplib::Response& res);
  void error(httplib::Response& res, int code, const std::string& msg, const char* endpoint) ;
  void ok_json(httplib::Response& res, const std::string& body, const char* endpoint);
  SessionGauges gauges() const;
  // The serving model's file name: /v1/models' id and the "model" of responses.
  std::string model_id() const;
  void admin_model(const httplib::Request& req, httplib::Response& res);

  ServerSessions& sessions_;
  HttpOptions opt_;
  std::unique_ptr<GuardedServer> svr_;
  int port_ = -1;
  ServerMetrics metrics_;
  std::unique_ptr<RequestLog> log_;  // null: no request log
  std::atomic<uint64_t> next_id_{1};
  std::atomic<int64_t> swaps_failed_{0};
};

}  // namespace laya::server
