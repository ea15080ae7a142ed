// libFuzzer target: arbitrary bytes as a laya serve request body
// (src/server/requests.h). The first byte picks the endpoint's parser; the rest
// is the body. Each parser must return a request within the limits or an
// error naming the field; a parsed request's stops must cut its text without
// reading out of bounds. No crash, no sanitizer report, no hang, no huge
// allocation (libFuzzer's -rss_limit_mb). A body the JSON bounds refuse is
// refused by every parser with a message naming the bound, whatever else is
// wrong with it (the bounds are checked before the parse).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/json.h"
#include "server/requests.h"

namespace {
volatile uint64_t g_sink;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  laya::server::RequestLimits lim;
  lim.max_text_bytes = 4096;  // small limits so the fuzzer reaches them
  lim.max_extra_chunks = 4;
  lim.max_stop_strings = 4;
  lim.json = {8, 64};  // depth and values within the fuzzer's reach (fuzz/server_request.dict: brackets)
  if (!laya::check_json_bounds(body, "request body", lim.json).ok()) {
    auto r = laya::server::parse_tokenize(body, lim);
    if (r.ok() || (r.status().message().find("nested deeper") == std::string::npos &&
                   r.status().message().find("JSON values") == std::string::npos))
      __builtin_trap();
    return 0;
  }
  switch (data[0] % 4) {
    case 0: {
      auto r = laya::server::parse_infill(body, lim);
      if (!r.ok()) return g_sink = g_sink + r.status().message().size(), 0;
      if (r->input_extra.size() > lim.max_extra_chunks || r->stop.size() > lim.max_stop_strings) __builtin_trap();
      if (r->n_predict && (*r->n_predict < 0 || *r->n_predict > lim.max_predict)) __builtin_trap();
      std::string text = r->input_prefix + r->prompt;
      const size_t before = text.size();
      laya::apply_stops(&text, r->stop, r->n_indent);
      if (text.size() > before) __builtin_trap();
      break;
    }
    case 1: {
      auto r = laya::server::parse_completion(body, lim);
      if (!r.ok()) return g_sink = g_sink + r.status().message().size(), 0;
      if (r->max_tokens < 1 || r->max_tokens > lim.max_predict || r->stop.size() > 4) __builtin_trap();
      break;
    }
    case 2: {
      auto r = laya::server::parse_tokenize(body, lim);
      g_sink = g_sink + (r.ok() ? r->content.size() : r.status().message().size());
      break;
    }
    default: {
      auto r = laya::server::parse_detokenize(body, lim, 1000);
      if (r.ok())
        for (int32_t id : r->tokens)
          if (id < 0 || id >= 1000) __builtin_trap();
      break;
    }
  }
  return 0;
}
