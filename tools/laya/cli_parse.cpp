#include "cli_parse.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fmt/format.h>

#include "core/shown.h"

namespace laya::cli {

namespace {

Status invalid(std::string_view what, const std::string& msg) {
  return Status(StatusCode::kInvalidArgument, what.empty() ? msg : fmt::format("{}: {}", what, msg));
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// '-'? digits: the only integer syntax (std::from_chars alone would accept a
// prefix and leave the rest; CLI11 would read "010" as octal and "0x10" as hex).
bool integer_syntax(std::string_view s) {
  size_t i = !s.empty() && s[0] == '-';
  if (i == s.size()) return false;
  for (; i < s.size(); ++i)
    if (!is_digit(s[i])) return false;
  return true;
}

// '-'? digits ('.' digits?)? ([eE] [+-]? digits)?, or '.' digits: decimal
// notation only ("nan", "inf", hex floats and "1e" are not numbers here).
bool real_syntax(std::string_view s) {
  size_t i = !s.empty() && s[0] == '-';
  size_t mantissa = 0;
  while (i < s.size() && is_digit(s[i])) ++i, ++mantissa;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i, ++mantissa;
  }
  if (mantissa == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    size_t exp = 0;
    while (i < s.size() && is_digit(s[i])) ++i, ++exp;
    if (exp == 0) return false;
  }
  return i == s.size();
}

}  // namespace

Result<int64_t> parse_int(std::string_view what, std::string_view s, int64_t lo, int64_t hi) {
  if (s.empty()) return invalid(what, fmt::format("empty value, expected an integer in [{}, {}]", lo, hi));
  if (!integer_syntax(s))
    return invalid(what, fmt::format("{} is not an integer (expected decimal digits in [{}, {}])", shown(s), lo, hi));
  int64_t v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v, 10);
  // The syntax was checked: the only failure left is a value past int64.
  if (r.ec != std::errc() || r.ptr != s.data() + s.size() || v < lo || v > hi)
    return invalid(what, fmt::format("{} is out of range [{}, {}]", shown(s), lo, hi));
  return v;
}

Result<double> parse_real(std::string_view what, std::string_view s, double lo, double hi) {
  if (s.empty()) return invalid(what, fmt::format("empty value, expected a number in [{}, {}]", lo, hi));
  if (!real_syntax(s))
    return invalid(what, fmt::format("{} is not a finite number (expected decimal notation in [{}, {}])", shown(s), lo, hi));
  double v = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v, std::chars_format::general);
  // result_out_of_range: past the double range ("1e999") or an underflow
  // ("1e-999"); either way not the number that was typed.
  if (r.ec != std::errc() || r.ptr != s.data() + s.size() || !std::isfinite(v) || v < lo || v > hi)
    return invalid(what, fmt::format("{} is out of range [{}, {}]", shown(s), lo, hi));
  return v;
}

Result<std::vector<int32_t>> parse_id_list(std::string_view what, std::string_view s, int64_t lo, int64_t hi) {
  // Ids are int32 wherever they go (the tokenizer, the engine, the C API).
  lo = std::max<int64_t>(lo, INT32_MIN);
  hi = std::min<int64_t>(hi, INT32_MAX);
  std::string_view body = trim(s);
  if (!body.empty() && body.front() == '[') {
    if (body.size() < 2 || body.back() != ']')
      return invalid(what, fmt::format("{} starts with '[' but does not end with ']'", shown(s)));
    body = trim(body.substr(1, body.size() - 2));
  }
  if (body.empty()) return invalid(what, fmt::format("{} holds no ids (expected e.g. 1,2,3)", shown(s)));
  std::vector<int32_t> ids;
  size_t item = 0;
  for (size_t i = 0; i <= body.size();) {
    size_t j = body.find(',', i);
    if (j == std::string_view::npos) j = body.size();
    const std::string_view v = trim(body.substr(i, j - i));
    ++item;
    if (v.empty()) return invalid(what, fmt::format("empty item at position {} in {}", item, shown(s)));
    auto r = parse_int("", v, lo, hi);
    if (!r.ok()) {
      // A one-item list reads as the value itself; a longer one says which item.
      const bool single = item == 1 && j == body.size();
      return invalid(what, single ? r.status().message()
                                  : fmt::format("item {} of {}: {}", item, shown(s), r.status().message()));
    }
    ids.push_back(static_cast<int32_t>(r.value()));
    i = j + 1;
  }
  return ids;
}

}  // namespace laya::cli
