// laya lsp: the JSON-RPC framing (hostile frames included), LSP position
// conversion (hand-made cases, not the code's own output), and the server
// driven message by message on the default model: typing through didChange,
// a completion equal to a direct Session's, cancellation and supersession.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <fmt/format.h>
#include <utility>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/model.h"
#include "server/jsonrpc_stream.h"
#include "server/lsp_server.h"
#include "server/utf16.h"
#include "tokenizer/tokenizer.h"

namespace laya::lsp {
namespace {

using json = nlohmann::json;

// ---- position conversion --------------------------------------------------------------

TextOffset at(std::string_view text, int64_t line, int64_t ch, PositionEncoding e = PositionEncoding::kUtf16) {
  return offset_of(text, Position{line, ch}, e);
}

// "a😀b": U+1F600 is 4 UTF-8 bytes, 2 UTF-16 units (a surrogate pair), 1 code point.
constexpr std::string_view kEmoji = "a\xF0\x9F\x98\x80" "b";

TEST(Utf16, AsciiLines) {
  const std::string_view t = "abc\ndef";
  EXPECT_EQ(at(t, 0, 0).byte, 0u);
  EXPECT_EQ(at(t, 0, 3).byte, 3u);
  EXPECT_EQ(at(t, 1, 2).byte, 6u);
  EXPECT_EQ(at(t, 1, 2).cp, 6u);
}

TEST(Utf16, EmojiIsASurrogatePair) {
  EXPECT_EQ(at(kEmoji, 0, 1).byte, 1u);
  EXPECT_EQ(at(kEmoji, 0, 3).byte, 5u);  // after the emoji: 1 + 2 units
  EXPECT_EQ(at(kEmoji, 0, 3).cp, 2u);
  EXPECT_EQ(at(kEmoji, 0, 4).byte, 6u);
  // Inside the pair: clamped to the start of the emoji.
  EXPECT_EQ(at(kEmoji, 0, 2).byte, 1u);
  EXPECT_EQ(at(kEmoji, 0, 2).cp, 1u);
}

TEST(Utf16, OtherEncodings) {
  EXPECT_EQ(at(kEmoji, 0, 5, PositionEncoding::kUtf8).byte, 5u);
  EXPECT_EQ(at(kEmoji, 0, 3, PositionEncoding::kUtf8).byte, 1u);  // inside the sequence: its start
  EXPECT_EQ(at(kEmoji, 0, 2, PositionEncoding::kUtf32).byte, 5u);
  EXPECT_EQ(at(kEmoji, 0, 2, PositionEncoding::kUtf32).cp, 2u);
}

TEST(Utf16, CjkAndCombiningMarks) {
  const std::string_view cjk = "\xE4\xB8\xAD\xE6\x96\x87x";  // 中文x: 3 bytes, 1 UTF-16 unit each
  EXPECT_EQ(at(cjk, 0, 2).byte, 6u);
  EXPECT_EQ(at(cjk, 0, 2).cp, 2u);
  EXPECT_EQ(at(cjk, 0, 6, PositionEncoding::kUtf8).byte, 6u);
  // e + U+0301 (combining acute, 2 bytes): positions count code units, not
  // what the user sees as one character.
  const std::string_view comb = "e\xCC\x81x";
  EXPECT_EQ(at(comb, 0, 1).byte, 1u);
  EXPECT_EQ(at(comb, 0, 2).byte, 3u);
  EXPECT_EQ(at(comb, 0, 2).cp, 2u);
}

TEST(Utf16, LineBreaksAndClamping) {
  const std::string_view t = "a\r\nb\rc\nd";
  EXPECT_EQ(at(t, 1, 0).byte, 3u);  // "\r\n" is one break
  EXPECT_EQ(at(t, 2, 0).byte, 5u);  // so is a lone "\r"
  EXPECT_EQ(at(t, 3, 0).byte, 7u);
  EXPECT_EQ(at(t, 0, 99).byte, 1u);  // past the line end: the line end, before its break
  EXPECT_EQ(at(t, 99, 0).byte, 8u);  // past the last line: the end of the text
  EXPECT_EQ(at(t, 99, 0).cp, 8u);
  EXPECT_EQ(at(t, -1, -5).byte, 0u);
  EXPECT_EQ(at("", 0, 3).byte, 0u);
  EXPECT_EQ(at("x\n", 1, 0).byte, 2u);  // the empty last line exists
}

TEST(Utf16, PositionOfByte) {
  Position p = position_of(kEmoji, 5, PositionEncoding::kUtf16);
  EXPECT_EQ(p.line, 0);
  EXPECT_EQ(p.character, 3);
  const std::string t = "x\n\xE4\xB8\xAD\xF0\x9F\x98\x80y";  // x / 中😀y
  p = position_of(t, 9, PositionEncoding::kUtf16);  // before y
  EXPECT_EQ(p.line, 1);
  EXPECT_EQ(p.character, 3);
  EXPECT_EQ(position_of(t, 9, PositionEncoding::kUtf8).character, 7);
  EXPECT_EQ(position_of(t, 9, PositionEncoding::kUtf32).character, 2);
  p = position_of("a\r\nb", 2, PositionEncoding::kUtf16);  // between \r and \n: the end of line 0
  EXPECT_EQ(p.line, 0);
  EXPECT_EQ(p.character, 1);
  EXPECT_EQ(units_of(t, PositionEncoding::kUtf16), 6u);
}

TEST(Utf16, LineStartHint) {
  const std::string_view t = "ab\n\xE4\xB8\xAD\nxyz\n";
  const LineStart l1 = line_start(t, 1);
  EXPECT_EQ(l1.byte, 3u);
  EXPECT_EQ(l1.cp, 3u);
  const LineStart l2 = line_start(t, 2, &l1);
  EXPECT_EQ(l2.byte, 7u);
  EXPECT_EQ(l2.cp, 5u);
  EXPECT_EQ(offset_of(t, {2, 1}, PositionEncoding::kUtf16, &l2).cp, 6u);
  EXPECT_EQ(offset_of(t, {0, 1}, PositionEncoding::kUtf16, &l2).byte, 1u);  // a hint past the line is not used
}

// ---- framing ------------------------------------------------------------------------

class StringSource : public ByteSource {
 public:
  explicit StringSource(std::string s, size_t chunk = 1 << 20) : s_(std::move(s)), chunk_(chunk) {}
  size_t read(char* buf, size_t n) override {
    n = std::min({n, chunk_, s_.size() - pos_});
    s_.copy(buf, n, pos_);
    pos_ += n;
    return n;
  }

