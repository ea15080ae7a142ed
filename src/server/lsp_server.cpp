#include "server/lsp_server.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <fmt/format.h>

#include "core/heap.h"
#include "core/json.h"
#include "core/shown.h"

namespace laya::lsp {

namespace {

using json = nlohmann::json;

constexpr int64_t kMaxUint = INT32_MAX;  // LSP's uinteger: 0 .. 2^31 - 1

// The object at obj[key], with json.h's wording for the errors.
Result<const json*> object_field(const json& obj, std::string_view key, std::string_view where) {
  if (!obj.is_object())
    return Status(StatusCode::kCorrupt, fmt::format("{}: expected a JSON object, got {}", where, json_type_name(obj)));
  const auto it = obj.find(key);
  if (it == obj.end()) return Status(StatusCode::kCorrupt, fmt::format("{}: missing field \"{}\"", where, key));
  if (!it->is_object())
    return Status(StatusCode::kCorrupt,
                  fmt::format("{}: field \"{}\" is {}, expected an object", where, key, json_type_name(*it)));
  return &*it;
}

// obj[key] when obj is an object holding it, else nullptr (optional fields).
const json* find_field(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

// The id as a map key: its JSON text (1 and "1" are different ids).
std::string id_key(const json& id) { return id.dump(); }

bool blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t'; });
}

json position_json(Position p) { return {{"line", p.line}, {"character", p.character}}; }

}  // namespace

LspServer::LspServer(ModelSlot& slot, const LspOptions& opt, FrameWriter& out) : slot_(slot), opt_(opt), out_(out) {
  // Each live session may grow to a full context of KV: as many as the pool holds.
  if (opt_.max_sessions <= 0) opt_.max_sessions = static_cast<int>(kv_contexts(*slot_.current()));
}

LspServer::~LspServer() {
  // The scheduler (the last member) is destroyed first: it drops and cancels
  // what is in flight, whose replies are still written, and joins its worker
  // before any session goes.
}

void LspServer::log(std::string_view msg) const {
  if (opt_.log) opt_.log(msg);
  else std::fprintf(stderr, "laya lsp: %.*s\n", static_cast<int>(msg.size()), msg.data());
}

const std::string* LspServer::document_text(const std::string& uri) const {
  const auto it = docs_.find(uri);
  return it == docs_.end() ? nullptr : &it->second->text;
}

int LspServer::run(FrameReader& in) {
  while (!exited_) {
    Frame f = in.next();
    if (f.kind == Frame::kEof) break;
    if (f.kind == Frame::kError) {
      reply(rpc_error(nullptr, rpc::kInvalidRequest, f.error));
      continue;
    }
    handle_body(f.body);
    if (f.body.size() >= kGiveBackAfterBytes) {
      f = Frame{};
      heap_give_back();
    }
  }
  // After `exit` the answers in flight are moot: they end now (empty lists).
  // At EOF they are let finish: input piped from a file still gets them.
  if (exited_)
    for (auto& [uri, d] : docs_)
      if (d->session) sched_.cancel_session(*d->session);
  sched_.wait_idle();  // the replies in flight are written before the process ends
  return exit_code();
}

void LspServer::handle_body(std::string_view body) {
  auto msg = parse_json(body, "message", opt_.json);
  if (!msg.ok()) {
    reply(rpc_error(nullptr, rpc::kParseError, msg.status().message()));
    return;
  }
  handle(msg.value());
}

void LspServer::handle(const json& msg) {
  if (!msg.is_object()) {  // LSP sends no batches
    reply(rpc_error(nullptr, rpc::kInvalidRequest,
                    fmt::format("message: expected a JSON-RPC object, got {}", json_type_name(msg))));
    return;
  }
  const json* id = find_field(msg, "id");
  if (id && !id->is_string() && !id->is_number_integer()) {
    reply(rpc_error(nullptr, rpc::kInvalidRequest,
                    fmt::format("message: field \"id\" is {}, expected an integer or a string", json_type_name(*id))));
    return;
  }
  const json reply_id = id ? *id : json(nullptr);
  const json* version = find_field(msg, "jsonrpc");
  if (!version || !version->is_string() || *version != "2.0") {
    reply(rpc_error(reply_id, rpc::kInvalidRequest, "message: field \"jsonrpc\" must be \"2.0\""));
    return;
  }
  const json* method = find_field(msg, "method");
  if (!method) {
    // A response to a request of ours (we send none): nothing to do.
    if (id && (msg.contains("result") || msg.contains("error"))) return;
    reply(rpc_error(reply_id, rpc::kInvalidRequest, "message: missing field \"method\""));
    return;
  }
  if (!method->is_string()) {
    reply(rpc_error(reply_id, rpc::kInvalidRequest,
                    fmt::format("message: field \"method\" is {}, expected a string", json_type_name(*method))));
    return;
  }
  const json* params = find_field(msg, "params");
  static const json kNoParams = json::object();
  if (params && !params->is_object() && !params->is_array()) {
    if (id) reply(rpc_error(reply_id, rpc::kInvalidParams,
                            fmt::format("params: expected an object or an array, got {}", json_type_name(*params))));
    return;
  }
  const std::string& name = method->get_ref<const std::string&>();
  if (id) request(*id, name, params ? *params : kNoParams);
  else notification(name, params ? *params : kNoParams);
}

void LspServer::request(const json& id, const std::string& method, const json& params) {
  if (method == "initialize") {
    if (initialized_) return reply(rpc_error(id, rpc::kInvalidRequest, "initialize: the server is already initialized"));
    initialized_ = true;
    return reply(rpc_result(id, initialize(params)));
  }
  if (!initialized_)
    return reply(rpc_error(id, rpc::kServerNotInitialized, fmt::format("{}: initialize first", shown(method))));
  if (shutdown_) return reply(rpc_error(id, rpc::kInvalidRequest, fmt::format("{}: the server is shut down", shown(method))));
  if (method == "shutdown") {
    shutdown_ = true;
    for (auto& [uri, d] : docs_)
      if (d->session) sched_.cancel_session(*d->session);
    return reply(rpc_result(id, nullptr));
  }
  if (method == "textDocument/inlineCompletion") return inline_completion(id, params);
  reply(rpc_error(id, rpc::kMethodNotFound, fmt::format("method {} not found", shown(method))));
}

void LspServer::notification(const std::string& method, const json& params) {
  if (method == "exit") {
    exited_ = true;
    return;
  }
  if (!initialized_ || shutdown_) return;  // the spec: dropped before initialize; nothing to change after shutdown
  Status st;
  if (method == "textDocument/didOpen") st = did_open(params);
  else if (method == "textDocument/didChange") st = did_change(params);
  else if (method == "textDocument/didClose") st = did_close(params);
  else if (method == "$/cancelRequest") cancel_request(params);
  // initialized, $/setTrace, workspace/didChangeConfiguration, ...: nothing to do.
  if (!st.ok()) log(fmt::format("{}: {}", method, st.message()));  // a notification has no reply
}

json LspServer::initialize(const json& params) {
  enc_ = PositionEncoding::kUtf16;  // the spec's default, mandatory for every client
  const json* caps = find_field(params, "capabilities");
  const json* general = caps ? find_field(*caps, "general") : nullptr;
  const json* encs = general ? find_field(*general, "positionEncodings") : nullptr;
  if (encs && encs->is_array()) {
    for (const json& e : *encs) {
      if (!e.is_string()) continue;
      if (auto pe = parse_encoding(e.get_ref<const std::string&>())) {
        enc_ = *pe;
        break;
      }
    }
  }
  json sync = {{"openClose", true}, {"change", 2}};  // 2: incremental
  json caps_out = {{"positionEncoding", encoding_name(enc_)},
                   {"textDocumentSync", sync},
                   {"inlineCompletionProvider", true}};
  return {{"capabilities", caps_out}, {"serverInfo", {{"name", "laya"}, {"version", "0.1.0"}}}};
}

Result<LspServer::Document*> LspServer::document(const json& params, std::string_view where) {
  LAYA_ASSIGN_OR_RETURN(const json* td, object_field(params, "textDocument", where));
  LAYA_ASSIGN_OR_RETURN(std::string uri, json_string(*td, "uri", fmt::format("{}.textDocument", where)));
  const auto it = docs_.find(uri);
  if (it == docs_.end())
    return Status(StatusCode::kNotFound,
                  fmt::format("{}.textDocument.uri: {} is not an open document (expected a didOpen first)", where, shown(uri)));
  return it->second.get();
}

Result<Position> LspServer::position(const json& obj, std::string_view key, std::string_view where) {
  LAYA_ASSIGN_OR_RETURN(const json* p, object_field(obj, key, where));
  const std::string w = fmt::format("{}.{}", where, key);
  LAYA_ASSIGN_OR_RETURN(int64_t line, json_int(*p, "line", w, 0, kMaxUint));
  LAYA_ASSIGN_OR_RETURN(int64_t character, json_int(*p, "character", w, 0, kMaxUint));
  return Position{line, character};
}

TextOffset LspServer::offset(Document& d, Position p) {
  d.line_cache = line_start(d.text, p.line, &d.line_cache);
  return offset_of(d.text, p, enc_, &d.line_cache);
}

Status LspServer::did_open(const json& params) {
  LAYA_ASSIGN_OR_RETURN(const json* td, object_field(params, "textDocument", "params"));
  LAYA_ASSIGN_OR_RETURN(std::string uri, json_string(*td, "uri", "params.textDocument"));
  LAYA_ASSIGN_OR_RETURN(std::string text, json_string(*td, "text", "params.textDocument"));
  LAYA_ASSIGN_OR_RETURN(auto version, json_opt_int(*td, "version", "params.textDocument"));
  auto& slot = docs_[uri];
  if (slot) free_session(*slot);  // opened twice: the newer text wins
  slot = std::make_unique<Document>();
  slot->text = std::move(text);
  slot->version = version.value_or(0);
  return Status::Ok();
}

Status LspServer::did_change(const json& params) {
  LAYA_ASSIGN_OR_RETURN(Document * d, document(params, "params"));
  const json* changes = find_field(params, "contentChanges");
  if (!changes || !changes->is_array())
    return Status(StatusCode::kCorrupt, fmt::format("params: field \"contentChanges\" is {}, expected an array",
                                                    changes ? json_type_name(*changes) : "missing"));
  // The suggestion in flight was for the old text: it ends (an empty list).
  if (d->session) sched_.cancel_session(*d->session);
  if (const json* td = find_field(params, "textDocument"); td && td->contains("version")) {
    if (auto v = json_opt_int(*td, "version", "params.textDocument"); v.ok() && v.value()) d->version = *v.value();
  }
  for (size_t i = 0; i < changes->size(); ++i) {
    // A change that cannot be applied stops here: the ones after it were
    // computed against a text we do not have.
    LAYA_TRY(apply_change(*d, (*changes)[i], fmt::format("params.contentChanges[{}]", i)));
  }
  return Status::Ok();
}

Status LspServer::apply_change(Document& d, const json& change, std::string_view where) {
  LAYA_ASSIGN_OR_RETURN(std::string text, json_string(change, "text", where));
  const json* range = find_field(change, "range");
  if (!range) {  // the whole document
    d.text = std::move(text);
    d.line_cache = {};
    if (d.session && !d.session->set_text(d.text).ok()) free_session(d);
    return Status::Ok();
  }
  const std::string rw = fmt::format("{}.range", where);
  LAYA_ASSIGN_OR_RETURN(Position ps, position(*range, "start", rw));
  LAYA_ASSIGN_OR_RETURN(Position pe, position(*range, "end", rw));
  if (pe.line < ps.line || (pe.line == ps.line && pe.character < ps.character))
    return Status(StatusCode::kCorrupt, fmt::format("{}: end {}:{} is before start {}:{}", rw, pe.line, pe.character,
                                                    ps.line, ps.character));
  const TextOffset a = offset(d, ps);
  const TextOffset b = offset_of(d.text, pe, enc_, &d.line_cache);
  // The cached line start stays valid when the edit is after it; at it, a
  // "\n" typed after a "\r" would join two breaks into one.
  if (a.byte < d.line_cache.byte || (a.byte == d.line_cache.byte && a.byte > 0 && d.text[a.byte - 1] == '\r'))
    d.line_cache = {};
  if (d.session) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!d.session->edit(a.cp, b.cp - a.cp, text).ok()) free_session(d);  // made again from the text
    d.edit_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  d.text.replace(a.byte, b.byte - a.byte, text);
  return Status::Ok();
}

