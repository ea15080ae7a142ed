// UTF-8 helpers for code that counts in code points (editors and the typing
// traces do): validation with the offset of the first bad byte, code-point
// counting and stepping. Header-only; strict (no overlongs of two bytes, no
// lead bytes past U+10FFFF).
#pragma once

#include <cstddef>
#include <string_view>

namespace laya::utf8 {

inline bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the sequence a lead byte starts (0: not a lead byte).
inline size_t sequence_length(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return c >= 0xC2 ? 2 : 0;  // C0/C1: overlong
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return c <= 0xF4 ? 4 : 0;
  return 0;
}

// Counts the code points of `s` into *n_cp; false (with the byte offset of the
// first bad sequence in *bad) when `s` is not valid UTF-8.
inline bool count(std::string_view s, size_t* n_cp, size_t* bad) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t len = sequence_length(static_cast<unsigned char>(s[i]));
    bool ok = len > 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) ok = is_continuation(static_cast<unsigned char>(s[i + k]));
    if (!ok) {
      if (bad) *bad = i;
      return false;
    }
    i += len;
    ++n;
  }
  if (n_cp) *n_cp = n;
  return true;
}

// Byte offset of code point `cp` of valid UTF-8 `s` (s.size() when past the end).
inline size_t offset_of(std::string_view s, size_t cp) {
  size_t b = 0;
  for (size_t c = 0; c < cp && b < s.size(); ++c) b += sequence_length(static_cast<unsigned char>(s[b]));
  return b < s.size() ? b : s.size();
}

// Bytes of an incomplete sequence at the end of `s` (0 when it ends complete).
inline size_t incomplete_tail(std::string_view s) {
  size_t i = s.size(), k = 0;
  while (i > 0 && k < 3 && is_continuation(static_cast<unsigned char>(s[i - 1]))) --i, ++k;
  if (i == 0) return 0;
  const size_t len = sequence_length(static_cast<unsigned char>(s[i - 1]));
  return len > k + 1 ? k + 1 : 0;
}

}  // namespace laya::utf8