 private:
  std::string s_;
  size_t chunk_, pos_ = 0;
};

class StringSink : public ByteSink {
 public:
  bool write(std::string_view b) override {
    std::lock_guard<std::mutex> lock(mu_);
    s_.append(b);
    return true;
  }
  std::string take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(s_, {});
  }

 private:
  std::mutex mu_;
  std::string s_;
};

std::vector<Frame> frames(const std::string& stream, size_t chunk = 1 << 20) {
  StringSource src(stream, chunk);
  FrameReader r(src);
  std::vector<Frame> out;
  for (int i = 0; i < 100; ++i) {
    Frame f = r.next();
    if (f.kind == Frame::kEof) break;
    out.push_back(std::move(f));
  }
  return out;
}

TEST(LspFraming, BackToBackAndHeaders) {
  const std::string s = frame("{\"a\":1}") + "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"
                        "content-length: 2\r\n\r\n{}" + "Content-Length: 3\n\n[1]";
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{1} << 20}) {  // any cut of the stream
    const auto f = frames(s, chunk);
    ASSERT_EQ(f.size(), 3u) << chunk;
    EXPECT_EQ(f[0].body, "{\"a\":1}");
    EXPECT_EQ(f[1].body, "{}");
    EXPECT_EQ(f[2].body, "[1]");
  }
}

