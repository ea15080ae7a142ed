#include "server/http_server.h"

#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "core/json.h"
#include "core/utf8.h"
#include "server/http_guard.h"
#include "session/model_slot.h"
#include "tokenizer/tokenizer.h"

namespace laya::server {

using nlohmann::json;

namespace {

// Equal strings in time that depends only on their lengths, so the key cannot
// be found a byte at a time by timing the 401s.
bool constant_time_equal(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

const char* error_type(int code) {
  switch (code) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "invalid_request_error";
    case 403: return "permission_error";
    case 408: return "timeout_error";
    case 409: return "cancelled";
    case 422: return "invalid_model_error";
    case 500: return "server_error";
    case 501: return "not_supported_error";
    case 503: return "unavailable_error";
    default: return "invalid_request_error";
  }
}

}  // namespace

HttpServer::HttpServer(ServerSessions& sessions, const HttpOptions& opt)
    : sessions_(sessions), opt_(opt), svr_(std::make_unique<GuardedServer>(opt.conn, opt.limits.max_body_bytes)) {
  svr_->set_payload_max_length(opt_.limits.max_body_bytes);
  svr_->set_write_timeout(opt_.write_timeout_s, 0);
  // Without TCP_NODELAY a response written in two parts (headers, body) waits
  // for the client's delayed ACK: 40 ms per request on Linux loopback
  // (measured: /infill p50 44 ms client side vs 2.3 ms in the server).
  svr_->set_tcp_nodelay(true);
  routes();
}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::bind() {
  if (opt_.log_requests || !opt_.log_json.empty()) {
    LAYA_ASSIGN_OR_RETURN(log_, RequestLog::open(opt_.log_requests, opt_.log_json));
    svr_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      log_->write(req.method, req.path, res.status, req.remote_addr, request_note());
    });
  }
  if (opt_.port == 0) {
    port_ = svr_->bind_to_any_port(opt_.host);
  } else {
    port_ = svr_->bind_to_port(opt_.host, opt_.port) ? opt_.port : -1;
  }
  if (port_ >= 0) svr_->widen_backlog();
  if (port_ < 0)
    return Status(StatusCode::kIo, fmt::format("cannot listen on {}:{} ({}; is another server on that port, or "
                                               "is the host not an address of this machine?)",
                                               opt_.host, opt_.port, std::strerror(errno)));
  return Status::Ok();
}

Status HttpServer::run() {
  if (!svr_->listen_after_bind())
    return Status(StatusCode::kIo, fmt::format("the listener on {}:{} stopped with an error", opt_.host, port_));
  return Status::Ok();
}

void HttpServer::stop() {
  if (svr_ && svr_->is_running()) svr_->stop();
}

int HttpServer::key_index(const httplib::Request& req) const {
  // OpenAI-style clients send Bearer; some proxies use X-Api-Key.
  constexpr std::string_view kBearer = "Bearer ";
  const std::string h = req.get_header_value("Authorization");
  std::string_view sent;
  if (h.size() >= kBearer.size() && std::string_view(h).substr(0, kBearer.size()) == kBearer)
    sent = std::string_view(h).substr(kBearer.size());
  const std::string x = sent.empty() ? req.get_header_value("X-Api-Key") : std::string();
  if (sent.empty()) sent = x;
  if (sent.empty()) return -1;
  int found = -1;
  for (size_t i = 0; i < opt_.api_keys.size(); ++i)  // every key compared: the time says nothing of which
    if (constant_time_equal(sent, opt_.api_keys[i]) && found < 0) found = static_cast<int>(i);
  return found;
}

RequestFrom HttpServer::request_from(const httplib::Request& req, const std::optional<std::string>& session,
                                     size_t context_bytes) const {
  RequestFrom f;
  f.owner = fmt::format("{}@{}", key_index(req), req.remote_addr);
  f.name = session;
  f.context_bytes = context_bytes;
  return f;
}

