// The sessions of a server: which document a request is about, and one
// suggestion for it on that document's Session.
//
// HTTP clients do not say which document they type in. llama.vim and
// llama.vscode send the text around the cursor on every keystroke (and both
// send "id_slot": 0 for every file, so the slot id cannot tell files apart:
// routing by it would put every file in one session and recompute each file
// on every switch). So a request goes to the resident session whose text it
// shares the most with: the longest common prefix plus the longest common
// suffix (an edit anywhere in a file keeps both; another file that starts
// with the same licence header shares only the prefix). When the best share is
// under half of the request's text it is another document: a new session, the
// least recently used one without a request in flight making room when
// --max-sessions are resident (its KV blocks stay cached in the pool, keyed by
// content, until the pool needs them).
//
// What is compared is the document's own text: the context chunks a plugin
// puts in front of it (llama.vim's ring of chunks from other buffers, which
// changes as the user moves between files) are left out, or every change of
// that ring would look like another document (measured with
// bench/plugin_stream.py: 89 of 234 llama.vim requests made a new session).
// A session is also compared as if its last suggestion had been accepted,
// because the plugins ask ahead for exactly that text (llama.vim's request
// "as if the completion was already inserted"): such a look-ahead goes to the
// session that made the suggestion, whose tokens it already holds, even when
// the suggestion is longer than the rest of a short buffer.
//
// Routing is per owner (RequestFrom::owner: the API key a request used and
// the client's address): a request is only ever compared with, routed to, or
// allowed to supersede the documents of its own owner, so two users typing
// near-identical files never share or cancel a session. A client may also name
// its session ("session": "name"), which is then used for that name (and
// owner) alone.
//
// The chosen session is brought to the request's text with one edit (the
// bytes between the common prefix and suffix) and a cursor move, so the
// session's incremental tokenizer and KV cache keep everything before the
// edit, exactly as for a keystroke in the editor.
//
// The suggestions run on the one serving core, a SuggestScheduler (the one
// LSP, replay and type use), without preempting other sessions: newest wins
// per session — a request on a session where another is running cancels it
// (that one returns with `superseded`), and an older request still waiting
// returns at once, superseded, with no work — and the sessions' requests take
// turns in the order they came (llama.vim's background requests that fill the
// cache must not cancel the suggestion at the cursor). Cancellation is the
// session's own (Session::cancel_epoch): bringing it to a newer text cancels
// what ran on the older one.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "session/model_slot.h"
#include "session/scheduler.h"
#include "session/session.h"
#include "tokenizer/tokenizer.h"

namespace laya::server {

struct ServedSuggestion {
  Suggestion suggestion;
  bool superseded = false;       // a newer request on the same session took over
  bool stopped = false;          // on_piece asked to stop (a stop string, the client went away)
  size_t session_index = 0;      // stable id of the session (for "id_slot" in responses and /metrics)
  bool new_session = false;      // this request made it
};

struct ServerSessionStats {
  int64_t requests = 0, routed_existing = 0, created = 0, evicted = 0, superseded = 0;
  int64_t routed_ahead = 0;  // of routed_existing: matched as the session's text with its suggestion accepted
  size_t resident = 0;
};

// Who a request comes from and which part of its text is the document's own.
struct RequestFrom {
  std::string owner;                // the identity routing keeps apart (see the top)
  std::optional<std::string> name;  // a named session ("session"), of this owner
  size_t context_bytes = 0;         // the text's first bytes are context chunks, not the document
  // Another completion of the text just answered (n_cmpl > 1): the suggestion
  // a look-ahead is matched against stays the first completion's.
  bool alternative = false;
};

class ServerSessions {
 public:
  struct Options {
    SessionOptions session;
    size_t max_sessions = 64;
  };
  // Sessions on `slot`: a hot swap (ModelSlot::swap_model, POST /admin/model)
  // moves each to the new model at its next request.
  ServerSessions(ModelSlot& slot, const Options& opt);
  ~ServerSessions();

  // One suggestion for `text` with the cursor at byte `cursor` (valid UTF-8,
  // cursor on a character boundary, context_bytes <= cursor; else
  // kInvalidArgument). on_piece is called with each piece; returning false
  // stops the suggestion (what exists is returned with `stopped`).
  Result<ServedSuggestion> suggest(const RequestFrom& from, std::string_view text, size_t cursor,
                                   const SuggestOptions& opt,
                                   const std::function<bool(std::string_view piece)>& on_piece = {});

  ServerSessionStats stats() const;
  ModelSlot& slot() { return slot_; }
  // The model serving now (hold it for the whole request: a swap may replace it meanwhile).
  std::shared_ptr<const ModelBundle> model() const { return slot_.current(); }

 private:
  struct Entry;
  std::shared_ptr<Entry> route(const RequestFrom& from, std::string_view text, bool* created);
  // The share of `text` (the document's own part) with entry e's (see the top).
  static size_t share(const Entry& e, std::string_view own, bool* ahead);
  void evict_for_room();
  // Brings `s` to `text` with the cursor at byte `cursor`: one edit and a move.
  static Status bring_to(Session& s, std::string_view text, size_t cursor);

  ModelSlot& slot_;
  Options opt_;
  mutable std::mutex mu_;  // entries_, each entry's doc, the stats
  std::vector<std::shared_ptr<Entry>> entries_;
  SuggestScheduler scheduler_;  // after entries_: destroyed first (it holds no session then)
  uint64_t clock_ = 0;
  size_t next_index_ = 0;
  ServerSessionStats stats_;
};

// Bytes of the longest common prefix / suffix of a and b that end on UTF-8
// character boundaries (the suffix never overlaps the prefix in either string).
size_t common_prefix_bytes(std::string_view a, std::string_view b);
size_t common_suffix_bytes(std::string_view a, std::string_view b, size_t prefix);

}  // namespace laya::server
