// The CLI's one number / id-list parser (tools/laya/cli_parse.h) and the
// checked JSON accessors (core/json.h): what they accept, and that every
// refusal names the option (or file and field), the value and what was expected.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cli_parse.h"
#include "core/json.h"

namespace laya::cli {
namespace {

std::string err(const Status& st) { return st.message(); }

TEST(CliParseInt, AcceptsPlainDecimal) {
  EXPECT_EQ(parse_int("-t", "0", 0, 10).value(), 0);
  EXPECT_EQ(parse_int("-t", "10", 0, 10).value(), 10);
  EXPECT_EQ(parse_int("-t", "007", 0, 10).value(), 7);  // decimal, not octal
  EXPECT_EQ(parse_int("-x", "-1", -1, 5).value(), -1);
  EXPECT_EQ(parse_int("-x", "-0", 0, 5).value(), 0);
  EXPECT_EQ(parse_int("-x", "9223372036854775807", INT64_MIN, INT64_MAX).value(), INT64_MAX);
  EXPECT_EQ(parse_int("-x", "-9223372036854775808", INT64_MIN, INT64_MAX).value(), INT64_MIN);
}

TEST(CliParseInt, RefusesWithOptionValueAndRange) {
  EXPECT_EQ(err(parse_int("--ids", "99999999999999999999", 0, INT32_MAX).status()),
            "--ids: '99999999999999999999' is out of range [0, 2147483647]");
  EXPECT_EQ(err(parse_int("-t", "100000", 0, 8).status()), "-t: '100000' is out of range [0, 8]");
  EXPECT_EQ(err(parse_int("-t", "-1", 0, 8).status()), "-t: '-1' is out of range [0, 8]");
  EXPECT_EQ(err(parse_int("-t", "", 0, 8).status()), "-t: empty value, expected an integer in [0, 8]");
  EXPECT_EQ(err(parse_int("", "x", 0, 8).status()), "'x' is not an integer (expected decimal digits in [0, 8])");
  for (const char* bad : {"0x10", "1e3", "1.0", "+5", " 5", "5 ", "-", "--5", "5-", "nan", "inf", "١٢", "1_000", "0b1"}) {
    auto r = parse_int("-n", bad, -100, 100000);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(err(r.status()).find("-n: '"), std::string::npos) << err(r.status());
    EXPECT_NE(err(r.status()).find("is not an integer"), std::string::npos) << err(r.status());
  }
  // Past int64 in either direction: out of range, not wrapped.
  EXPECT_FALSE(parse_int("-x", "9223372036854775808", INT64_MIN, INT64_MAX).ok());
  EXPECT_FALSE(parse_int("-x", "-9223372036854775809", INT64_MIN, INT64_MAX).ok());
  EXPECT_FALSE(parse_int("-x", std::string(5000, '9'), INT64_MIN, INT64_MAX).ok());
}

TEST(CliParseInt, ControlBytesAndLongValuesAreShownEscapedAndCut) {
  const std::string m = err(parse_int("-n", "\x1b[31m\xff", 0, 1).status());
  EXPECT_EQ(m.find('\x1b'), std::string::npos) << m;
  EXPECT_NE(m.find("\\x1B"), std::string::npos) << m;
  EXPECT_NE(m.find("\\xFF"), std::string::npos) << m;
  EXPECT_LT(err(parse_int("-n", std::string(100000, 'a'), 0, 1).status()).size(), 200u);
}

TEST(CliParseReal, AcceptsDecimalNotation) {
  EXPECT_DOUBLE_EQ(parse_real("--temp", "0.7", 0, 10).value(), 0.7);
  EXPECT_DOUBLE_EQ(parse_real("--temp", "1", 0, 10).value(), 1.0);
  EXPECT_DOUBLE_EQ(parse_real("--temp", ".5", 0, 10).value(), 0.5);
  EXPECT_DOUBLE_EQ(parse_real("--temp", "5.", 0, 10).value(), 5.0);
  EXPECT_DOUBLE_EQ(parse_real("--x", "1e3", 0, 1e4).value(), 1000.0);
  EXPECT_DOUBLE_EQ(parse_real("--x", "-2.5E-1", -1, 1).value(), -0.25);
}

TEST(CliParseReal, RefusesNanInfGarbageAndOutOfRange) {
  EXPECT_EQ(err(parse_real("--temp", "nan", 0, 10).status()),
            "--temp: 'nan' is not a finite number (expected decimal notation in [0, 10])");
  for (const char* bad : {"inf", "-inf", "NaN", "infinity", "0x1p3", "1e", "e5", ".", "-", "1.2.3", " 1", "1 ", "", "1,5"}) {
    auto r = parse_real("--temp", bad, 0, 10);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(err(r.status()).find("--temp: "), std::string::npos) << err(r.status());
  }
  EXPECT_EQ(err(parse_real("--top-p", "1.5", 0, 1).status()), "--top-p: '1.5' is out of range [0, 1]");
  EXPECT_FALSE(parse_real("--x", "1e999", -1e308, 1e308).ok());  // overflow, not inf
  EXPECT_FALSE(parse_real("--x", "-1", 0, 1).ok());
}

TEST(CliParseIdList, AcceptsCommaListsAndJsonArrays) {
  EXPECT_EQ(parse_id_list("--ids", "1,2,3").value(), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(parse_id_list("--ids", "7").value(), (std::vector<int32_t>{7}));
  EXPECT_EQ(parse_id_list("--ids", " 1 , 2 ").value(), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(parse_id_list("--ids", "[1, 2,\n3]").value(), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(parse_id_list("--ids", "2147483647").value(), (std::vector<int32_t>{INT32_MAX}));
}

TEST(CliParseIdList, RefusesEmptyItemsAndBadIdsNamingThePosition) {
  EXPECT_EQ(err(parse_id_list("--ids", "1,,2").status()), "--ids: empty item at position 2 in '1,,2'");
  EXPECT_EQ(err(parse_id_list("--ids", "1,2,").status()), "--ids: empty item at position 3 in '1,2,'");
  EXPECT_EQ(err(parse_id_list("--ids", ",1").status()), "--ids: empty item at position 1 in ',1'");
  EXPECT_EQ(err(parse_id_list("--ids", "99999999999999999999").status()),
            "--ids: '99999999999999999999' is out of range [0, 2147483647]");
  EXPECT_EQ(err(parse_id_list("--tokens", "1,x,3").status()),
            "--tokens: item 2 of '1,x,3': 'x' is not an integer (expected decimal digits in [0, 2147483647])");
  EXPECT_EQ(err(parse_id_list("--ids", "1,-5").status()), "--ids: item 2 of '1,-5': '-5' is out of range [0, 2147483647]");
  EXPECT_EQ(err(parse_id_list("--ids", "1,2", 0, 1).status()), "--ids: item 2 of '1,2': '2' is out of range [0, 1]");
  for (const char* bad : {"", " ", "[]", "[ ]", "[1,2", "1 2", "[[1]]", "1;2", "1,2]"}) {
    auto r = parse_id_list("--ids", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(err(r.status()).rfind("--ids: ", 0), 0u) << err(r.status());
  }
  // The range is clipped to int32 whatever the caller asks.
  EXPECT_FALSE(parse_id_list("--ids", "2147483648", 0, INT64_MAX).ok());
}

TEST(CliParseIdList, HugeListsParse) {
  std::string s;
  for (int i = 0; i < 50000; ++i) s += std::to_string(i % 1000) + ",";
  s += "1";
  auto r = parse_id_list("--ids", s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->size(), 50001u);
}

TEST(JsonAccessor, NamesWhereFieldTypeFoundAndExpected) {
  const auto j = parse_json(R"({"s":"x","i":3,"f":3.0,"b":true,"n":null,"big":18446744073709551615,"neg":-4,"a":[1]})",
                            "t.jsonl:3")
                     .value();
  EXPECT_EQ(json_string(j, "s", "t.jsonl:3").value(), "x");
  EXPECT_EQ(json_int(j, "i", "t.jsonl:3").value(), 3);
  EXPECT_DOUBLE_EQ(json_number(j, "f", "t.jsonl:3").value(), 3.0);
  EXPECT_DOUBLE_EQ(json_number(j, "i", "t.jsonl:3").value(), 3.0);
  EXPECT_TRUE(json_bool(j, "b", "t.jsonl:3").value());
  EXPECT_EQ(err(json_int(j, "s", "t.jsonl:3").status()), "t.jsonl:3: field \"s\" is string, expected an integer");
  EXPECT_EQ(err(json_int(j, "f", "t.jsonl:3").status()), "t.jsonl:3: field \"f\" is float, expected an integer");
  EXPECT_EQ(err(json_int(j, "n", "t.jsonl:3").status()), "t.jsonl:3: field \"n\" is null, expected an integer");
  EXPECT_EQ(err(json_int(j, "zz", "t.jsonl:3").status()), "t.jsonl:3: missing field \"zz\"");
  EXPECT_EQ(err(json_string(j, "a", "cfg.json").status()), "cfg.json: field \"a\" is array, expected a string");
  EXPECT_EQ(err(json_bool(j, "i", "cfg.json").status()), "cfg.json: field \"i\" is integer, expected a boolean");
  EXPECT_EQ(err(json_number(j, "s", "cfg.json").status()), "cfg.json: field \"s\" is string, expected a number");
  // Past int64: shown as itself, not as -1.
  EXPECT_EQ(err(json_int(j, "big", "t.jsonl:3", 0, 10).status()),
            "t.jsonl:3: field \"big\" is 18446744073709551615, expected an integer in [0, 10]");
  EXPECT_EQ(err(json_int(j, "neg", "t.jsonl:3", 0, 10).status()), "t.jsonl:3: field \"neg\" is -4, expected an integer in [0, 10]");
  EXPECT_EQ(json_int(j, "big", "t.jsonl:3").status().code(), StatusCode::kCorrupt);
  // Optional fields: absent or null is nullopt, a wrong type is still an error.
  EXPECT_FALSE(json_opt_int(j, "zz", "w").value().has_value());
  EXPECT_FALSE(json_opt_string(j, "n", "w").value().has_value());
  EXPECT_EQ(*json_opt_int(j, "i", "w").value(), 3);
  EXPECT_FALSE(json_opt_string(j, "i", "w").ok());
  // Not an object at all.
  const auto arr = parse_json("[1,2]", "x").value();
  EXPECT_EQ(err(json_int(arr, "n", "stdin line 2").status()), "stdin line 2: expected a JSON object, got array");
}

// A syntax error names the document and the byte, without nlohmann's
// "[json.exception.parse_error.101]" prefix and without raw bytes of the input.
TEST(JsonAccessor, ParseErrorsAreOneCleanLine) {
  const Status st = parse_json("{\"text\":\"a\xff\x1b\"}", "t.jsonl:2").status();
  EXPECT_EQ(st.message().rfind("t.jsonl:2: malformed JSON at byte ", 0), 0u) << st.message();
  EXPECT_EQ(st.message().find("json.exception"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("parse error at line"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("UTF-8"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("\\xFF"), std::string::npos) << st.message();
  for (char c : st.message()) EXPECT_FALSE(c == '\x1b' || c == '\xff') << st.message();
}

}  // namespace
}  // namespace laya::cli
