// Document: the text a session completes (valid UTF-8) and its cursor.
//
// Callers address it in code points (the trace format's and the C API's
// unit); the tokenizer and the prompt work on bytes. The conversion happens
// here and nowhere else: byte_of() scans from the cursor (or from the start,
// whichever is nearer), so typing at the cursor costs O(1) whatever the
// document's size. LSP clients count UTF-16 code units: utf16_units() and
// cp_of_utf16() convert those.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/status.h"

namespace laya {

class Document {
 public:
  // What an edit replaced, in bytes of the text before it (for the parts
  // that keep incremental state over the text: the prompt's tokenizers).
  struct Change {
    size_t begin = 0;        // first byte replaced
    size_t end = 0;          // one past the last byte replaced (before the edit)
    size_t inserted = 0;     // bytes inserted at `begin`
    size_t old_cursor = 0;   // the cursor's byte before the edit
  };

  // Replaces the whole text; the cursor goes to its end. kInvalidArgument
  // (naming `what`, the caller's operation) when it is not valid UTF-8.
  Status set_text(std::string_view text, const char* what = "set_text");
  // Replaces n_deleted code points at pos by `inserted`; the cursor ends after
  // the inserted text. kOutOfRange / kInvalidArgument (nothing changed) when
  // the range is outside the text or `inserted` is not valid UTF-8. Checked
  // first by check_edit(), so a caller may check, then take a lock, then apply.
  Status check_edit(size_t pos_cp, size_t n_deleted_cp, std::string_view inserted, size_t* n_inserted_cp) const;
  Change apply_edit(size_t pos_cp, size_t n_deleted_cp, std::string_view inserted, size_t n_inserted_cp);
  // kOutOfRange past the end of the text.
  Status check_move(size_t cursor_cp) const;
  void apply_move(size_t cursor_cp);

  const std::string& text() const { return text_; }
  size_t size_cp() const { return n_cp_; }
  size_t cursor_cp() const { return cursor_cp_; }
  size_t cursor_byte() const { return cursor_byte_; }

  // Byte offset of code point cp (<= size_cp()).
  size_t byte_of(size_t cp) const;
  // Code points in text()[from_byte, to_byte) (both at character starts).
  size_t count_cp(size_t from_byte, size_t to_byte) const;
  // Bytes [pos, pos + n) as code points: *pos_cp where it starts, *n_cp how
  // many it spans. kOutOfRange past the end, kInvalidArgument (naming the
  // byte) when either end is inside a character. Counts from the cursor or
  // the start, whichever is nearer (a keystroke at the cursor: O(1)).
  Status cp_range_of_bytes(size_t pos, size_t n, size_t* pos_cp, size_t* n_cp) const;

  // UTF-16 code units of text()[from_byte, to_byte) (a code point above
  // U+FFFF is a surrogate pair: 2 units).
  size_t utf16_units(size_t from_byte, size_t to_byte) const;
  // The code point at `units` UTF-16 units after code point `from_cp`; a
  // count that ends inside a surrogate pair lands at the start of its
  // character, one past the end at the end of the text.
  size_t cp_of_utf16(size_t from_cp, size_t units) const;

 private:
  std::string text_;
  size_t n_cp_ = 0;
  size_t cursor_cp_ = 0, cursor_byte_ = 0;
};

}  // namespace laya