void HttpServer::error(httplib::Response& res, int code, const std::string& msg, const char* endpoint) {
  res.status = code;
  res.set_content(json{{"error", {{"code", code}, {"message", msg}, {"type", error_type(code)}}}}.dump(),
                  "application/json");
  metrics_.request(endpoint, code);
}

void HttpServer::ok_json(httplib::Response& res, const std::string& body, const char* endpoint) {
  res.status = 200;
  res.set_content(body, "application/json");
  metrics_.request(endpoint, 200);
}

SessionGauges HttpServer::gauges() const {
  const ServerSessionStats s = sessions_.stats();
  SessionGauges g;
  g.resident = s.resident;
  g.created = s.created;
  g.evicted = s.evicted;
  g.superseded = s.superseded;
  g.routed_existing = s.routed_existing;
  g.routed_ahead = s.routed_ahead;
  g.swaps = sessions_.slot().swaps();
  g.swaps_failed = swaps_failed_.load();
  const GuardCounters& c = svr_->counters();
  g.connections_held = svr_->held();
  g.refused_busy = c.refused_busy.load();
  g.refused_client = c.refused_client.load();
  g.timed_out = c.timed_out.load();
  g.too_large = c.too_large.load();
  g.idle_closed = c.idle_closed.load();
  return g;
}

std::string HttpServer::model_id() const {
  const std::string& p = sessions_.model()->path;
  const size_t slash = p.find_last_of('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

// Hot swap: loads, validates and switches on this request's thread while the
// other connections keep getting suggestions from the old model; a request in
// flight finishes on the model it started on. Refused without --api-key (a
// model path is a file on this machine: not for anyone who can reach the port).
void HttpServer::admin_model(const httplib::Request& req, httplib::Response& res) {
  const char* ep = "/admin/model";
  if (opt_.api_keys.empty())
    return error(res, 403, "/admin/model needs the server to run with --api-key (it loads a file of this machine)", ep);
  auto body = parse_json(req.body, "request body", opt_.limits.json);
  if (!body.ok()) return error(res, 400, body.status().message(), ep);
  auto path = json_string(*body, "model", "request");
  if (!path.ok()) return error(res, 400, path.status().message(), ep);
  const auto t0 = std::chrono::steady_clock::now();
  Status st = sessions_.slot().swap_model(*path);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!st.ok()) {
    ++swaps_failed_;
    return error(res, st.code() == StatusCode::kInvalidArgument || st.code() == StatusCode::kNotFound ? 400 : 422,
                 st.message(), ep);
  }
  ok_json(res, json{{"model", model_id()}, {"path", *path}, {"swap_ms", ms}, {"swaps", sessions_.slot().swaps()}}.dump(),
          ep);
}

void HttpServer::routes() {
  svr_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    request_note() = RequestNote{};
    request_note().start = std::chrono::steady_clock::now();
    const RequestGuard* g = request_guard();
    if (g && g->health_only && req.path != "/health") {
      error(res, 503, fmt::format("server busy: all {} connections (--max-connections) are held; this one was "
                                  "kept for GET /health; retry shortly", opt_.conn.max_connections), "busy");
      res.set_header("Retry-After", "1");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.path == "/health" || authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
    error(res, 401, "missing or wrong API key (send \"Authorization: Bearer KEY\")", "auth");
    return httplib::Server::HandlerResponse::Handled;
  });
  svr_->set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    // Statuses httplib sets itself: 404 (no route), 413 (body past the limit), 400 (bad framing),
    // and a read the guard ended (http_guard.h): it says why.
    if (!res.body.empty()) return;
    if (const RequestGuard* g = request_guard(); g && (g->timed_out || g->body_too_large || g->headers_too_large)) {
      res.set_header("Connection", "close");  // the rest of the request is unread: the guard closes it
      if (g->timed_out)
        return error(res, 408, fmt::format("request not received whole within {} s of its start (--request-timeout)",
                                           opt_.conn.request_timeout_s), "error");
      if (g->headers_too_large)
        return error(res, 431, fmt::format("request line and headers past the limit of {} bytes",
                                           opt_.conn.max_header_bytes), "error");
      return error(res, 413, fmt::format("request body past the limit of {} bytes{}", opt_.limits.max_body_bytes,
                                         req.has_header("Transfer-Encoding") ? " (chunked: stopped reading there)" : ""),
                   "error");
    }
    std::string msg = res.status == 404   ? fmt::format("no endpoint {} {}", req.method, req.path)
                      : res.status == 413 ? fmt::format("request body past the limit of {} bytes",
                                                        opt_.limits.max_body_bytes)
                                          : fmt::format("HTTP {}", res.status);
    error(res, res.status, msg, "error");
  });
  svr_->set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    error(res, 500, "internal error: " + what, "exception");
  });
  svr_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    ok_json(res, R"({"status":"ok"})", "/health");
  });
  svr_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(gauges()), "text/plain; version=0.0.4");
    metrics_.request("/metrics", 200);
  });
  svr_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json m = {{"id", model_id()}, {"object", "model"}, {"created", 0}, {"owned_by", "laya"}};
    ok_json(res, json{{"object", "list"}, {"data", json::array({m})}}.dump(), "/v1/models");
  });
  svr_->Post("/infill", [this](const httplib::Request& q, httplib::Response& r) { infill(q, r); });
  svr_->Post("/v1/completions", [this](const httplib::Request& q, httplib::Response& r) { completions(q, r); });
  svr_->Post("/completions", [this](const httplib::Request& q, httplib::Response& r) { completions(q, r); });
  svr_->Post("/admin/model", [this](const httplib::Request& q, httplib::Response& r) { admin_model(q, r); });
  svr_->Post("/tokenize", [this](const httplib::Request& q, httplib::Response& r) { tokenize(q, r); });
  svr_->Post("/detokenize", [this](const httplib::Request& q, httplib::Response& r) { detokenize(q, r); });
  svr_->Post("/v1/chat/completions", [this](const httplib::Request& q, httplib::Response& r) { chat(q, r); });
}

