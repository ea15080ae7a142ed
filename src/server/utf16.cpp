#include "server/utf16.h"

#include <algorithm>

#include "core/utf8.h"

namespace laya::lsp {

namespace {

bool is_break(char c) { return c == '\n' || c == '\r'; }

// Code points in bytes [b, e) of valid UTF-8: the bytes that are not continuations.
size_t count_cp(std::string_view text, size_t b, size_t e) {
  size_t n = 0;
  for (size_t i = b; i < e; ++i) n += !utf8::is_continuation(static_cast<unsigned char>(text[i]));
  return n;
}

// The end of the line starting at `b` (the byte of its line break, or the size).
size_t line_end(std::string_view text, size_t b) {
  while (b < text.size() && !is_break(text[b])) ++b;
  return b;
}

}  // namespace

const char* encoding_name(PositionEncoding e) {
  switch (e) {
    case PositionEncoding::kUtf8: return "utf-8";
    case PositionEncoding::kUtf16: return "utf-16";
    case PositionEncoding::kUtf32: return "utf-32";
  }
  return "utf-16";
}

std::optional<PositionEncoding> parse_encoding(std::string_view name) {
  if (name == "utf-8") return PositionEncoding::kUtf8;
  if (name == "utf-16") return PositionEncoding::kUtf16;
  if (name == "utf-32") return PositionEncoding::kUtf32;
  return std::nullopt;
}

size_t units_of_lead(unsigned char lead, PositionEncoding enc) {
  const size_t len = std::max<size_t>(1, utf8::sequence_length(lead));
  switch (enc) {
    case PositionEncoding::kUtf8: return len;
    case PositionEncoding::kUtf16: return len == 4 ? 2 : 1;  // past U+FFFF: a surrogate pair
    case PositionEncoding::kUtf32: return 1;
  }
  return 1;
}

size_t units_of(std::string_view s, PositionEncoding enc) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    n += units_of_lead(c, enc);
    i += std::max<size_t>(1, utf8::sequence_length(c));
  }
  return n;
}

LineStart line_start(std::string_view text, int64_t line, const LineStart* from) {
  LineStart at;
  if (from && from->line <= line && from->byte <= text.size()) at = *from;
  while (at.line < line) {
    const size_t e = line_end(text, at.byte);
    if (e >= text.size()) break;  // no more lines: the last line's start
    size_t next = e + 1;
    if (text[e] == '\r' && next < text.size() && text[next] == '\n') ++next;  // "\r\n" is one break
    at.cp += count_cp(text, at.byte, next);
    at.byte = next;
    ++at.line;
  }
  return at;
}

TextOffset offset_of(std::string_view text, Position p, PositionEncoding enc, const LineStart* from) {
  const int64_t line = std::max<int64_t>(0, p.line);
  const LineStart ls = line_start(text, line, from);
  if (ls.line < line) return {text.size(), ls.cp + count_cp(text, ls.byte, text.size())};  // past the last line
  const size_t end = line_end(text, ls.byte);
  TextOffset o{ls.byte, ls.cp};
  size_t want = static_cast<size_t>(std::max<int64_t>(0, p.character));
  while (o.byte < end) {
    const unsigned char c = static_cast<unsigned char>(text[o.byte]);
    const size_t u = units_of_lead(c, enc);
    if (u > want) break;  // `want` falls inside this character: its start
    want -= u;
    o.byte += std::max<size_t>(1, utf8::sequence_length(c));
    ++o.cp;
  }
  o.byte = std::min(o.byte, end);
  return o;
}

Position position_of(std::string_view text, size_t byte, PositionEncoding enc, const LineStart* from) {
  byte = std::min(byte, text.size());
  LineStart at;
  if (from && from->byte <= byte) at = *from;
  for (;;) {
    const size_t e = line_end(text, at.byte);
    if (e >= byte) break;  // `byte` is on this line (at its break at the latest)
    size_t next = e + 1;
    if (text[e] == '\r' && next < text.size() && text[next] == '\n') ++next;
    if (next > byte) break;  // between "\r" and "\n": the end of the line
    at.byte = next;
    ++at.line;
  }
  const size_t e = std::min(byte, line_end(text, at.byte));
  return {at.line, static_cast<int64_t>(units_of(text.substr(at.byte, e - at.byte), enc))};
}

}  // namespace laya::lsp
