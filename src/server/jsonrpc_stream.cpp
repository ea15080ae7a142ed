#include "server/jsonrpc_stream.h"

#include <cerrno>
#include <unistd.h>

#include <algorithm>
#include <fmt/format.h>

#include "core/shown.h"

namespace laya::lsp {

namespace {

constexpr size_t kChunk = 64 * 1024;
constexpr std::string_view kLengthHeader = "content-length";

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Decimal digits only (no sign, no spaces inside), at most 19 of them so the
// value fits; anything else is not a length.
bool parse_length(std::string_view v, uint64_t* out) {
  if (v.empty() || v.size() > 19) return false;
  uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = n;
  return true;
}

}  // namespace

size_t FdSource::read(char* buf, size_t n) {
  for (;;) {
    const ssize_t r = ::read(fd_, buf, n);
    if (r >= 0) return static_cast<size_t>(r);
    if (errno != EINTR) return 0;  // an unreadable stdin ends the session like EOF
  }
}

bool FdSink::write(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t w = ::write(fd_, bytes.data(), bytes.size());
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(w));
  }
  return true;
}

bool FrameReader::fill() {
  if (eof_) return false;
  if (pos_ > 0) {  // drop what was consumed: the buffer holds one chunk plus a partial line at most
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  const size_t old = buf_.size();
  buf_.resize(old + kChunk);
  const size_t n = src_.read(buf_.data() + old, kChunk);
  buf_.resize(old + n);
  if (n == 0) eof_ = true;
  return n > 0;
}

bool FrameReader::read_line(std::string* line, bool* too_long) {
  *too_long = false;
  for (;;) {
    const size_t nl = buf_.find('\n', pos_);
    if (nl != std::string::npos) {
      size_t end = nl;
      if (end > pos_ && buf_[end - 1] == '\r') --end;
      if (end - pos_ > kMaxHeaderLine) *too_long = true;
      else line->assign(buf_, pos_, end - pos_);
      pos_ = nl + 1;
      return true;
    }
    if (buf_.size() - pos_ > kMaxHeaderLine) {  // no line break in sight: not a header
      *too_long = true;
      pos_ = buf_.size();
      return true;
    }
    if (!fill()) return false;
  }
}

bool FrameReader::skip_bytes(uint64_t n) {
  for (;;) {
    const uint64_t have = buf_.size() - pos_;
    if (have >= n) {
      pos_ += static_cast<size_t>(n);
      return true;
    }
    n -= have;
    pos_ = buf_.size();
    if (!fill()) return false;
  }
}

bool FrameReader::resync() {
  for (;;) {
    const std::string_view hay(buf_.data() + pos_, buf_.size() - pos_);
    for (size_t i = 0; i + kLengthHeader.size() < hay.size(); ++i) {
      if (iequals(hay.substr(i, kLengthHeader.size()), kLengthHeader) && hay[i + kLengthHeader.size()] == ':') {
        pos_ += i;
        return true;
      }
    }
    // Keep a tail that may be the start of the header cut by the chunk.
    pos_ = buf_.size() - std::min(hay.size(), kLengthHeader.size());
    if (!fill()) return false;
  }
}

Frame FrameReader::read_body(uint64_t len) {
  Frame f;
  while (buf_.size() - pos_ < len) {
    if (!fill()) return f;  // EOF inside the body
  }
  f.kind = Frame::kBody;
  f.body.assign(buf_, pos_, static_cast<size_t>(len));
  pos_ += static_cast<size_t>(len);
  return f;
}

Frame FrameReader::next() {
  Frame f;
  // After a frame of unknown extent, the next one starts at the next
  // "Content-Length:" (found now, not before that frame's error was answered).
  if (need_resync_) {
    if (!resync()) return f;
    need_resync_ = false;
  }
  std::string line;
  std::string error;
  bool have_len = false, bad = false;
  uint64_t len = 0;
  size_t n_lines = 0;
  for (;;) {
    bool too_long = false;
    if (!read_line(&line, &too_long)) return f;  // EOF
    if (too_long) {
      error = fmt::format("a header line longer than {} bytes", kMaxHeaderLine);
      bad = true;
      break;
    }
    if (line.empty()) {
      if (n_lines == 0) continue;  // stray blank lines between frames are harmless
      break;                       // the end of the header block
    }
    if (++n_lines > kMaxHeaderLines) {
      error = fmt::format("more than {} header lines", kMaxHeaderLines);
      bad = true;
      break;
    }
    const size_t colon = line.find(':');
    if (colon == std::string::npos) {
      error = fmt::format("malformed header line {} (expected 'Name: value')", shown(line));
      bad = true;
      break;
    }
    if (!iequals(trim(std::string_view(line).substr(0, colon)), kLengthHeader)) continue;  // Content-Type, ...: ignored
    const std::string_view v = trim(std::string_view(line).substr(colon + 1));
    uint64_t n = 0;
    if (!parse_length(v, &n) || (have_len && n != len)) {
      error = have_len && parse_length(v, &n)
                  ? fmt::format("two different Content-Length headers ({} and {})", len, n)
                  : fmt::format("Content-Length {} is not a byte count (expected decimal digits)", shown(v));
      bad = true;
      break;
    }
    len = n;
    have_len = true;
  }
  if (!bad && !have_len) error = "a frame without a Content-Length header";
  if (bad || !have_len) {
    need_resync_ = true;  // the body's extent is unknown
    f.kind = Frame::kError;
    f.error = error;
    return f;
  }
  if (len > kMaxBodyBytes) {
    // Thrown away unread so that the frames after it still parse.
    if (!skip_bytes(len)) return f;
    f.kind = Frame::kError;
    f.error = fmt::format("Content-Length {} is past the limit of {} bytes", len, kMaxBodyBytes);
    return f;
  }
  return read_body(len);
}

bool FrameWriter::write(const nlohmann::json& msg) {
  // `replace`: a string that is not UTF-8 (none should reach here: every
  // string came from a parsed message or from the model's complete
  // characters) becomes U+FFFD instead of an exception.
  const std::string body = msg.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const std::string out = frame(body);
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_) return false;
  if (!sink_.write(out)) failed_ = true;
  return !failed_;
}

nlohmann::json rpc_result(const nlohmann::json& id, nlohmann::json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

nlohmann::json rpc_error(const nlohmann::json& id, int code, std::string_view message) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", std::string(message)}}}};
}

std::string frame(std::string_view body) {
  std::string out = fmt::format("Content-Length: {}\r\n\r\n", body.size());
  out.append(body);
  return out;
}

}  // namespace laya::lsp