Status LspServer::did_close(const json& params) {
  LAYA_ASSIGN_OR_RETURN(const json* td, object_field(params, "textDocument", "params"));
  LAYA_ASSIGN_OR_RETURN(std::string uri, json_string(*td, "uri", "params.textDocument"));
  const auto it = docs_.find(uri);
  if (it == docs_.end())
    return Status(StatusCode::kNotFound, fmt::format("params.textDocument.uri: {} is not an open document", shown(uri)));
  free_session(*it->second);
  docs_.erase(it);
  return Status::Ok();
}

void LspServer::free_session(Document& d) {
  d.holds_kv = false;
  if (!d.session) return;
  sched_.forget(*d.session);  // its request ends (an empty list) and the worker lets go of it
  d.session.reset();
}

Status LspServer::ensure_session(Document& d) {
  d.last_used = ++use_clock_;
  if (!d.session) {
    auto s = std::make_unique<Session>(slot_, opt_.session);
    LAYA_TRY(s->set_text(d.text));
    d.session = std::move(s);
  }
  if (d.holds_kv) return Status::Ok();
  // This document's suggestion will take KV blocks: past the cap, the least
  // recently completed document gives its blocks back. They stay cached in
  // the pool, so switching back to it recomputes only what was evicted since.
  int holding = 0;
  Document* lru = nullptr;
  for (auto& [uri, o] : docs_) {
    if (!o->holds_kv) continue;
    ++holding;
    if (!lru || o->last_used < lru->last_used) lru = o.get();
  }
  if (holding >= opt_.max_sessions && lru) {
    sched_.cancel_session(*lru->session);  // its request in flight ends (an empty list)
    if (Status st = lru->session->release_kv(); !st.ok()) free_session(*lru);  // made again from the text
    lru->holds_kv = false;
  }
  d.holds_kv = true;
  return Status::Ok();
}