TEST(LspFraming, BrokenFramesAreReportedAndSkipped) {
  struct Case {
    std::string head;
    const char* error;
  };
  const std::vector<Case> cases = {
      {"Content-Type: x\r\n\r\n{\"lost\":1}", "without a Content-Length"},
      {"Content-Length: abc\r\n\r\n", "'abc' is not a byte count"},
      {"Content-Length: -5\r\n\r\n", "'-5' is not a byte count"},
      {"Content-Length: 99999999999999999999\r\n\r\n", "is not a byte count"},
      {"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", "two different Content-Length headers (2 and 3)"},
      {"garbage\r\n\r\n", "malformed header line 'garbage'"},
      {std::string(5000, 'x') + "\r\n\r\n", "a header line longer than 1024 bytes"},
      {std::string(5000, 'x'), "a header line longer than 1024 bytes"},
      {[] { std::string h; for (int i = 0; i < 40; ++i) h += "X-A: 1\r\n"; return h + "\r\n"; }(), "more than 32 header lines"},
  };
  for (const Case& c : cases) {
    const auto f = frames(c.head + frame("{\"ok\":2}"), 5);
    ASSERT_EQ(f.size(), 2u) << c.head.substr(0, 60);
    EXPECT_EQ(f[0].kind, Frame::kError);
    EXPECT_NE(f[0].error.find(c.error), std::string::npos) << f[0].error;
    EXPECT_EQ(f[1].kind, Frame::kBody);
    EXPECT_EQ(f[1].body, "{\"ok\":2}");
  }
}

TEST(LspFraming, OversizedBodyIsSkipped) {
  const size_t n = kMaxBodyBytes + 10;
  const std::string s = fmt::format("Content-Length: {}\r\n\r\n", n) + std::string(n, ' ') + frame("{}");
  const auto f = frames(s);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].kind, Frame::kError);
  EXPECT_NE(f[0].error.find("past the limit of 16777216 bytes"), std::string::npos) << f[0].error;
  EXPECT_EQ(f[1].body, "{}");
}

TEST(LspFraming, EofEndsCleanly) {
  EXPECT_TRUE(frames("").empty());
  EXPECT_TRUE(frames("Content-Length: 10\r\n\r\n{\"a\"").empty());  // inside a body
  EXPECT_TRUE(frames("Content-Len").empty());                        // inside a header
  EXPECT_TRUE(frames(std::string(3000, 'x')).size() <= 1u);         // garbage to the end: at most its error
  EXPECT_TRUE(frames("Content-Length: 99999999\r\n\r\nabc").empty());  // a huge body cut short
}

// ---- the server on the default model ---------------------------------------------------

std::string model_path() { return std::string(LAYA_SOURCE_DIR) + "/models/laya-default-q8_0.gguf"; }

struct Env {
  std::unique_ptr<ModelSlot> slot;  // the server binds its sessions through it
  Engine* eng = nullptr;            // the slot's engine and tokenizer, for sessions made directly
  const tok::Tokenizer* tok = nullptr;
};

Env* env() {
  static Env* e = [] {
    auto* r = new Env;
    ModelSlotOptions mo;
    mo.engine.n_threads = 1;  // CI's 2 cores run other tests beside
    mo.engine.n_ctx = 1024;
    mo.engine.lock_memory = false;
    auto s = ModelSlot::create(model_path(), mo);
    if (!s.ok()) return r;
    r->slot = std::move(s).value();
    r->eng = r->slot->current()->engine.get();
    r->tok = r->slot->current()->tokenizer.get();
    return r;
  }();
  return e;
}

#define REQUIRE_MODEL()                                                                          \
  if (!std::filesystem::exists(model_path()))                                                    \
    GTEST_SKIP() << "no " << model_path() << " (the shipped default model): skipping LSP tests"; \
  Env* E = env();                                                                                \
  ASSERT_TRUE(E->eng && E->tok) << "the default model did not load"

// A server with its replies collected in memory.
struct Harness {
  StringSink sink;
  FrameWriter writer{sink};
  std::unique_ptr<LspServer> server;
  std::vector<std::string> logs;

