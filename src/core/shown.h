// A value from a file, as an error message shows it: quoted, control bytes
// escaped, and cut to a few dozen characters. A message must stay one
// readable line even when the value is a 10 MB token or a binary blob that a
// hostile or corrupted file put where a name should be. Header-only.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include "core/utf8.h"

namespace laya {

// 'text' for short values; 'first 40 characters…' (N bytes) for longer ones.
// The cut falls on a UTF-8 character boundary; bytes below 0x20, 0x7F and
// invalid UTF-8 are written as \xNN, so the terminal sees no control codes.
inline std::string shown(std::string_view s, size_t max_chars = 40) {
  std::string out = "'";
  size_t chars = 0, i = 0;
  for (; i < s.size() && chars < max_chars; ++chars) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = utf8::sequence_length(c);
    bool ok = len > 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) ok = utf8::is_continuation(static_cast<unsigned char>(s[i + k]));
    if (!ok || c < 0x20 || c == 0x7F || c == '\'' || c == '\\') {
      char buf[8];
      if (ok && (c == '\'' || c == '\\')) std::snprintf(buf, sizeof buf, "\\%c", c);
      else std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
      ++i;
      continue;
    }
    out.append(s.substr(i, len));
    i += len;
  }
  out += '\'';
  if (i < s.size()) out.insert(out.size() - 1, "\xE2\x80\xA6"), out += " (" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace laya
