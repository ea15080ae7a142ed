#include "core/json.h"

#include <fmt/format.h>

namespace laya {

Result<nlohmann::json> parse_json(std::string_view text, const std::string& what) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    return Status(StatusCode::kCorrupt, fmt::format("{}: malformed JSON at byte {}: {}", what, e.byte, e.what()));
  } catch (const nlohmann::json::exception& e) {
    return Status(StatusCode::kCorrupt, fmt::format("{}: invalid JSON: {}", what, e.what()));
  }
}

}  // namespace laya
