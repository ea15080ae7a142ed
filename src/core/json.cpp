#include "core/json.h"

namespace laya {

Result<nlohmann::json> parse_json(std::string_view text, const std::string& what) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    return Status(StatusCode::kCorrupt, strformat("%s: malformed JSON at byte %zu: %s", what.c_str(), e.byte, e.what()));
  } catch (const nlohmann::json::exception& e) {
    return Status(StatusCode::kCorrupt, strformat("%s: invalid JSON: %s", what.c_str(), e.what()));
  }
}

}  // namespace laya