void LspServer::cancel_request(const json& params) {
  const json* id = find_field(params, "id");
  if (!id || (!id->is_string() && !id->is_number_integer())) return;
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = inflight_.find(id_key(*id));
    if (it == inflight_.end()) return;  // answered already (or never ours)
    it->second.cancelled = true;
    ticket = it->second.ticket;
  }
  sched_.cancel(ticket);  // not under mu_: a dropped request's on_done runs here and takes mu_
}

void LspServer::inline_completion(const json& id, const json& params) {
  const auto t0 = std::chrono::steady_clock::now();
  auto fail = [&](const Status& st) { reply(rpc_error(id, rpc::kInvalidParams, st.message())); };
  auto d = document(params, "params");
  if (!d.ok()) return fail(d.status());
  auto pos = position(params, "position", "params");
  if (!pos.ok()) return fail(pos.status());
  if (const json* ctx = find_field(params, "context"); ctx && !ctx->is_object())
    return fail(Status(StatusCode::kCorrupt, fmt::format("params: field \"context\" is {}, expected an object",
                                                         json_type_name(*ctx))));
  Document& doc = *d.value();
  const TextOffset at = offset(doc, pos.value());
  if (Status st = ensure_session(doc); !st.ok())
    return reply(rpc_error(id, rpc::kInternalError, st.message()));
  Session& s = *doc.session;
  if (s.cursor() != at.cp) {
    if (Status st = s.move(at.cp); !st.ok()) return reply(rpc_error(id, rpc::kInternalError, st.message()));
  }
  SuggestOptions opt;
  opt.max_tokens = opt_.max_tokens;
  const size_t eol = std::min(doc.text.find_first_of("\r\n", at.byte), doc.text.size());
  opt.single_line = !(opt_.multi_line && blank(std::string_view(doc.text).substr(at.byte, eol - at.byte)));
  // The range is where the text goes: the clamped position, in the client's units.
  const json p = position_json(position_of(doc.text, at.byte, enc_, &doc.line_cache));
  const json range = {{"start", p}, {"end", p}};
  const std::string key = id_key(id);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!inflight_.emplace(key, InFlight{}).second) {
      reply(rpc_error(id, rpc::kInvalidRequest, fmt::format("request id {} is already in flight", key)));
      return;
    }
  }
  SuggestCallbacks cb;
  const double edit_ms = std::exchange(doc.edit_ms, 0.0);
  cb.on_done = [this, key, id, range, t0, edit_ms](const SuggestDone& done) {
    finish_completion(key, id, range, t0, edit_ms, done);
  };
  const uint64_t ticket = sched_.submit(s, opt, std::move(cb));
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = inflight_.find(key); it != inflight_.end()) it->second.ticket = ticket;
}

