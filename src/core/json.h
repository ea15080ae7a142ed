// JSON parsing with laya's error model: one way for every reader (config.json,
// tokenizer.json, safetensors headers, traces, requests). nlohmann-json throws;
// these never do, and their messages name the document and the byte.
//
// Reading a field goes through the checked accessors below (json_string,
// json_int, ...), never through get<T>() / at() / operator[] on a value of an
// unchecked type: those throw nlohmann exceptions (type_error.302 with no file
// or line) or, for operator[] on a const object, are undefined behaviour.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace laya {

// Parses `text`; `what` names the document in errors ("config.json",
// "trace line 3"). A syntax error is kCorrupt: "<what>: malformed JSON at byte N: ...".
Result<nlohmann::json> parse_json(std::string_view text, const std::string& what);

// What a document from the network may cost before it is parsed. nlohmann
// builds a 16-byte value plus a container allocation per bracket, so an 8 MB
// body of "[[[[..." took ~580 MB to parse (issue 29); these bounds make the
// cost of an accepted body proportional to what a client legitimately sends.
struct JsonBounds {
  size_t max_depth = 64;          // nested arrays/objects; laya's requests use at most 5
  size_t max_values = 1u << 20;   // arrays, objects and their items; /detokenize's ids are the largest list
};

// Counts depth and values in one pass over `text` that allocates nothing
// (strings are skipped, escapes honoured; the syntax is left to the parser):
// kInvalidArgument "<what>: JSON nested deeper than 64 levels at byte N" or
// "<what>: more than N JSON values ...". Values are counted from the
// brackets and commas, so a container counts once and each item once.
Status check_json_bounds(std::string_view text, const std::string& what, const JsonBounds& bounds);

// check_json_bounds, then parse_json: a hostile body is refused before a byte
// of it is allocated.
Result<nlohmann::json> parse_json(std::string_view text, const std::string& what, const JsonBounds& bounds);

// The type of a JSON value as messages name it: "null", "boolean", "integer",
// "float", "string", "array", "object" (nlohmann's type_name() says "number"
// for both kinds of number, which does not tell why 3.0 is not an integer).
const char* json_type_name(const nlohmann::json& v);

// Checked field access. `where` names the document and, for JSON lines, the
// line ("trace.jsonl:3"); errors are kCorrupt and read
//   <where>: missing field "n"
//   <where>: field "n" is string, expected an integer
//   <where>: field "n" is 18446744073709551615, expected an integer in [0, 9223372036854775807]
// A non-object `obj` is an error too ("<where>: expected a JSON object, got array").
Result<std::string> json_string(const nlohmann::json& obj, std::string_view key, std::string_view where);
// An integer (not a float, even 3.0) in [lo, hi]; unsigned values past int64 are out of range.
Result<int64_t> json_int(const nlohmann::json& obj, std::string_view key, std::string_view where,
                         int64_t lo = INT64_MIN, int64_t hi = INT64_MAX);
// A finite number (integer or float) in [lo, hi].
Result<double> json_number(const nlohmann::json& obj, std::string_view key, std::string_view where,
                           double lo = -1.0e308, double hi = 1.0e308);
Result<bool> json_bool(const nlohmann::json& obj, std::string_view key, std::string_view where);

// Optional fields: std::nullopt when absent (or null), the value when it has
// the expected type, an error like the above when it has another.
Result<std::optional<std::string>> json_opt_string(const nlohmann::json& obj, std::string_view key,
                                                   std::string_view where);
Result<std::optional<int64_t>> json_opt_int(const nlohmann::json& obj, std::string_view key, std::string_view where,
                                            int64_t lo = INT64_MIN, int64_t hi = INT64_MAX);

}  // namespace laya
