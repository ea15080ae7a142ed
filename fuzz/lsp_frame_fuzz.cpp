// libFuzzer target: arbitrary bytes as laya lsp's stdin (src/server/
// jsonrpc_stream.h), cut into reads of the sizes the first byte picks; each
// body that is valid UTF-8 is then a document for the LSP position
// conversions (src/server/utf16.h), checked against their promises:
//   - every frame is a body of at most kMaxBodyBytes, or an error; the
//     reader ends (EOF) within a bounded number of frames;
//   - offset_of lands on a character boundary inside the text, with a code
//     point count that matches its byte offset;
//   - position_of then offset_of gives back the same offset, in every encoding;
//   - each body goes through the server's bounded JSON parse (core/json.h)
//     with small bounds the fuzzer can reach (fuzz/lsp_frame.dict holds
//     brackets and lengths): a body the bounds refuse names the bound, and
//     one that parses holds no more values than the bounds allow.
// No crash, no sanitizer report, no hang.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/json.h"
#include "core/utf8.h"
#include "server/jsonrpc_stream.h"
#include "server/utf16.h"

namespace {

using namespace laya::lsp;

class BytesSource : public ByteSource {
 public:
  BytesSource(std::string_view s, size_t chunk) : s_(s), chunk_(chunk) {}
  size_t read(char* buf, size_t n) override {
    n = std::min({n, chunk_, s_.size() - pos_});
    s_.copy(buf, n, pos_);
    pos_ += n;
    return n;
  }

 private:
  std::string_view s_;
  size_t chunk_, pos_ = 0;
};

void check_positions(std::string_view text, const uint8_t* seed, size_t n_seed) {
  size_t n_cp = 0;
  if (!laya::utf8::count(text, &n_cp, nullptr)) return;
  for (PositionEncoding enc : {PositionEncoding::kUtf8, PositionEncoding::kUtf16, PositionEncoding::kUtf32}) {
    for (size_t i = 0; i + 1 < n_seed && i < 16; i += 2) {
      const Position p{seed[i] % 8, seed[i + 1]};
      const TextOffset o = offset_of(text, p, enc);
      if (o.byte > text.size() || o.cp > n_cp) __builtin_trap();
      if (o.byte < text.size() && laya::utf8::is_continuation(static_cast<unsigned char>(text[o.byte])))
        __builtin_trap();
      size_t cp = 0;
      if (!laya::utf8::count(text.substr(0, o.byte), &cp, nullptr) || cp != o.cp) __builtin_trap();
      const Position back = position_of(text, o.byte, enc);
      const TextOffset again = offset_of(text, back, enc);
      if (again.byte != o.byte || again.cp != o.cp) __builtin_trap();
    }
  }
}

// Counts a parsed document's values and depth (recursion is fine: the bound
// is 8 levels).
size_t count_values(const nlohmann::json& j, size_t depth, size_t* max_depth) {
  *max_depth = std::max(*max_depth, depth);
  size_t n = 1;
  if (j.is_structured())
    for (const auto& v : j) n += count_values(v, depth + 1, max_depth);
  return n;
}

void check_bounded_parse(std::string_view body) {
  const laya::JsonBounds bounds{8, 64};
  auto j = laya::parse_json(body, "message", bounds);
  if (!j.ok()) {
    if (j.status().message().find("message: ") != 0) __builtin_trap();  // names the document
    return;
  }
  size_t depth = 0;
  // Scalars sit one level below their container: max_depth containers put them at max_depth.
  if (count_values(*j, 0, &depth) > bounds.max_values || depth > bounds.max_depth) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 64;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  BytesSource src(in, chunk);
  FrameReader reader(src);
  // Each frame consumes at least one byte, so a stream of n bytes has at most n + 1 frames.
  for (size_t frames = 0;; ++frames) {
    if (frames > in.size() + 1) __builtin_trap();
    Frame f = reader.next();
    if (f.kind == Frame::kEof) break;
    if (f.kind == Frame::kError) {
      if (f.error.empty()) __builtin_trap();
      continue;
    }
    if (f.body.size() > kMaxBodyBytes) __builtin_trap();
    check_bounded_parse(f.body);
    check_positions(f.body, data, size);
  }
  return 0;
}