void HttpServer::tokenize(const httplib::Request& req, httplib::Response& res) {
  auto r = parse_tokenize(req.body, opt_.limits);
  if (!r.ok()) return error(res, 400, r.status().message(), "/tokenize");
  tok::EncodeOptions eo;
  eo.parse_special = r->parse_special;
  eo.add_bos = r->add_special;
  const std::shared_ptr<const ModelBundle> bundle = sessions_.model();
  const tok::Tokenizer& tk = *bundle->tokenizer;
  auto ids = tk.encode(r->content, eo);
  if (!ids.ok()) return error(res, 400, ids.status().message(), "/tokenize");
  json tokens = json::array();
  for (int32_t id : *ids) {
    if (!r->with_pieces) {
      tokens.push_back(id);
      continue;
    }
    const std::string& b = tk.token_bytes(id);
    size_t n = 0, bad = 0;
    // llama.cpp: the piece as a string when it is valid UTF-8, else its bytes.
    if (utf8::count(b, &n, &bad)) {
      tokens.push_back({{"id", id}, {"piece", b}});
    } else {
      json bytes = json::array();
      for (unsigned char c : b) bytes.push_back(c);
      tokens.push_back({{"id", id}, {"piece", bytes}});
    }
  }
  ok_json(res, json{{"tokens", tokens}}.dump(), "/tokenize");
}

void HttpServer::detokenize(const httplib::Request& req, httplib::Response& res) {
  const std::shared_ptr<const ModelBundle> bundle = sessions_.model();
  auto r = parse_detokenize(req.body, opt_.limits, bundle->tokenizer->n_vocab());
  if (!r.ok()) return error(res, 400, r.status().message(), "/detokenize");
  std::string text = bundle->tokenizer->decode(r->tokens);
  // JSON strings hold valid UTF-8 only: a cut character becomes U+FFFD.
  ok_json(res, json{{"content", text}}.dump(-1, ' ', false, json::error_handler_t::replace), "/detokenize");
}

}  // namespace laya::server