  Harness(Env* E, LspOptions opt = {}) {
    opt.log = [this](std::string_view m) { logs.emplace_back(m); };
    server = std::make_unique<LspServer>(*E->slot, opt, writer);
  }
  void send(const json& m) { server->handle(m); }
  void request(int id, const std::string& method, json params) {
    send({{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}});
  }
  void notify(const std::string& method, json params) {
    send({{"jsonrpc", "2.0"}, {"method", method}, {"params", std::move(params)}});
  }
  // The replies written so far (after the suggestions in flight are done).
  std::vector<json> replies() {
    server->wait_idle();
    std::vector<json> out;
    for (const Frame& f : frames(sink.take())) out.push_back(json::parse(f.body));
    return out;
  }
  json only_reply() {
    auto r = replies();
    EXPECT_EQ(r.size(), 1u);
    return r.empty() ? json() : r[0];
  }
  void initialize(json caps = json::object()) {
    request(0, "initialize", {{"capabilities", std::move(caps)}});
    (void)replies();
    notify("initialized", json::object());
  }
  void open(const std::string& uri, const std::string& text) {
    notify("textDocument/didOpen",
           {{"textDocument", {{"uri", uri}, {"languageId", "python"}, {"version", 1}, {"text", text}}}});
  }
  void insert(const std::string& uri, int64_t line, int64_t ch, const std::string& text) {
    const json p = {{"line", line}, {"character", ch}};
    notify("textDocument/didChange", {{"textDocument", {{"uri", uri}, {"version", 2}}},
                                      {"contentChanges", json::array({{{"range", {{"start", p}, {"end", p}}}, {"text", text}}})}});
  }
  void complete(int id, const std::string& uri, int64_t line, int64_t ch) {
    request(id, "textDocument/inlineCompletion", {{"textDocument", {{"uri", uri}}},
                                                  {"position", {{"line", line}, {"character", ch}}},
                                                  {"context", {{"triggerKind", 2}}}});
  }
};

int error_code(const json& r) { return r.contains("error") ? r["error"]["code"].get<int>() : 0; }
std::string error_message(const json& r) { return r.contains("error") ? r["error"]["message"].get<std::string>() : ""; }

TEST(LspServer, ProtocolErrors) {
  REQUIRE_MODEL();
  Harness h(E);
  h.request(1, "textDocument/inlineCompletion", json::object());
  EXPECT_EQ(error_code(h.only_reply()), rpc::kServerNotInitialized);
  h.initialize();
  h.server->handle_body("{\"jsonrpc\": \"2.0\", \"id\": 1,");
  EXPECT_EQ(error_code(h.only_reply()), rpc::kParseError);
  h.server->handle_body("\"\\ud800\"");  // a lone surrogate: not UTF-8 text
  EXPECT_EQ(error_code(h.only_reply()), rpc::kParseError);
  h.send(json::array({1, 2}));
  EXPECT_EQ(error_code(h.only_reply()), rpc::kInvalidRequest);
  // Deep: refused before parsing (issue 29: a 16 MiB "[[[[..." frame kept 1.19 GB).
  h.server->handle_body(std::string(100000, '[') + std::string(100000, ']'));
  json deep = h.only_reply();
  EXPECT_EQ(error_code(deep), rpc::kParseError);
  EXPECT_NE(error_message(deep).find("nested deeper than 64 levels"), std::string::npos) << deep.dump();
  h.send({{"id", 3}, {"method", "shutdown"}});  // no "jsonrpc"
  EXPECT_EQ(error_code(h.only_reply()), rpc::kInvalidRequest);
  h.send({{"jsonrpc", "2.0"}, {"id", json::object()}, {"method", "x"}});
  json r = h.only_reply();
  EXPECT_EQ(error_code(r), rpc::kInvalidRequest);
  EXPECT_TRUE(r["id"].is_null());
  h.request(4, "workspace/symbol", json::object());
  r = h.only_reply();
  EXPECT_EQ(error_code(r), rpc::kMethodNotFound);
  EXPECT_EQ(r["id"], 4);
  h.notify("$/unknownNotification", json::object());  // ignored: no reply
  h.notify("textDocument/didChange", {{"textDocument", {{"uri", "file:///nope"}}}, {"contentChanges", json::array()}});
  EXPECT_TRUE(h.replies().empty());
  EXPECT_FALSE(h.logs.empty());  // ... but said on the log
  h.open("file:///a.py", "x = 1\n");
  h.request(5, "textDocument/inlineCompletion",
            {{"textDocument", {{"uri", "file:///a.py"}}}, {"position", {{"line", "0"}, {"character", 0}}}});
  r = h.only_reply();
  EXPECT_EQ(error_code(r), rpc::kInvalidParams);
  EXPECT_NE(error_message(r).find("params.position: field \"line\" is string"), std::string::npos) << r;
  h.request(6, "textDocument/inlineCompletion",
            {{"textDocument", {{"uri", "file:///a.py"}}}, {"position", {{"line", 0}, {"character", -1}}}});
  EXPECT_NE(error_message(h.only_reply()).find("params.position: field \"character\" is -1"), std::string::npos);
  h.complete(7, "file:///b.py", 0, 0);
  EXPECT_NE(error_message(h.only_reply()).find("'file:///b.py' is not an open document"), std::string::npos);
  h.request(8, "shutdown", nullptr);
  EXPECT_TRUE(h.only_reply()["result"].is_null());
  h.complete(9, "file:///a.py", 0, 0);
  EXPECT_EQ(error_code(h.only_reply()), rpc::kInvalidRequest);
  EXPECT_FALSE(h.server->exited());
  h.notify("exit", nullptr);
  EXPECT_TRUE(h.server->exited());
  EXPECT_EQ(h.server->exit_code(), 0);
}

