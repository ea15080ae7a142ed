#include "trace.h"

#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/io.h"
#include "core/json.h"
#include "core/sha256.h"

namespace laya::cli {

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

// A typed field, or an error naming it ("field \"n\" is string, expected an integer").
Result<int64_t> int_field(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) return Status(StatusCode::kCorrupt, fmt::format("{}: missing field \"{}\"", where, key));
  if (!it->is_number_integer())
    return Status(StatusCode::kCorrupt, fmt::format("{}: field \"{}\" is {}, expected an integer", where, key, it->type_name()));
  const int64_t v = it->get<int64_t>();
  if (v < 0) return Status(StatusCode::kCorrupt, fmt::format("{}: field \"{}\" is {}, expected >= 0", where, key, v));
  return v;
}

Result<std::string> str_field(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) return Status(StatusCode::kCorrupt, fmt::format("{}: missing field \"{}\"", where, key));
  if (!it->is_string())
    return Status(StatusCode::kCorrupt, fmt::format("{}: field \"{}\" is {}, expected a string", where, key, it->type_name()));
  return it->get<std::string>();
}

// One event line; `doc_cp` (the document's length so far) checks the offsets
// and `prev_t` the order in time.
Result<Event> parse_event(const json& j, const std::string& where, size_t* doc_cp, double* prev_t) {
  auto corrupt = [&](const std::string& what) { return Status(StatusCode::kCorrupt, fmt::format("{}: {}", where, what)); };
  Event e;
  auto t = j.find("t_ms");
  if (t == j.end() || !t->is_number())
    return corrupt(t == j.end() ? "missing field \"t_ms\"" : fmt::format("field \"t_ms\" is {}, expected a number", t->type_name()));
  e.t_ms = t->get<double>();
  if (!std::isfinite(e.t_ms) || e.t_ms < *prev_t)
    return corrupt(fmt::format("t_ms {} is before the previous event's {} (t_ms never decreases)", e.t_ms, *prev_t));
  *prev_t = e.t_ms;
  LAYA_ASSIGN_OR_RETURN(std::string op, str_field(j, "op", where));
  LAYA_ASSIGN_OR_RETURN(int64_t pos, int_field(j, "pos", where));
  e.pos = static_cast<size_t>(pos);
  if (e.pos > *doc_cp) return corrupt(fmt::format("pos {} is past the end of the document ({} code points)", pos, *doc_cp));
  if (op == "insert" || op == "accept") {
    e.op = op == "insert" ? Op::kInsert : Op::kAccept;
    LAYA_ASSIGN_OR_RETURN(e.text, str_field(j, "text", where));
    *doc_cp += cp_count(e.text);
  } else if (op == "delete") {
    e.op = Op::kDelete;
    LAYA_ASSIGN_OR_RETURN(int64_t n, int_field(j, "n", where));
    e.n = static_cast<size_t>(n);
    if (e.n > *doc_cp - e.pos)
      return corrupt(fmt::format("delete of {} at {} is past the end of the document ({} code points)", n, pos, *doc_cp));
    *doc_cp -= e.n;
  } else if (op == "move") {
    e.op = Op::kMove;
  } else {
    return corrupt(fmt::format("unknown op '{}'", op));
  }
  return e;
}

}  // namespace

Result<Trace> load_trace(const std::string& path) {
  LAYA_ASSIGN_OR_RETURN(std::string content, read_file(path));
  Trace t;
  t.path = path;
  std::string base = path.substr(path.find_last_of('/') + 1);
  if (base.size() > 6 && base.ends_with(".jsonl")) base.resize(base.size() - 6);
  t.name = base;
  size_t lineno = 0, doc_cp = 0;
  double prev_t = 0;
  bool header = false;
  for (size_t start = 0; start < content.size();) {
    size_t end = content.find('\n', start);
    if (end == std::string::npos) end = content.size();
    const std::string_view line(content.data() + start, end - start);
    start = end + 1;
    ++lineno;
    if (line.empty() || line == "\r") continue;
    const std::string where = fmt::format("{}:{}", path, lineno);
    LAYA_ASSIGN_OR_RETURN(json j, parse_json(line, where));
    if (!j.is_object()) return Status(StatusCode::kCorrupt, fmt::format("{}: not a JSON object", where));
    if (!header) {  // the first line: the header, which carries final_sha256
      if (j.contains("op"))
        return Status(StatusCode::kCorrupt, fmt::format("{}: expected the header line (with \"final_sha256\"), got an event", where));
      LAYA_ASSIGN_OR_RETURN(t.final_sha256, str_field(j, "final_sha256", where));
      if (auto it = j.find("trace"); it != j.end() && it->is_string()) t.name = it->get<std::string>();
      header = true;
      continue;
    }
    LAYA_ASSIGN_OR_RETURN(Event e, parse_event(j, where, &doc_cp, &prev_t));
    e.line = lineno;
    t.events.push_back(std::move(e));
  }
  if (!header) return Status(StatusCode::kCorrupt, fmt::format("{}: empty trace (no header line)", path));
  if (t.events.empty()) return Status(StatusCode::kCorrupt, fmt::format("{}:{}: the trace has a header but no events", path, lineno));
  return t;
}

Result<std::string> final_document(const Trace& t) {
  std::string doc;
  for (const Event& e : t.events) {  // offsets were checked by load_trace
    const size_t b = cp_bytes(doc, e.pos);
    switch (e.op) {
      case Op::kInsert:
      case Op::kAccept: doc.insert(b, e.text); break;
      case Op::kDelete: doc.erase(b, cp_bytes(std::string_view(doc).substr(b), e.n)); break;
      case Op::kMove: break;
    }
  }
  const std::string got = sha256_hex(doc);
  if (got != t.final_sha256)
    return Status(StatusCode::kCorrupt, fmt::format("{}: the rebuilt document's sha256 is {}, the header's final_sha256 {}",
                                                    t.path, got, t.final_sha256));
  return doc;
}

}  // namespace laya::cli
