#include "player/typing_accept.h"

#include <utf8proc.h>

namespace laya::player {

std::u32string utf8_to_u32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  utf8proc_ssize_t n = static_cast<utf8proc_ssize_t>(s.size());
  while (n > 0) {
    utf8proc_int32_t cp = 0;
    utf8proc_ssize_t k = utf8proc_iterate(p, n, &cp);
    if (k <= 0) {  // invalid byte: U+FFFD, skip one byte
      cp = 0xFFFD;
      k = 1;
    }
    out.push_back(static_cast<char32_t>(cp));
    p += k;
    n -= k;
  }
  return out;
}

bool is_word_char(char32_t c) {
  if (c < 128) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC:
      return true;
    default:
      return false;
  }
}

bool is_ideograph(char32_t c) {
  return (c >= 0x3040 && c <= 0x309F) ||    // Hiragana
         (c >= 0x3400 && c <= 0x4DBF) ||    // CJK Unified Ideographs Extension A
         (c >= 0x4E00 && c <= 0x9FFF) ||    // CJK Unified Ideographs
         (c >= 0xF900 && c <= 0xFAFF) ||    // CJK Compatibility Ideographs
         (c >= 0x20000 && c <= 0x3FFFF);    // planes 2 and 3: extensions B onwards
}

int64_t accept_length(const std::u32string& sug, const char32_t* rest, int64_t n_rest) {
  int64_t lcp = 0;
  const int64_t ns = static_cast<int64_t>(sug.size());
  while (lcp < ns && lcp < n_rest && sug[lcp] == rest[lcp]) ++lcp;
  for (int64_t k = lcp; k > 0; --k) {
    const char32_t a = sug[k - 1];
    if (k == ns || !is_word_char(a) || !is_word_char(sug[k]) || is_ideograph(a) || is_ideograph(sug[k])) return k;
  }
  return 0;
}

}  // namespace laya::player
