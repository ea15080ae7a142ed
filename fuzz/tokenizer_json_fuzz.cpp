// libFuzzer target: arbitrary bytes as a tokenizer.json and, after the first
// NUL byte, its tokenizer_config.json. A load must fail with a Status (no
// crash, no sanitizer report, no hang); a tokenizer that
// loads must encode a few texts into ids inside its vocabulary and decode them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tokenizer/tokenizer.h"

namespace {
volatile uint64_t g_sink;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string_view tj = in.substr(0, nul);
  const std::string_view cfg = nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);
  auto r = laya::tok::Tokenizer::from_hf_json_text(tj, cfg, "fuzz/tokenizer.json");
  if (!r.ok()) {
    g_sink = g_sink + r.status().message().size();
    return 0;
  }
  const laya::tok::Tokenizer& t = *r.value();
  uint64_t acc = static_cast<uint64_t>(t.n_vocab());
  static const std::string_view kTexts[] = {"", "hello world", "ab <s> ab</s>", "\xff\xfe\xc3", "  \n\t x  ",
                                            "\xE2\x96\x81" "a\xC3\xA9\xE4\xB8\x80"};
  for (std::string_view text : kTexts) {
    for (bool special : {false, true}) {
      auto ids = t.encode(text, laya::tok::EncodeOptions{special, std::nullopt, std::nullopt});
      if (!ids.ok()) continue;
      for (int32_t id : ids.value()) {
        if (id < 0 || id >= t.n_vocab()) __builtin_trap();
        acc += t.token_bytes(id).size();
      }
      acc += t.decode(ids.value()).size();
      laya::tok::StreamingDetokenizer sd(t);
      for (int32_t id : ids.value()) acc += sd.push(id).size();
      acc += sd.finish().size();
    }
  }
  g_sink = g_sink + acc;
  return 0;
}
