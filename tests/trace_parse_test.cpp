// Typing traces checked as a whole (tools/laya/player/trace.h, issue 11): every
// malformed trace of the issue is refused with the file, the line and the
// field; a valid one rebuilds its document and matches final_sha256.
#include <gtest/gtest.h>

#include <string>

#include <filesystem>

#include "core/sha256.h"
#include "test_util.h"
#include "player/trace.h"

namespace laya::player {
namespace {

const std::string kZeros(64, '0');

std::string head(const std::string& sha = kZeros) { return "{\"trace\":\"t\",\"final_sha256\":\"" + sha + "\"}\n"; }
const std::string kIns = "{\"t_ms\":5,\"op\":\"insert\",\"pos\":0,\"text\":\"hello\"}\n";

std::string error_of(const std::string& content) {
  auto r = parse_trace(content, "t.jsonl");
  if (!r.ok()) return r.status().message();
  auto d = final_document(r.value());
  return d.ok() ? "" : d.status().message();
}

TEST(TraceParse, ValidTraceRebuildsAndMatchesSha) {
  const std::string body = kIns + "{\"t_ms\":6,\"op\":\"delete\",\"pos\":4,\"n\":1}\n" +
                           "{\"t_ms\":6,\"op\":\"move\",\"pos\":0}\n" +
                           "{\"t_ms\":7.5,\"op\":\"insert\",\"pos\":0,\"text\":\"\xC3\xA9\xE4\xB8\x80\"}\n" +
                           "{\"t_ms\":9,\"op\":\"accept\",\"pos\":6,\"text\":\"!\"}\n";
  const std::string doc = "\xC3\xA9\xE4\xB8\x80hell!";
  auto r = parse_trace("{\"trace\":\"x\",\"events\":5,\"chars\":7,\"final_sha256\":\"" + sha256_hex(doc) + "\"}\n" + body,
                       "dir/x.jsonl");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->name, "x");
  ASSERT_EQ(r->events.size(), 5u);
  EXPECT_EQ(r->events[4].line, 6u);
  auto d = final_document(r.value());
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d.value(), doc);
  // Without a "trace" the file name names it; upper-case hex is fine.
  std::string upper = sha256_hex(doc);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto r2 = parse_trace("{\"final_sha256\":\"" + upper + "\"}\n" + body, "dir/name.jsonl");
  ASSERT_TRUE(r2.ok()) << r2.status().message();
  EXPECT_EQ(r2->name, "name");
  EXPECT_TRUE(final_document(r2.value()).ok());
}

