// JSON-RPC 2.0 over a byte stream with LSP's base protocol framing:
//
//   Content-Length: <decimal bytes>\r\n
//   [Content-Type: ...\r\n]
//   \r\n
//   <body: that many bytes of UTF-8 JSON>
//
// The reader is built for hostile input: every header line and the header
// block are bounded, the body is capped (kMaxBodyBytes), and a broken frame
// is reported (FrameError) and skipped, never a crash or an unbounded buffer.
// After a frame whose extent is unknown (no or an unreadable Content-Length)
// the reader resynchronises on the next "Content-Length:" in the stream; a
// body past the cap is read and thrown away in small pieces, so the frames
// after it are still understood. EOF is the end (kEof), also mid-frame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace laya::lsp {

// JSON-RPC and LSP error codes.
namespace rpc {
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kInternalError = -32603;
constexpr int kServerNotInitialized = -32002;
constexpr int kRequestCancelled = -32800;
}  // namespace rpc

constexpr size_t kMaxBodyBytes = size_t{16} << 20;  // 16 MiB: a large source file, a generous margin
constexpr size_t kMaxHeaderLine = 1024;              // "Content-Length: 16777216" is 24 bytes
constexpr size_t kMaxHeaderLines = 32;

// Where bytes come from: read(2) on a file descriptor, or memory in tests.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Up to n bytes into buf; 0 at EOF (or an unrecoverable read error).
  virtual size_t read(char* buf, size_t n) = 0;
};

// Where bytes go. false: the peer is gone (EPIPE, ...): nothing more can be said.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual bool write(std::string_view bytes) = 0;
};

class FdSource final : public ByteSource {
 public:
  explicit FdSource(int fd) : fd_(fd) {}
  size_t read(char* buf, size_t n) override;  // retries EINTR

 private:
  int fd_;
};

class FdSink final : public ByteSink {
 public:
  explicit FdSink(int fd) : fd_(fd) {}
  bool write(std::string_view bytes) override;  // all of it, retrying EINTR and short writes

 private:
  int fd_;
};

// One frame read: a body, a frame that could not be taken (its error says
// why, for a -32600 reply with id null), or the end of the stream.
struct Frame {
  enum Kind { kBody, kError, kEof } kind = kEof;
  std::string body;   // kBody
  std::string error;  // kError
};

class FrameReader {
 public:
  explicit FrameReader(ByteSource& src) : src_(src) {}
  Frame next();

 private:
  bool fill();                       // more bytes into buf_; false at EOF
  bool read_line(std::string* line, bool* too_long);  // one header line without its "\r\n" / "\n"
  bool skip_bytes(uint64_t n);       // discards n body bytes; false at EOF
  bool resync();                     // discards up to the next "Content-Length:"; false at EOF
  Frame read_body(uint64_t len);

  ByteSource& src_;
  std::string buf_;  // read but not yet consumed: buf_[pos_, size)
  size_t pos_ = 0;
  bool eof_ = false;
  bool need_resync_ = false;
};

// Writes whole frames under a mutex: the reader thread and the suggestion
// worker both reply, and a frame must never interleave with another.
class FrameWriter {
 public:
  explicit FrameWriter(ByteSink& sink) : sink_(sink) {}
  // false once the sink has failed (later writes are skipped).
  bool write(const nlohmann::json& msg);

 private:
  ByteSink& sink_;
  std::mutex mu_;
  bool failed_ = false;
};

// Message builders. `id` is the request's id (number or string) or null.
nlohmann::json rpc_result(const nlohmann::json& id, nlohmann::json result);
nlohmann::json rpc_error(const nlohmann::json& id, int code, std::string_view message);

// The JSON-RPC framing of one body (for tests and clients).
std::string frame(std::string_view body);

}  // namespace laya::lsp
