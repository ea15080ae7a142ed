// What the simulated typist of `laya bench-typing` accepts of a suggestion:
// the common prefix of suggestion and document, cut back to the last word
// boundary. Word boundaries follow UAX #29's default rules where they matter
// here: letters, digits and '_' join into a word, anything else separates,
// and every Han ideograph or Hiragana character is a word by itself (UAX #29
// breaks between them: Chinese and Japanese have no spaces, and an editor's
// "accept word" takes one character there, not a run up to the next comma).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace laya::player {

// UTF-8 to code points; an invalid byte becomes U+FFFD and is skipped.
std::u32string utf8_to_u32(std::string_view s);

// A letter, mark, digit or '_' (what joins into a word).
bool is_word_char(char32_t c);

// Han ideographs (CJK Unified Ideographs and their extensions, compatibility
// ideographs) and Hiragana: a word boundary on both sides.
bool is_ideograph(char32_t c);

// Code points of `sug` the typist accepts at a document whose rest (after
// the cursor) is rest[0, n_rest): the longest common prefix, cut back to the
// last word boundary (or kept whole when it is all of the suggestion).
int64_t accept_length(const std::u32string& sug, const char32_t* rest, int64_t n_rest);

}  // namespace laya::player