TEST(TraceParse, EveryIssueExampleIsRefusedWithFileAndLine) {
  struct Case {
    std::string content, expect;
  };
  const std::vector<Case> cases = {
      {"", "t.jsonl: empty trace (no header line)"},
      {"\n\n", "t.jsonl: empty trace (no header line)"},
      {head(), "t.jsonl:1: the trace has a header but no events"},
      {head() + kIns + "{\"t_ms\":4,\"op\":\"move\",\"pos\":1}\n", "t.jsonl:3: t_ms 4 is before the previous event's 5"},
      {head() + "{\"t_ms\":\"5\",\"op\":\"move\",\"pos\":0}\n", "t.jsonl:2: field \"t_ms\" is string, expected a number"},
      {head() + "{\"op\":\"move\",\"pos\":0}\n", "t.jsonl:2: missing field \"t_ms\""},
      {head() + "{\"t_ms\":-1,\"op\":\"move\",\"pos\":0}\n", "t.jsonl:2: field \"t_ms\" is -1, expected a number in [0, "},
      {head() + "{\"t_ms\":1e15,\"op\":\"move\",\"pos\":0}\n", "t.jsonl:2: field \"t_ms\" is 1000000000000000, expected a number in [0, "},
      {head() + kIns + "{\"t_ms\":6,\"op\":\"delete\",\"pos\":2,\"n\":\"3\"}\n", "t.jsonl:3: field \"n\" is string, expected an integer"},
      {head() + kIns + "{\"t_ms\":6,\"op\":\"delete\",\"pos\":2,\"n\":null}\n", "t.jsonl:3: field \"n\" is null, expected an integer"},
      {head() + kIns + "{\"t_ms\":6,\"op\":\"delete\",\"pos\":2}\n", "t.jsonl:3: missing field \"n\""},
      {head() + kIns + "{\"t_ms\":6,\"op\":\"delete\",\"pos\":2,\"n\":9223372036854775807}\n",
       "t.jsonl:3: delete of 9223372036854775807 at 2 is past the end of the document (5 code points)"},
      {head() + kIns + "{\"t_ms\":6,\"op\":\"delete\",\"pos\":2,\"n\":0}\n", "t.jsonl:3: field \"n\" is 0, expected >= 1"},
      {head() + kIns + "{\"t_ms\":6,\"op\":\"delete\",\"pos\":2,\"n\":2.0}\n", "t.jsonl:3: field \"n\" is float, expected an integer"},
      {head() + kIns + "{\"t_ms\":6,\"op\":\"move\",\"pos\":18446744073709551615}\n",
       "t.jsonl:3: field \"pos\" is 18446744073709551615, expected an integer"},
      {head() + kIns + "{\"t_ms\":6,\"op\":\"move\",\"pos\":-1}\n", "t.jsonl:3: field \"pos\" is -1, expected an integer in [0, 5]"},
      {head() + kIns + "{\"t_ms\":6,\"op\":\"move\",\"pos\":6}\n", "t.jsonl:3: pos 6 is past the end of the document (5 code points)"},
      {head() + "{\"t_ms\":6,\"op\":\"insert\",\"pos\":0,\"text\":7}\n", "t.jsonl:2: field \"text\" is integer, expected a string"},
      {head() + "{\"t_ms\":6,\"op\":\"insert\",\"pos\":0,\"text\":\"\"}\n", "t.jsonl:2: insert of an empty \"text\""},
      {head() + "{\"t_ms\":6,\"op\":\"insert\",\"pos\":0}\n", "t.jsonl:2: missing field \"text\""},
      {head() + "{\"t_ms\":6,\"op\":\"paste\",\"pos\":0}\n", "t.jsonl:2: unknown op 'paste'"},
      {head() + "{\"t_ms\":6,\"op\":3,\"pos\":0}\n", "t.jsonl:2: field \"op\" is integer, expected a string"},
      {head() + "[1,2]\n", "t.jsonl:2: expected a JSON object, got array"},
      {head() + "{\"t_ms\": \n", "t.jsonl:2: malformed JSON at byte"},
      {head() + "{\"t_ms\":1,\"op\":\"insert\",\"pos\":0,\"text\":\"\xff\"}\n", "t.jsonl:2: malformed JSON"},
      {kIns, "t.jsonl:1: expected the header line"},
      {"{\"trace\":\"t\"}\n" + kIns, "t.jsonl:1: missing field \"final_sha256\""},
      {"{\"final_sha256\":5}\n" + kIns, "t.jsonl:1: field \"final_sha256\" is integer, expected a string"},
      {"{\"final_sha256\":\"00\"}\n" + kIns, "t.jsonl:1: \"final_sha256\" is '00', expected 64 hex digits"},
      {"{\"trace\":\"\",\"final_sha256\":\"" + kZeros + "\"}\n" + kIns, "t.jsonl:1: \"trace\" is empty"},
      {"{\"trace\":[],\"final_sha256\":\"" + kZeros + "\"}\n" + kIns, "t.jsonl:1: field \"trace\" is array, expected a string"},
      {"{\"events\":2,\"final_sha256\":\"" + kZeros + "\"}\n" + kIns, "t.jsonl: the header says \"events\": 2, the file has 1 events"},
      {head() + kIns, "t.jsonl: the rebuilt document's sha256 is"},
      {"{\"chars\":4,\"final_sha256\":\"" + sha256_hex("hello") + "\"}\n" + kIns,
       "t.jsonl: the rebuilt document has 5 code points, the header's \"chars\" 4"},
  };
  for (const Case& c : cases) {
    const std::string got = error_of(c.content);
    EXPECT_NE(got.find(c.expect), std::string::npos) << "trace:\n" << c.content << "\ngot: " << got;
  }
}

TEST(TraceParse, UniqueNames) {
  auto a = parse_trace(head(sha256_hex("hello")) + kIns, "a.jsonl").value();
  auto b = parse_trace(head(sha256_hex("hello")) + kIns, "b.jsonl").value();
  EXPECT_TRUE(check_unique_names({a}).ok());
  const Status st = check_unique_names({a, b});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("a.jsonl and b.jsonl are both trace 't'"), std::string::npos) << st.message();
}

TEST(TraceParse, LargeDocumentWithManyKeystrokesRebuildsQuickly) {
  // One 2 MB paste, then 200,000 keystrokes at its end (50,000 under the
  // sanitizer): linear, not events x document.
  std::string big(2 << 20, 'a'), body = "{\"t_ms\":0,\"op\":\"insert\",\"pos\":0,\"text\":\"" + big + "\"}\n", doc = big;
  for (size_t i = 0; i < test::sanitizer_scaled(200000); ++i) {
    body += "{\"t_ms\":1,\"op\":\"insert\",\"pos\":" + std::to_string(doc.size()) + ",\"text\":\"b\"}\n";
    doc += 'b';
  }
  auto r = parse_trace(head(sha256_hex(doc)) + body, "big.jsonl");
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto d = final_document(r.value());
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->size(), doc.size());
}

// Every public trace passes the whole-file checks (header counts included).
TEST(TraceParse, FixtureTracesLoadAndRebuild) {
  LAYA_REQUIRE_FIXTURES(fx);
  int n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(fx + "/traces")) {
    if (e.path().extension() != ".jsonl") continue;
    auto t = load_trace(e.path().string());
    ASSERT_TRUE(t.ok()) << t.status().message();
    auto d = final_document(t.value());
    EXPECT_TRUE(d.ok()) << d.status().message();
    ++n;
  }
  EXPECT_GE(n, 1);
}

}  // namespace
}  // namespace laya::player
