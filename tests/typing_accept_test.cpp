// bench-typing's acceptance rule (tools/laya/player/typing_accept.h): the common
// prefix of suggestion and document, cut back to the last word boundary;
// every Han ideograph is a word of its own (UAX #29), Latin words are not cut.
#include <gtest/gtest.h>

#include "player/typing_accept.h"

namespace laya::player {
namespace {

int64_t accepted(const std::string& sug, const std::string& rest) {
  const std::u32string r = utf8_to_u32(rest);
  return accept_length(utf8_to_u32(sug), r.data(), static_cast<int64_t>(r.size()));
}

TEST(TypingAccept, LatinWordsAreCutAtTheirBoundary) {
  EXPECT_EQ(accepted(" the meeting", " the meeting notes"), 12);  // all of the suggestion
  EXPECT_EQ(accepted(" the meetings", " the meeting notes"), 5);  // " the ": "meeting" is not a whole word there
  EXPECT_EQ(accepted("def f(x)", "def g(x)"), 4);                 // "def "
  EXPECT_EQ(accepted("abc", "abd"), 0);
  EXPECT_EQ(accepted("", "abc"), 0);
  EXPECT_EQ(accepted("abc", ""), 0);
}

TEST(TypingAccept, EveryIdeographIsAWord) {
  // 下周项目 matches 下周, then differs: two characters taken (a run of Han
  // characters used to count as one word, so nothing was taken).
  EXPECT_EQ(accepted("下周的会议", "下周项目"), 2);
  EXPECT_EQ(accepted("下周项目", "下周项目安排"), 4);
  EXPECT_EQ(accepted("会议，明天", "会议，后天"), 3);  // through the comma
  EXPECT_EQ(accepted("下", "上"), 0);
  // Mixed: a Latin word after Han characters is still kept whole or not at all.
  EXPECT_EQ(accepted("项目ABCD", "项目ABCE"), 2);
  // Hiragana also breaks per character; Katakana runs stay together.
  EXPECT_EQ(accepted("ありがとう", "ありません"), 2);
  EXPECT_EQ(accepted("カタカナ", "カタログ"), 0);
}

TEST(TypingAccept, InvalidUtf8BecomesReplacementCharacters) {
  const std::u32string s = utf8_to_u32(std::string("a\xff" "b", 3));
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[1], U'\uFFFD');
}

}  // namespace
}  // namespace laya::player