TEST(LspServer, InitializeNegotiatesTheEncoding) {
  REQUIRE_MODEL();
  for (auto [offered, expected] : std::vector<std::pair<json, std::string>>{
           {json::array({"utf-8", "utf-16"}), "utf-8"},
           {json::array({"utf-32"}), "utf-32"},
           {json::array({"latin-1"}), "utf-16"},
           {nullptr, "utf-16"}}) {
    Harness h(E);
    h.request(1, "initialize", {{"capabilities", {{"general", {{"positionEncodings", offered}}}}}});
    const json r = h.only_reply();
    const json& caps = r["result"]["capabilities"];
    EXPECT_EQ(caps["positionEncoding"], expected) << offered;
    EXPECT_EQ(caps["textDocumentSync"]["change"], 2);
    EXPECT_EQ(caps["inlineCompletionProvider"], true);
    h.request(2, "initialize", json::object());
    EXPECT_EQ(error_code(h.only_reply()), rpc::kInvalidRequest);
    EXPECT_EQ(h.server->exit_code(), 1);  // no shutdown yet
  }
}

// Typing a line through didChange gives the text an editor holds, and the
// completion is what a Session given that text and cursor suggests.
TEST(LspServer, TypedLineCompletesLikeASession) {
  REQUIRE_MODEL();
  Harness h(E);
  h.initialize();
  const std::string uri = "file:///t.py";
  const std::string head = "import os\n\n\ndef main(argv):\n    ";
  h.open(uri, head + "\n    return 0\n");
  const std::string line = "path = os.";
  for (size_t i = 0; i < line.size(); ++i) h.insert(uri, 4, 4 + static_cast<int64_t>(i), line.substr(i, 1));
  const std::string text = head + line + "\n    return 0\n";
  ASSERT_NE(h.server->document_text(uri), nullptr);
  EXPECT_EQ(*h.server->document_text(uri), text);
  h.complete(10, uri, 4, 14);
  const json r = h.only_reply();
  ASSERT_TRUE(r.contains("result")) << r;
  const json& items = r["result"]["items"];
  Session direct(*E->eng, *E->tok);
  ASSERT_TRUE(direct.set_text(text).ok());
  ASSERT_TRUE(direct.move((head + line).size()).ok());  // ASCII: bytes are code points
  SuggestOptions so;
  so.max_tokens = LspOptions{}.max_tokens;
  so.single_line = true;
  auto want = direct.suggest(so);
  ASSERT_TRUE(want.ok());
  ASSERT_FALSE(want->text.empty());  // else the comparison below proves little
  ASSERT_EQ(items.size(), 1u) << r;
  EXPECT_EQ(items[0]["insertText"], want->text);
  const json pos = {{"line", 4}, {"character", 14}};
  EXPECT_EQ(items[0]["range"], json({{"start", pos}, {"end", pos}}));
  // Typing on after the completion: the session follows (one more keystroke, one more completion).
  h.insert(uri, 4, 14, "p");
  h.complete(11, uri, 4, 15);
  const json r2 = h.only_reply();
  EXPECT_EQ(r2["id"], 11);
  EXPECT_TRUE(r2["result"]["items"].is_array());
}