void LspServer::finish_completion(const std::string& key, const json& id, const json& range,
                                  std::chrono::steady_clock::time_point t0, double edit_ms, const SuggestDone& d) {
  bool cancelled = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = inflight_.find(key);
    if (it == inflight_.end()) return;
    cancelled = it->second.cancelled;
    inflight_.erase(it);
  }
  if (cancelled) return reply(rpc_error(id, rpc::kRequestCancelled, "request cancelled"));
  if (d.outcome == SuggestOutcome::kError) return reply(rpc_error(id, rpc::kInternalError, d.status.message()));
  json items = json::array();
  // kCancelled / kDropped: superseded by a newer request or an edit: nothing to show.
  if (d.outcome == SuggestOutcome::kDone && d.suggestion && !d.suggestion->text.empty())
    items.push_back({{"insertText", d.suggestion->text}, {"range", range}});
  reply(rpc_result(id, {{"items", std::move(items)}}));
  if (opt_.log_timings) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const Suggestion* sg = d.suggestion;
    // reply: from the request read to the reply written (the write may yield
    // the CPU to the client, which then already has it); edit: the document's
    // Session::edit calls since the previous request (in-process, a keystroke
    // costs edit + suggest: what `laya replay` times).
    log(fmt::format("inlineCompletion {}: {} reply {:.3f} ms, edit {:.3f} ms, suggest {:.3f} ms, {} tokens computed",
                    id.dump(), to_string(d.outcome), ms, edit_ms, sg ? sg->timings.total_ms : 0.0,
                    sg ? sg->timings.tokens_computed : 0));
  }
}

}  // namespace laya::lsp
