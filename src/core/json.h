// JSON parsing with laya's error model: one way for every reader (config.json,
// tokenizer.json, safetensors headers, traces, requests). nlohmann-json throws;
// these never do, and their messages name the document and the byte.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace laya {

// Parses `text`; `what` names the document in errors ("config.json",
// "trace line 3"). A syntax error is kCorrupt: "<what>: malformed JSON at byte N: ...".
Result<nlohmann::json> parse_json(std::string_view text, const std::string& what);

}  // namespace laya