// One didChange may hold several changes: each applies to the text the one
// before it left (ranges, then a whole-text change, then ranges again).
TEST(LspServer, ChangesApplyInOrder) {
  REQUIRE_MODEL();
  Harness h(E);
  h.initialize();
  const std::string uri = "file:///o.txt";
  h.open(uri, "ab\r\ncd\rz");
  auto range = [](int l0, int c0, int l1, int c1) {
    return json{{"start", {{"line", l0}, {"character", c0}}}, {"end", {{"line", l1}, {"character", c1}}}};
  };
  h.complete(1, uri, 1, 1);  // the document gets a session: the edits below go through it too
  (void)h.replies();
  h.notify("textDocument/didChange",
           {{"textDocument", {{"uri", uri}, {"version", 2}}},
            {"contentChanges", json::array({{{"range", range(1, 1, 1, 1)}, {"text", "X"}},      // cXd
                                            {{"range", range(0, 1, 1, 0)}, {"text", ""}},       // across "\r\n"
                                            {{"range", range(1, 0, 1, 1)}, {"text", "\xE4\xB8\xAD"}}})}});  // after "\r"
  EXPECT_EQ(*h.server->document_text(uri), "acXd\r\xE4\xB8\xAD");
  h.notify("textDocument/didChange", {{"textDocument", {{"uri", uri}, {"version", 3}}},
                                      {"contentChanges", json::array({{{"text", "new\ntext"}},
                                                                      {{"range", range(1, 4, 1, 4)}, {"text", "!"}}})}});
  EXPECT_EQ(*h.server->document_text(uri), "new\ntext!");
  const size_t logged = h.logs.size();
  h.notify("textDocument/didChange", {{"textDocument", {{"uri", uri}, {"version", 4}}},
                                      {"contentChanges", json::array({{{"range", range(1, 2, 0, 0)}, {"text", "?"}}})}});
  EXPECT_EQ(*h.server->document_text(uri), "new\ntext!");  // end before start: refused, said on the log
  ASSERT_EQ(h.logs.size(), logged + 1);
  EXPECT_NE(h.logs.back().find("end 0:0 is before start 1:2"), std::string::npos) << h.logs.back();
  // The session followed every change: its completion is a fresh session's on the same text.
  h.complete(2, uri, 1, 5);
  const json r = h.only_reply();
  Session direct(*E->eng, *E->tok);
  ASSERT_TRUE(direct.set_text("new\ntext!").ok());
  SuggestOptions so;
  so.max_tokens = LspOptions{}.max_tokens;
  so.single_line = true;
  auto want = direct.suggest(so);
  ASSERT_TRUE(want.ok());
  const json& items = r["result"]["items"];
  EXPECT_EQ(items.empty() ? std::string() : items[0]["insertText"].get<std::string>(), want->text) << r;
}

