#include "player/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/io.h"
#include "core/json.h"
#include "core/sha256.h"
#include "core/shown.h"
#include "core/utf8.h"

namespace laya::player {

using json = nlohmann::json;

size_t cp_count(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

size_t cp_bytes(std::string_view s, size_t n_cp) {
  size_t i = 0;
  for (size_t k = 0; k < n_cp && i < s.size(); ++k) {
    ++i;
    while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
  }
  return i;
}

namespace {

Status corrupt(const std::string& where, const std::string& what) {
  return Status(StatusCode::kCorrupt, fmt::format("{}: {}", where, what));
}

// One event line; `doc_cp` (the document's length so far) checks the offsets
// and `prev_t` the order in time.
Result<Event> parse_event(const json& j, const std::string& where, size_t* doc_cp, double* prev_t) {
  Event e;
  LAYA_ASSIGN_OR_RETURN(e.t_ms, json_number(j, "t_ms", where, 0.0, kMaxTraceMs));
  if (e.t_ms < *prev_t)
    return corrupt(where, fmt::format("t_ms {} is before the previous event's {} (t_ms never decreases)", e.t_ms, *prev_t));
  *prev_t = e.t_ms;
  LAYA_ASSIGN_OR_RETURN(std::string op, json_string(j, "op", where));
  // pos may equal the length (the end of the document), never pass it.
  auto pos = json_int(j, "pos", where, 0, static_cast<int64_t>(*doc_cp));
  if (!pos.ok()) {
    auto any = json_int(j, "pos", where);  // a type error first; a range error says what the document holds
    if (!any.ok() || any.value() < 0) return pos.status();
    return corrupt(where, fmt::format("pos {} is past the end of the document ({} code points)", any.value(), *doc_cp));
  }
  e.pos = static_cast<size_t>(pos.value());
  if (op == "insert" || op == "accept") {
    e.op = op == "insert" ? Op::kInsert : Op::kAccept;
    LAYA_ASSIGN_OR_RETURN(e.text, json_string(j, "text", where));
    size_t n_cp = 0, bad = 0;
    if (!utf8::count(e.text, &n_cp, &bad))
      return corrupt(where, fmt::format("field \"text\" is not valid UTF-8 (byte {})", bad));
    if (n_cp == 0) return corrupt(where, fmt::format("{} of an empty \"text\" (it changes nothing)", op));
    *doc_cp += n_cp;
  } else if (op == "delete") {
    e.op = Op::kDelete;
    auto n = json_int(j, "n", where, 1, static_cast<int64_t>(*doc_cp - e.pos));
    if (!n.ok()) {
      auto any = json_int(j, "n", where);
      if (!any.ok()) return any.status();
      if (any.value() < 1) return corrupt(where, fmt::format("field \"n\" is {}, expected >= 1 (a delete removes something)", any.value()));
      return corrupt(where, fmt::format("delete of {} at {} is past the end of the document ({} code points)", any.value(),
                                        e.pos, *doc_cp));
    }
    e.n = static_cast<size_t>(n.value());
    *doc_cp -= e.n;
  } else if (op == "move") {
    e.op = Op::kMove;
  } else {
    return corrupt(where, fmt::format("unknown op {} (expected insert, delete, move or accept)", shown(op)));
  }
  return e;
}

// The header line: final_sha256 (64 hex digits), the optional name and counts.
Status parse_header(const json& j, const std::string& where, Trace* t) {
  if (j.contains("op")) return corrupt(where, "expected the header line (with \"final_sha256\"), got an event");
  LAYA_ASSIGN_OR_RETURN(t->final_sha256, json_string(j, "final_sha256", where));
  bool hex = t->final_sha256.size() == 64;
  for (char& c : t->final_sha256) {
    c = static_cast<char>(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
    hex = hex && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  }
  if (!hex) return corrupt(where, fmt::format("\"final_sha256\" is {}, expected 64 hex digits", shown(t->final_sha256)));
  LAYA_ASSIGN_OR_RETURN(std::optional<std::string> name, json_opt_string(j, "trace", where));
  if (name && name->empty()) return corrupt(where, "\"trace\" is empty, expected the trace's name");
  if (name) t->name = *name;
  LAYA_ASSIGN_OR_RETURN(std::optional<int64_t> chars, json_opt_int(j, "chars", where, 0, INT64_MAX));
  t->header_chars = chars.value_or(-1);
  return Status::Ok();
}

}  // namespace

Result<Trace> parse_trace(std::string_view content, const std::string& path) {
  Trace t;
  t.path = path;
  std::string base = path.substr(path.find_last_of('/') + 1);
  if (base.size() > 6 && base.ends_with(".jsonl")) base.resize(base.size() - 6);
  t.name = base;
  size_t lineno = 0, doc_cp = 0;
  double prev_t = 0;
  bool header = false;
  std::optional<int64_t> n_events;
  for (size_t start = 0; start < content.size();) {
    size_t end = content.find('\n', start);
    if (end == std::string_view::npos) end = content.size();
    const std::string_view line = content.substr(start, end - start);
    start = end + 1;
    ++lineno;
    if (line.empty() || line == "\r") continue;
    const std::string where = fmt::format("{}:{}", path, lineno);
    LAYA_ASSIGN_OR_RETURN(json j, parse_json(line, where));
    if (!j.is_object()) return corrupt(where, fmt::format("expected a JSON object, got {}", json_type_name(j)));
    if (!header) {  // the first line: the header, which carries final_sha256
      LAYA_TRY(parse_header(j, where, &t));
      LAYA_ASSIGN_OR_RETURN(n_events, json_opt_int(j, "events", where, 0, INT64_MAX));
      header = true;
      continue;
    }
    LAYA_ASSIGN_OR_RETURN(Event e, parse_event(j, where, &doc_cp, &prev_t));
    e.line = lineno;
    t.events.push_back(std::move(e));
  }
  if (!header) return corrupt(path, "empty trace (no header line)");
  // The name keys the results in JSON output, which must be UTF-8.
  if (!utf8::count(t.name, nullptr, nullptr))
    return corrupt(path, fmt::format("the trace name {} (the file name) is not valid UTF-8: give the header a \"trace\"",
                                     shown(t.name)));
  if (t.events.empty()) return corrupt(fmt::format("{}:{}", path, lineno), "the trace has a header but no events");
  if (n_events && *n_events != static_cast<int64_t>(t.events.size()))
    return corrupt(path, fmt::format("the header says \"events\": {}, the file has {} events", *n_events, t.events.size()));
  return t;
}

Result<Trace> load_trace(const std::string& path) {
  LAYA_ASSIGN_OR_RETURN(std::string content, read_file(path, kMaxTraceBytes));
  return parse_trace(content, path);
}

void cap_pauses(Trace& t, double cap_ms) {
  if (cap_ms <= 0) return;
  double prev_in = 0, prev_out = 0;
  for (Event& e : t.events) {
    const double out = prev_out + std::min(e.t_ms - prev_in, cap_ms);
    prev_in = e.t_ms;
    e.t_ms = prev_out = out;
  }
}

Status check_unique_names(const std::vector<Trace>& traces) {
  for (size_t i = 0; i < traces.size(); ++i)
    for (size_t k = 0; k < i; ++k)
      if (traces[i].name == traces[k].name)
        return Status(StatusCode::kInvalidArgument,
                      fmt::format("{} and {} are both trace {}: results are per trace name (give each trace once)",
                                  traces[k].path, traces[i].path, shown(traces[i].name)));
  return Status::Ok();
}

namespace {

// A code point offset and its byte offset in the document being rebuilt.
// Edits are local (keystrokes next to the last one), so seeking from the last
// edit keeps the rebuild linear in the trace's size rather than events x
// document (a hostile trace of a 10 MB document and a million keystrokes).
struct Cursor {
  size_t cp = 0, b = 0;
};

// `doc` is valid UTF-8 (every text was checked by parse_trace).
size_t seek(std::string_view doc, Cursor* c, size_t pos) {
  if (pos < c->cp && pos < c->cp - pos) *c = Cursor{};  // nearer the start than the cursor
  while (c->cp < pos && c->b < doc.size()) {
    c->b += std::max<size_t>(1, utf8::sequence_length(static_cast<unsigned char>(doc[c->b])));
    ++c->cp;
  }
  while (c->cp > pos) {
    do --c->b;
    while (c->b > 0 && utf8::is_continuation(static_cast<unsigned char>(doc[c->b])));
    --c->cp;
  }
  return c->b;
}

}  // namespace

Result<std::string> final_document(const Trace& t) {
  std::string doc;
  Cursor cur;
  for (const Event& e : t.events) {  // offsets were checked by parse_trace
    if (e.op == Op::kMove) continue;
    const size_t b = seek(doc, &cur, e.pos);
    if (e.op == Op::kDelete) {
      doc.erase(b, cp_bytes(std::string_view(doc).substr(b), e.n));
    } else {
      doc.insert(b, e.text);
      cur = Cursor{e.pos + cp_count(e.text), b + e.text.size()};
    }
  }
  const std::string got = sha256_hex(doc);
  if (got != t.final_sha256)
    return Status(StatusCode::kCorrupt, fmt::format("{}: the rebuilt document's sha256 is {}, the header's final_sha256 {}",
                                                    t.path, got, t.final_sha256));
  if (t.header_chars >= 0 && cp_count(doc) != static_cast<size_t>(t.header_chars))
    return Status(StatusCode::kCorrupt, fmt::format("{}: the rebuilt document has {} code points, the header's \"chars\" {}",
                                                    t.path, cp_count(doc), t.header_chars));
  return doc;
}

}  // namespace laya::player
