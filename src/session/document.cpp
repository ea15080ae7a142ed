#include "session/document.h"

#include <fmt/format.h>

#include "core/utf8.h"

namespace laya {

namespace {

Status check_utf8(std::string_view s, const char* what, size_t* n_cp) {
  size_t bad = 0;
  if (!utf8::count(s, n_cp, &bad)) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("session {}: the text is not valid UTF-8 (byte {} of {})", what, bad, s.size()));
  }
  return Status::Ok();
}

}  // namespace

Status Document::set_text(std::string_view text, const char* what) {
  size_t n = 0;
  LAYA_TRY(check_utf8(text, what, &n));
  text_.assign(text);
  n_cp_ = cursor_cp_ = n;
  cursor_byte_ = text_.size();
  return Status::Ok();
}

Status Document::check_edit(size_t pos_cp, size_t n_deleted_cp, std::string_view inserted,
                            size_t* n_inserted_cp) const {
  if (pos_cp > n_cp_) {
    return Status(StatusCode::kOutOfRange,
                  fmt::format("session edit at code point {}: the text has {} code points", pos_cp, n_cp_));
  }
  if (n_deleted_cp > n_cp_ - pos_cp) {
    return Status(StatusCode::kOutOfRange,
                  fmt::format("session edit deleting {} code points at {}: the text has {} code points", n_deleted_cp,
                              pos_cp, n_cp_));
  }
  return check_utf8(inserted, "edit", n_inserted_cp);
}

Document::Change Document::apply_edit(size_t pos_cp, size_t n_deleted_cp, std::string_view inserted,
                                      size_t n_inserted_cp) {
  Change c;
  c.begin = byte_of(pos_cp);
  c.end = byte_of(pos_cp + n_deleted_cp);
  c.inserted = inserted.size();
  c.old_cursor = cursor_byte_;
  text_.replace(c.begin, c.end - c.begin, inserted);
  n_cp_ = n_cp_ - n_deleted_cp + n_inserted_cp;
  cursor_cp_ = pos_cp + n_inserted_cp;
  cursor_byte_ = c.begin + inserted.size();
  return c;
}

Status Document::check_move(size_t cursor_cp) const {
  if (cursor_cp > n_cp_) {
    return Status(StatusCode::kOutOfRange,
                  fmt::format("session move to code point {}: the text has {} code points", cursor_cp, n_cp_));
  }
  return Status::Ok();
}

void Document::apply_move(size_t cursor_cp) {
  const size_t b = byte_of(cursor_cp);
  cursor_cp_ = cursor_cp;
  cursor_byte_ = b;
}

size_t Document::byte_of(size_t cp) const {
  size_t b = cursor_byte_, c = cursor_cp_;
  if (cp < c && cp < c - cp) b = c = 0;
  while (c < cp) {
    b += utf8::sequence_length(static_cast<unsigned char>(text_[b]));
    ++c;
  }
  while (c > cp) {
    do --b;
    while (b > 0 && utf8::is_continuation(static_cast<unsigned char>(text_[b])));
    --c;
  }
  return b;
}

size_t Document::count_cp(size_t from_byte, size_t to_byte) const {
  size_t n = 0;
  for (size_t b = from_byte; b < to_byte; ++b) n += !utf8::is_continuation(static_cast<unsigned char>(text_[b]));
  return n;
}

Status Document::cp_range_of_bytes(size_t pos, size_t n, size_t* pos_cp, size_t* n_cp) const {
  if (pos > text_.size() || n > text_.size() - pos) {
    return Status(StatusCode::kOutOfRange,
                  fmt::format("bytes [{}, {}) are outside the text ({} bytes)", pos, pos + n, text_.size()));
  }
  for (const size_t b : {pos, pos + n}) {
    if (b < text_.size() && utf8::is_continuation(static_cast<unsigned char>(text_[b])))
      return Status(StatusCode::kInvalidArgument, fmt::format("byte {} is inside a character (not at its start)", b));
  }
  if (pos >= cursor_byte_) *pos_cp = cursor_cp_ + count_cp(cursor_byte_, pos);
  else if (pos < cursor_byte_ - pos) *pos_cp = count_cp(0, pos);
  else *pos_cp = cursor_cp_ - count_cp(pos, cursor_byte_);
  *n_cp = count_cp(pos, pos + n);
  return Status::Ok();
}

size_t Document::utf16_units(size_t from_byte, size_t to_byte) const {
  size_t n = 0;
  for (size_t b = from_byte; b < to_byte; ++b) {
    const auto c = static_cast<unsigned char>(text_[b]);
    if (!utf8::is_continuation(c)) n += utf8::sequence_length(c) == 4 ? 2 : 1;
  }
  return n;
}

size_t Document::cp_of_utf16(size_t from_cp, size_t units) const {
  size_t cp = from_cp > n_cp_ ? n_cp_ : from_cp;
  size_t b = byte_of(cp);
  while (cp < n_cp_) {
    const size_t len = utf8::sequence_length(static_cast<unsigned char>(text_[b]));
    const size_t u = len == 4 ? 2 : 1;
    if (units < u) break;  // the count ends here, or inside this pair: its start
    units -= u;
    b += len;
    ++cp;
  }
  return cp;
}

}  // namespace laya
