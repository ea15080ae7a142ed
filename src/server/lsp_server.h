// LspServer: `laya lsp`, a language server whose one feature is LSP 3.18
// inline completion (ghost text), made by the session layer.
//
// Messages (the reader thread calls handle() for each, in order):
//   initialize        capabilities: textDocumentSync {openClose, change: 2
//                     (incremental)}, inlineCompletionProvider, and the
//                     positionEncoding: the first of the client's
//                     general.positionEncodings that is utf-8, utf-16 or
//                     utf-32 (the client lists them by preference), else utf-16.
//   didOpen/didChange/didClose
//                     the server keeps each open document's text (the truth)
//                     and, once a completion was asked for it, a Session fed
//                     with every range edit as one Session::edit (its
//                     incremental tokenizer sees a keystroke as a keystroke).
//   textDocument/inlineCompletion
//                     the session's cursor moves to the position and the
//                     suggestion is submitted to the SuggestScheduler: the
//                     reader never waits for a suggestion. The reply, written
//                     by the worker, is an InlineCompletionList of at most one
//                     item {insertText, range: the position to itself}.
//                     Single-line unless LspOptions::multi_line is set and the
//                     rest of the cursor's line is blank (what ghost-text
//                     editors show well: a mid-line suggestion that spilled
//                     onto new lines would push the line's tail down).
//                     context.selectedCompletionInfo is not used: an item
//                     that does not extend the selected completion is simply
//                     not shown by the editor.
//   $/cancelRequest   the request ends with -32800 RequestCancelled.
//   shutdown, exit    exit code 0 after shutdown, 1 otherwise (and at EOF
//                     without shutdown).
// A newer completion request, or an edit of the document, supersedes one in
// flight: it ends with an empty list (a valid "nothing to show"), never a
// hang. Unknown requests: -32601; unknown notifications: ignored; requests
// before initialize: -32002; after shutdown: -32600.
//
// Threads: handle() and run() on one reader thread; replies also come from
// the scheduler's worker. Replies go through FrameWriter (one mutex).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/json.h"
#include "core/status.h"
#include "server/jsonrpc_stream.h"
#include "server/utf16.h"
#include "session/scheduler.h"
#include "session/session.h"

namespace laya::lsp {

struct LspOptions {
  int max_tokens = 8;       // per suggestion (SuggestOptions::max_tokens)
  bool multi_line = false;  // multi-line suggestions where the rest of the cursor's line is blank
  SessionOptions session;
  // Documents whose sessions hold KV at most: beyond it the least recently
  // completed document's session gives its blocks back (Session::release_kv:
  // they stay cached in the pool, and what is still there when the document
  // is used again is adopted, not recomputed). 0: as many full contexts as
  // the KV pool holds.
  int max_sessions = 0;
  // One log line per completion: the time from the request to the reply,
  // and the suggestion's own (to tell the server's overhead from the model's).
  bool log_timings = false;
  // Depth and value count of a message, checked before it is parsed: a
  // 16 MiB frame of "[[[[..." kept 1.19 GB (issue 29).
  JsonBounds json;
  // Where diagnostics go (stdout is the protocol): stderr when empty. Called
  // on the reader thread, and with log_timings also on the scheduler's worker.
  std::function<void(std::string_view)> log;
};

class LspServer {
 public:
  // `slot` outlives the server (its sessions follow the slot's model across a
  // hot swap); `out` too (replies may be written
  // until the destructor returns).
  LspServer(ModelSlot& slot, const LspOptions& opt, FrameWriter& out);
  ~LspServer();
  LspServer(const LspServer&) = delete;
  LspServer& operator=(const LspServer&) = delete;

  // Reads and handles frames until `exit` or EOF; waits for the replies in
  // flight; returns the process exit code.
  int run(FrameReader& in);
  // One frame's body / one parsed message (the reader thread).
  void handle_body(std::string_view body);
  void handle(const nlohmann::json& msg);

  bool exited() const { return exited_; }
  int exit_code() const { return shutdown_ ? 0 : 1; }
  // Waits until no suggestion is pending or running (its reply written).
  void wait_idle() { sched_.wait_idle(); }
  PositionEncoding encoding() const { return enc_; }
  // The text the server holds for `uri` (tests); nullptr when not open.
  const std::string* document_text(const std::string& uri) const;

 private:
  struct Document {
    std::string text;
    int64_t version = 0;
    std::unique_ptr<Session> session;  // made at the first completion request
    LineStart line_cache;               // a known line start near the cursor: scans start there
    bool holds_kv = false;              // its session may hold KV blocks (it was asked for a suggestion)
    uint64_t last_used = 0;             // for releasing the least recently used document's KV
    double edit_ms = 0;                 // Session::edit time since the last completion request (--timings)
  };
  struct InFlight {
    uint64_t ticket = 0;
    bool cancelled = false;  // $/cancelRequest came: the reply is -32800
  };

  void reply(const nlohmann::json& msg) { out_.write(msg); }
  void log(std::string_view msg) const;
  void request(const nlohmann::json& id, const std::string& method, const nlohmann::json& params);
  void notification(const std::string& method, const nlohmann::json& params);
  nlohmann::json initialize(const nlohmann::json& params);
  Status did_open(const nlohmann::json& params);
  Status did_change(const nlohmann::json& params);
  Status apply_change(Document& d, const nlohmann::json& change, std::string_view where);
  Status did_close(const nlohmann::json& params);
  void cancel_request(const nlohmann::json& params);
  // Replies now (an error) or later (the scheduler's on_done).
  void inline_completion(const nlohmann::json& id, const nlohmann::json& params);
  void finish_completion(const std::string& key, const nlohmann::json& id, const nlohmann::json& range,
                         std::chrono::steady_clock::time_point t0, double edit_ms, const SuggestDone& d);
  Result<Document*> document(const nlohmann::json& params, std::string_view where);
  Result<Position> position(const nlohmann::json& obj, std::string_view key, std::string_view where);
  TextOffset offset(Document& d, Position p);
  Status ensure_session(Document& d);
  void free_session(Document& d);

  ModelSlot& slot_;
  LspOptions opt_;
  FrameWriter& out_;
  PositionEncoding enc_ = PositionEncoding::kUtf16;
  bool initialized_ = false, shutdown_ = false, exited_ = false;
  uint64_t use_clock_ = 0;
  std::map<std::string, std::unique_ptr<Document>> docs_;  // by URI
  std::mutex mu_;                                          // guards inflight_ (reader and worker)
  std::map<std::string, InFlight> inflight_;               // by the request id's JSON text
  SuggestScheduler sched_;  // last: destroyed first, while the documents and inflight_ still exist
};

}  // namespace laya::lsp