TEST(LspServer, RangeIsInUtf16Units) {
  REQUIRE_MODEL();
  Harness h(E);
  h.initialize();
  // Line 1: 中 (1 unit) 😀 (2 units) "x = " (4 units): its end is UTF-16 column 7 (6 code points).
  const std::string uri = "file:///u.py";
  h.open(uri, "# notes\n\xE4\xB8\xAD\xF0\x9F\x98\x80x = ");
  h.complete(1, uri, 1, 99);  // past the end: clamped to the line end
  const json r = h.only_reply();
  ASSERT_TRUE(r.contains("result")) << r;
  ASSERT_FALSE(r["result"]["items"].empty()) << r;  // else the range goes unchecked
  for (const json& it : r["result"]["items"]) {
    const json pos = {{"line", 1}, {"character", 7}};
    EXPECT_EQ(it["range"], json({{"start", pos}, {"end", pos}}));
  }
  // A keystroke typed at UTF-16 column 7 lands after the emoji.
  h.insert(uri, 1, 7, "1");
  EXPECT_EQ(*h.server->document_text(uri), "# notes\n\xE4\xB8\xAD\xF0\x9F\x98\x80x = 1");
  h.insert(uri, 1, 2, "|");  // inside the surrogate pair: before the emoji
  EXPECT_EQ(*h.server->document_text(uri), "# notes\n\xE4\xB8\xAD|\xF0\x9F\x98\x80x = 1");

  // The same line where the client chose UTF-8: columns are bytes (3 + 4 + 4 = 11).
  Harness h8(E);
  h8.initialize({{"general", {{"positionEncodings", {"utf-8", "utf-16"}}}}});
  h8.open(uri, "# notes\n\xE4\xB8\xAD\xF0\x9F\x98\x80x = ");
  h8.complete(2, uri, 1, 99);
  const json r8 = h8.only_reply();
  ASSERT_FALSE(r8["result"]["items"].empty()) << r8;
  EXPECT_EQ(r8["result"]["items"][0]["range"]["start"], json({{"line", 1}, {"character", 11}}));
  h8.insert(uri, 1, 5, "|");  // inside the emoji's 4 bytes: before it
  EXPECT_EQ(*h8.server->document_text(uri), "# notes\n\xE4\xB8\xAD|\xF0\x9F\x98\x80x = ");
}

// A long suggestion (multi-line, 200 tokens) is still running when the
// cancel or the next request comes, microseconds later.
LspOptions long_suggestions() {
  LspOptions o;
  o.max_tokens = 200;
  o.multi_line = true;
  return o;
}

TEST(LspServer, CancelRequestEndsWithRequestCancelled) {
  REQUIRE_MODEL();
  Harness h(E, long_suggestions());
  h.initialize();
  const std::string uri = "file:///c.py";
  h.open(uri, "import os\nimport sys\n\n\ndef main(argv):\n");
  h.complete(20, uri, 5, 0);
  h.notify("$/cancelRequest", {{"id", 20}});
  const json r = h.only_reply();
  EXPECT_EQ(r["id"], 20);
  EXPECT_EQ(error_code(r), rpc::kRequestCancelled) << r;
  h.notify("$/cancelRequest", {{"id", 20}});  // already answered: nothing
  h.notify("$/cancelRequest", {{"id", "nope"}});
  EXPECT_TRUE(h.replies().empty());
}

TEST(LspServer, NewerRequestOrEditSupersedes) {
  REQUIRE_MODEL();
  Harness h(E, long_suggestions());
  h.initialize();
  const std::string uri = "file:///s.py";
  h.open(uri, "import os\nimport sys\n\n\ndef main(argv):\n");
  h.complete(30, uri, 5, 0);
  h.complete(31, uri, 5, 0);
  h.insert(uri, 5, 0, "    ");  // ends 31 too
  auto r = h.replies();
  ASSERT_EQ(r.size(), 2u);
  for (const json& x : r) {
    ASSERT_TRUE(x.contains("result")) << x;
    EXPECT_TRUE(x["result"]["items"].empty()) << x;
  }
}

