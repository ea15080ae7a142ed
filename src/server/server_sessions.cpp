#include "server/server_sessions.h"

#include <algorithm>
#include <condition_variable>

#include <fmt/format.h>

#include "core/utf8.h"

namespace laya::server {

struct ServerSessions::Entry {
  std::unique_ptr<Session> session;
  std::string owner;
  std::optional<std::string> name;
  // Under mu_ (read by route()): the session's text (a copy), where its own
  // part starts, the cursor, and the last suggestion made at that cursor
  // (empty when none, or when a newer request moved the text since).
  std::string doc;
  size_t context_bytes = 0, cursor = 0;
  std::string shown;
  uint64_t version = 0;  // one more per request brought here: a late result does not set `shown`
  uint64_t last_used = 0;
  size_t index = 0;
  int in_flight = 0;                 // requests routed here and not finished (under mu_)
  std::mutex submit;                 // a request's edit and its submit go in together
};

namespace {

// One request's view of the scheduler: the pieces its worker made and the
// end, handed to the request's own thread (which writes to the client: a slow
// client never holds up the worker).
struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> pieces;
  bool done = false;
  SuggestOutcome outcome = SuggestOutcome::kDropped;
  Status status;
  Suggestion suggestion;
};

}  // namespace

size_t common_prefix_bytes(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  // Back to a character boundary: both strings agree on the bytes before i,
  // so a continuation byte at a[i] (or b[i]) means i is inside a character.
  while (i > 0 && ((i < a.size() && utf8::is_continuation(static_cast<unsigned char>(a[i]))) ||
                   (i < b.size() && utf8::is_continuation(static_cast<unsigned char>(b[i])))))
    --i;
  return i;
}

size_t common_suffix_bytes(std::string_view a, std::string_view b, size_t prefix) {
  const size_t n = std::min(a.size(), b.size()) - std::min({prefix, a.size(), b.size()});
  size_t k = 0;
  while (k < n && a[a.size() - 1 - k] == b[b.size() - 1 - k]) ++k;
  // The suffix must start on a lead byte in both.
  while (k > 0 && utf8::is_continuation(static_cast<unsigned char>(a[a.size() - k]))) --k;
  return k;
}

ServerSessions::ServerSessions(ModelSlot& slot, const Options& opt)
    : slot_(slot), opt_(opt), scheduler_(SchedulerOptions{.preempt_other_sessions = false}) {
  opt_.max_sessions = std::max<size_t>(opt_.max_sessions, 1);
}

ServerSessions::~ServerSessions() {
  for (auto& e : entries_) scheduler_.forget(*e->session);
}

ServerSessionStats ServerSessions::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ServerSessionStats s = stats_;
  s.resident = entries_.size();
  return s;
}

void ServerSessions::evict_for_room() {
  while (entries_.size() >= opt_.max_sessions) {
    auto lru = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if ((*it)->in_flight == 0 && (lru == entries_.end() || (*it)->last_used < (*lru)->last_used)) lru = it;
    if (lru == entries_.end()) return;  // every session has a request in flight: go over the cap for now
    scheduler_.forget(*(*lru)->session);  // idle-time work on it, if any, ends first
    entries_.erase(lru);  // the Session is destroyed here: no request holds it
    ++stats_.evicted;
  }
}

namespace {

// Common prefix + suffix of a and b.
size_t affix_bytes(std::string_view a, std::string_view b) {
  const size_t p = common_prefix_bytes(a, b);
  return p + common_suffix_bytes(a, b, p);
}

// The same, where b may also start further into a or a further into b: the
// plugins send at most 256 lines before the cursor, so as the cursor moves
// down lines leave at the top (and a look-ahead drops as many as its
// suggestion adds), which a plain common prefix sees as a different document.
// (llama.vim's first line even gains a "\n" before it once it has a line
// above). The later start is found by the other text's first 64 bytes (or all
// of a shorter one, 8 at least).
size_t aligned_affix_bytes(std::string_view a, std::string_view b) {
  const size_t probe = std::min<size_t>({64, a.size(), b.size()});
  size_t best = affix_bytes(a, b);
  if (2 * best >= b.size() || probe < 8) return best;
  if (const size_t at = a.find(b.substr(0, probe), 1); at != std::string_view::npos)
    best = std::max(best, affix_bytes(a.substr(at), b));
  if (const size_t at = b.find(a.substr(0, probe), 1); at != std::string_view::npos)
    best = std::max(best, affix_bytes(a, b.substr(at)));
  return best;
}

}  // namespace

size_t ServerSessions::share(const Entry& e, std::string_view own, bool* ahead) {
  auto affixes = [&](std::string_view doc) { return aligned_affix_bytes(doc, own); };
  const std::string_view doc = std::string_view(e.doc).substr(e.context_bytes);
  size_t best = affixes(doc);
  *ahead = false;
  if (!e.shown.empty() && best < own.size()) {
    const size_t at = e.cursor - e.context_bytes;
    std::string accepted;
    accepted.reserve(doc.size() + e.shown.size());
    accepted.append(doc.substr(0, at)).append(e.shown).append(doc.substr(at));
    const size_t s = affixes(accepted);
    if (s > best) best = s, *ahead = true;
  }
  return best;
}

