// Status and Result<T>: laya's error model. No exceptions cross a public API;
// every fallible call returns one of these, carrying a message that names the
// object, the value found, the value expected and, where possible, a fix.
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace laya {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,  // caller passed something wrong
  kNotFound = 2,         // file / key / tensor absent
  kCorrupt = 3,          // file content violates its format
  kUnsupported = 4,      // valid but not implemented (dtype, arch, version)
  kOutOfRange = 5,       // position / index past a limit
  kIo = 6,               // OS-level read/map failure
  kOutOfMemory = 7,      // allocation or mlock refused
  kInternal = 8,         // a bug in laya
  kCancelled = 9,        // stopped on request (a cancel flag); state is consistent
};

const char* status_code_name(StatusCode c);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string msg) : code_(code), msg_(std::move(msg)) {}
  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return msg_; }
  std::string to_string() const;

  // Prefix the message with context ("file.gguf: ..."), keeping the code.
  Status with_context(const std::string& ctx) const {
    if (ok()) return *this;
    return Status(code_, ctx + ": " + msg_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string msg_;
};


template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status st) : v_(std::move(st)) {}   // NOLINT
  bool ok() const { return v_.index() == 0; }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<1>(v_);
  }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> v_;
};

#define LAYA_CONCAT_INNER(a, b) a##b
#define LAYA_CONCAT(a, b) LAYA_CONCAT_INNER(a, b)

// Return the status if it is an error.
#define LAYA_TRY(expr)                     \
  do {                                     \
    ::laya::Status _st = (expr);           \
    if (!_st.ok()) return _st;             \
  } while (0)

// `LAYA_ASSIGN_OR_RETURN(auto x, f());`
#define LAYA_ASSIGN_OR_RETURN(lhs, expr) \
  LAYA_ASSIGN_OR_RETURN_IMPL(LAYA_CONCAT(_res_, __LINE__), lhs, expr)
#define LAYA_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

// Fail with a message (fmt::format arguments) when a condition does not hold.
#define LAYA_CHECK_OR_RETURN(cond, code, ...)                         \
  do {                                                                \
    if (!(cond)) return ::laya::Status((code), fmt::format(__VA_ARGS__)); \
  } while (0)

}  // namespace laya
