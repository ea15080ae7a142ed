#include "core/json.h"

#include <cmath>
#include <fmt/format.h>

#include "core/utf8.h"

namespace laya {

namespace {

// nlohmann's message without its "[json.exception.parse_error.101] parse
// error at line 1, column 42: " prefix (the byte is given separately), and
// with the bytes it quotes from the input ("last read: ...") escaped when
// they are control codes or not UTF-8: the message stays one readable line.
std::string library_detail(const char* what) {
  std::string_view m(what);
  if (m.starts_with("[json.exception.")) {
    const size_t close = m.find("] ");
    if (close != std::string_view::npos) m.remove_prefix(close + 2);
  }
  if (m.starts_with("parse error")) {
    const size_t colon = m.find(": ");
    if (colon != std::string_view::npos) m.remove_prefix(colon + 2);
  }
  std::string out;
  for (size_t i = 0; i < m.size() && out.size() < 240;) {  // "last read" may be a 10 MB string
    const unsigned char c = static_cast<unsigned char>(m[i]);
    size_t len = utf8::sequence_length(c);
    bool ok = len > 0 && i + len <= m.size() && c >= 0x20 && c != 0x7F;
    for (size_t k = 1; ok && k < len; ++k) ok = utf8::is_continuation(static_cast<unsigned char>(m[i + k]));
    if (!ok) {
      out += fmt::format("\\x{:02X}", c);
      ++i;
      continue;
    }
    out.append(m.substr(i, len));
    i += len;
    if (out.size() >= 240 && i < m.size()) out += "\xE2\x80\xA6";
  }
  return out;
}

}  // namespace

Result<nlohmann::json> parse_json(std::string_view text, const std::string& what) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    return Status(StatusCode::kCorrupt, fmt::format("{}: malformed JSON at byte {}: {}", what, e.byte, library_detail(e.what())));
  } catch (const nlohmann::json::exception& e) {
    return Status(StatusCode::kCorrupt, fmt::format("{}: invalid JSON: {}", what, library_detail(e.what())));
  }
}

Status check_json_bounds(std::string_view text, const std::string& what, const JsonBounds& bounds) {
  size_t depth = 0, values = 1;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped byte cannot end the string
      else if (c == '"') in_string = false;
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '[':
      case '{':
        if (++depth > bounds.max_depth)
          return Status(StatusCode::kInvalidArgument,
                        fmt::format("{}: JSON nested deeper than {} levels at byte {}", what, bounds.max_depth, i));
        ++values;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      case ',': ++values; break;
      default: break;
    }
    if (values > bounds.max_values)
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("{}: more than {} JSON values (arrays, objects and their items) at byte {}", what,
                                bounds.max_values, i));
  }
  return Status::Ok();
}

Result<nlohmann::json> parse_json(std::string_view text, const std::string& what, const JsonBounds& bounds) {
  LAYA_TRY(check_json_bounds(text, what, bounds));
  return parse_json(text, what);
}

const char* json_type_name(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::boolean: return "boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "integer";
    case nlohmann::json::value_t::number_float: return "float";
    case nlohmann::json::value_t::string: return "string";
    case nlohmann::json::value_t::array: return "array";
    case nlohmann::json::value_t::object: return "object";
    default: return "binary";
  }
}

namespace {

Status corrupt(std::string_view where, const std::string& what) {
  return Status(StatusCode::kCorrupt, fmt::format("{}: {}", where, what));
}

// The field, nullptr when absent, or an error when `obj` is no object.
Result<const nlohmann::json*> find(const nlohmann::json& obj, std::string_view key, std::string_view where) {
  if (!obj.is_object()) return corrupt(where, fmt::format("expected a JSON object, got {}", json_type_name(obj)));
  auto it = obj.find(std::string(key));
  return it == obj.end() ? nullptr : &*it;
}

Status wrong_type(std::string_view where, std::string_view key, const nlohmann::json& v, const char* expected) {
  return corrupt(where, fmt::format("field \"{}\" is {}, expected {}", key, json_type_name(v), expected));
}

Result<int64_t> int_value(const nlohmann::json& v, std::string_view key, std::string_view where, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) return wrong_type(where, key, v, "an integer");
  // Unsigned values past INT64_MAX are shown as themselves, not wrapped (-1).
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    return corrupt(where, fmt::format("field \"{}\" is {}, expected an integer in [{}, {}]", key, v.get<uint64_t>(), lo, hi));
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) return corrupt(where, fmt::format("field \"{}\" is {}, expected an integer in [{}, {}]", key, x, lo, hi));
  return x;
}

}  // namespace

Result<std::string> json_string(const nlohmann::json& obj, std::string_view key, std::string_view where) {
  LAYA_ASSIGN_OR_RETURN(const nlohmann::json* v, find(obj, key, where));
  if (!v) return corrupt(where, fmt::format("missing field \"{}\"", key));
  if (!v->is_string()) return wrong_type(where, key, *v, "a string");
  return v->get_ref<const std::string&>();
}

Result<int64_t> json_int(const nlohmann::json& obj, std::string_view key, std::string_view where, int64_t lo, int64_t hi) {
  LAYA_ASSIGN_OR_RETURN(const nlohmann::json* v, find(obj, key, where));
  if (!v) return corrupt(where, fmt::format("missing field \"{}\"", key));
  return int_value(*v, key, where, lo, hi);
}

Result<double> json_number(const nlohmann::json& obj, std::string_view key, std::string_view where, double lo, double hi) {
  LAYA_ASSIGN_OR_RETURN(const nlohmann::json* v, find(obj, key, where));
  if (!v) return corrupt(where, fmt::format("missing field \"{}\"", key));
  if (!v->is_number()) return wrong_type(where, key, *v, "a number");
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    return corrupt(where, fmt::format("field \"{}\" is {}, expected a number in [{}, {}]", key, x, lo, hi));
  return x;
}

Result<bool> json_bool(const nlohmann::json& obj, std::string_view key, std::string_view where) {
  LAYA_ASSIGN_OR_RETURN(const nlohmann::json* v, find(obj, key, where));
  if (!v) return corrupt(where, fmt::format("missing field \"{}\"", key));
  if (!v->is_boolean()) return wrong_type(where, key, *v, "a boolean");
  return v->get<bool>();
}

Result<std::optional<std::string>> json_opt_string(const nlohmann::json& obj, std::string_view key, std::string_view where) {
  LAYA_ASSIGN_OR_RETURN(const nlohmann::json* v, find(obj, key, where));
  if (!v || v->is_null()) return std::optional<std::string>();
  if (!v->is_string()) return wrong_type(where, key, *v, "a string");
  return std::optional<std::string>(v->get_ref<const std::string&>());
}

Result<std::optional<int64_t>> json_opt_int(const nlohmann::json& obj, std::string_view key, std::string_view where,
                                            int64_t lo, int64_t hi) {
  LAYA_ASSIGN_OR_RETURN(const nlohmann::json* v, find(obj, key, where));
  if (!v || v->is_null()) return std::optional<int64_t>();
  LAYA_ASSIGN_OR_RETURN(int64_t x, int_value(*v, key, where, lo, hi));
  return std::optional<int64_t>(x);
}

}  // namespace laya