std::shared_ptr<ServerSessions::Entry> ServerSessions::route(const RequestFrom& from, std::string_view text,
                                                             bool* created) {
  *created = false;
  std::shared_ptr<Entry> best;
  bool best_ahead = false;
  if (from.name) {
    for (auto& e : entries_)
      if (e->owner == from.owner && e->name == from.name) best = e;
  } else {
    const std::string_view own = text.substr(from.context_bytes);
    size_t best_share = 0;
    for (auto& e : entries_) {
      if (e->name || e->owner != from.owner) continue;
      bool ahead = false;
      const size_t s = share(*e, own, &ahead);
      if (!best || s > best_share) best = e, best_share = s, best_ahead = ahead;
    }
    // Another document when under half of the request's own text is shared
    // (an empty text goes to any unnamed session: nothing to lose).
    if (best && 2 * best_share < own.size()) best.reset();
  }
  if (!best) {
    evict_for_room();
    best = std::make_shared<Entry>();
    best->session = std::make_unique<Session>(slot_, opt_.session);
    best->owner = from.owner;
    best->name = from.name;
    best->index = next_index_++;
    entries_.push_back(best);
    *created = true;
    ++stats_.created;
  } else {
    ++stats_.routed_existing;
    stats_.routed_ahead += best_ahead ? 1 : 0;
  }
  best->last_used = ++clock_;
  ++best->in_flight;
  ++stats_.requests;
  return best;
}

Result<ServedSuggestion> ServerSessions::suggest(const RequestFrom& from, std::string_view text, size_t cursor,
                                                 const SuggestOptions& opt,
                                                 const std::function<bool(std::string_view)>& on_piece) {
  size_t n_cp = 0, bad = 0;
  if (!utf8::count(text, &n_cp, &bad))
    return Status(StatusCode::kInvalidArgument, fmt::format("the text is not valid UTF-8 (byte {})", bad));
  if (cursor > text.size() ||
      (cursor < text.size() && utf8::is_continuation(static_cast<unsigned char>(text[cursor]))))
    return Status(StatusCode::kInvalidArgument, fmt::format("cursor byte {} is not on a character boundary", cursor));
  if (from.context_bytes > cursor)
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("the context ends at byte {}, after the cursor (byte {})", from.context_bytes, cursor));
  std::shared_ptr<Entry> e;
  bool created = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    e = route(from, text, &created);
  }
  // Always give the in-flight count back, however this request ends.
  struct Release {
    ServerSessions* self;
    Entry* e;
    ~Release() {
      std::lock_guard<std::mutex> lock(self->mu_);
      --e->in_flight;
    }
  } release{this, e.get()};
  ServedSuggestion out;
  out.session_index = e->index;
  out.new_session = created;
  auto w = std::make_shared<Waiter>();
  uint64_t ticket = 0, version = 0;
  {
    std::lock_guard<std::mutex> turn(e->submit);
    LAYA_TRY(bring_to(*e->session, text, cursor));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!from.alternative || e->doc != text) {
        e->doc.assign(text);
        e->context_bytes = from.context_bytes;
        e->cursor = cursor;
        e->shown.clear();
        version = ++e->version;
      }
    }
    SuggestCallbacks cb;
    cb.on_piece = [w](uint64_t, std::string_view piece) {
      std::lock_guard<std::mutex> lock(w->mu);
      w->pieces.emplace_back(piece);
      w->cv.notify_one();
    };
    cb.on_done = [w](const SuggestDone& d) {
      std::lock_guard<std::mutex> lock(w->mu);
      w->outcome = d.outcome;
      w->status = d.status;
      if (d.suggestion) w->suggestion = *d.suggestion;
      w->done = true;
      w->cv.notify_one();
    };
    ticket = scheduler_.submit(*e->session, opt, std::move(cb));
  }
  // The pieces go to the client from this thread, as they come.
  std::vector<std::string> batch;
  for (bool done = false; !done;) {
    {
      std::unique_lock<std::mutex> lock(w->mu);
      w->cv.wait(lock, [&] { return w->done || !w->pieces.empty(); });
      batch.swap(w->pieces);
      done = w->done;
    }
    for (const std::string& p : batch) {
      if (!out.stopped && on_piece && !on_piece(p)) {
        out.stopped = true;  // a stop string, or the client went away
        scheduler_.cancel(ticket);
      }
    }
    batch.clear();
  }
  if (w->outcome == SuggestOutcome::kError) return w->status;
  if (w->outcome == SuggestOutcome::kDropped || (w->outcome == SuggestOutcome::kCancelled && !out.stopped)) {
    out.superseded = true;
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.superseded;
    return out;
  }
  out.suggestion = std::move(w->suggestion);
  if (version != 0) {  // (cancelled by its own stop string is still what was shown)
    std::lock_guard<std::mutex> lock(mu_);
    if (e->version == version) e->shown = out.suggestion.text;
  }
  return out;
}

Status ServerSessions::bring_to(Session& s, std::string_view text, size_t cursor) {
  // One edit between the common prefix and suffix, anchored at the cursor.
  // The suffix is taken first and never reaches before the cursor, so a typed
  // character is an insert just before the cursor even when it equals the
  // next one ("ab|b" + "b" is an insert at 2, not at 3): the edit the editor
  // made, which keeps the session's FIM suffix and typing-through reuse
  // intact. Byte offsets: the session converts them (Document).
  const std::string& old = s.text();
  const size_t k = common_suffix_bytes(old, text.substr(cursor), 0);
  const size_t p = common_prefix_bytes(std::string_view(old).substr(0, old.size() - k), text.substr(0, text.size() - k));
  if (old != text) LAYA_TRY(s.edit_bytes(p, old.size() - k - p, text.substr(p, text.size() - k - p)));
  // A request on an unchanged text still makes what ran on it stale (newest
  // wins even for the same text); move_to_byte cancels too.
  return s.move_to_byte(cursor);
}

}  // namespace laya::server