// With room for one document's KV, documents take turns: each request still
// gets its answer (the other document's session gives its KV back), and the
// same answer as with room for both.
TEST(LspServer, SessionsBeyondTheCapReleaseTheirKv) {
  REQUIRE_MODEL();
  std::vector<std::string> texts[2];
  for (int cap : {2, 1}) {
    LspOptions o;
    o.max_sessions = cap;
    Harness h(E, o);
    h.initialize();
    h.open("file:///a.py", "import os\nprint(os.");
    h.open("file:///b.py", "def add(a, b):\n    return a");
    int id = 40;
    for (const char* uri : {"file:///a.py", "file:///b.py", "file:///a.py"}) {
      h.complete(id, uri, 1, 99);
      const json r = h.only_reply();
      EXPECT_EQ(r["id"], id++);
      ASSERT_TRUE(r.contains("result")) << r;
      ASSERT_FALSE(r["result"]["items"].empty()) << uri;
      texts[cap - 1].push_back(r["result"]["items"][0]["insertText"]);
      // Each of these short documents fits in one KV block: as many blocks in use as documents may hold them.
      if (id == 42) {
        EXPECT_EQ(E->eng->kv_pool().n_in_use(), cap);
      }
    }
    h.notify("textDocument/didClose", {{"textDocument", {{"uri", "file:///a.py"}}}});
    EXPECT_EQ(h.server->document_text("file:///a.py"), nullptr);
    EXPECT_NE(h.server->document_text("file:///b.py"), nullptr);
  }
  EXPECT_EQ(texts[0], texts[1]);
}

TEST(LspServer, RunOverAStreamAndExitCodes) {
  REQUIRE_MODEL();
  // A frame of unknown extent is answered (-32600) and the stream goes on;
  // replies in flight are written before run() returns; nothing after exit is read.
  auto msg = [](json m) { m["jsonrpc"] = "2.0"; return frame(m.dump()); };
  const std::string uri = "file:///r.py";
  std::string in = msg({{"id", 1}, {"method", "initialize"}, {"params", {{"capabilities", json::object()}}}}) +
                   "Content-Length: x\r\n\r\n" +
                   msg({{"method", "textDocument/didOpen"},
                        {"params", {{"textDocument", {{"uri", uri}, {"version", 1}, {"text", "def f(x):\n    return"}}}}}}) +
                   msg({{"id", 2}, {"method", "textDocument/inlineCompletion"},
                        {"params", {{"textDocument", {{"uri", uri}}}, {"position", {{"line", 1}, {"character", 10}}}}}}) ;
  for (bool shutdown : {true, false}) {
    StringSink sink;
    FrameWriter w(sink);
    LspServer server(*E->slot, {}, w);
    StringSource src(in + (shutdown ? msg({{"id", 3}, {"method", "shutdown"}}) : "") + msg({{"method", "exit"}}) +
                     msg({{"id", 4}, {"method", "shutdown"}}));  // after exit: never read
    FrameReader reader(src);
    EXPECT_EQ(server.run(reader), shutdown ? 0 : 1);
    const auto out = frames(sink.take());
    ASSERT_EQ(out.size(), shutdown ? 4u : 3u);
    // In order, except the completion's reply: written by the worker, it may
    // come after the shutdown's (which then ended it: an empty list).
    std::map<std::string, json> by_id;
    for (const Frame& f : out) {
      const json j = json::parse(f.body);
      by_id[j["id"].dump()] = j;
    }
    EXPECT_TRUE(by_id["1"]["result"].contains("capabilities"));
    const json& bad = by_id["null"];
    EXPECT_EQ(bad["error"]["code"], rpc::kInvalidRequest);
    EXPECT_NE(bad["error"]["message"].get<std::string>().find("Content-Length 'x' is not a byte count"),
              std::string::npos) << bad;
    EXPECT_TRUE(by_id["2"]["result"]["items"].is_array()) << by_id["2"];
    if (shutdown) {
      EXPECT_TRUE(by_id["3"].contains("result") && by_id["3"]["result"].is_null()) << by_id["3"];
    }
    EXPECT_FALSE(by_id.count("4"));
  }
}

}  // namespace
}  // namespace laya::lsp
