#include "core/io.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

namespace laya {

Result<std::string> read_file(const std::string& path, size_t max_bytes) {
  // stat first: a folder, FIFO or device is refused without being opened
  // (opening a device can have effects). O_NONBLOCK: a FIFO put in the file's
  // place after the stat must not hang the open; regular files ignore it.
  struct stat pre {};
  if (::stat(path.c_str(), &pre) == 0 && !S_ISREG(pre.st_mode)) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("{}: not a regular file ({})", path,
                              S_ISDIR(pre.st_mode) ? "a folder" : S_ISFIFO(pre.st_mode) ? "a FIFO"
                                                  : S_ISCHR(pre.st_mode)   ? "a character device"
                                                                           : "a special file"));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    return Status(err == ENOENT ? StatusCode::kNotFound : StatusCode::kIo,
                  fmt::format("{}: cannot open ({})", path, std::strerror(err)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status(StatusCode::kInvalidArgument, fmt::format("{}: not a regular file", path));
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return Status(StatusCode::kOutOfRange,
                  fmt::format("{}: {} bytes, more than the {} this reader accepts", path, st.st_size, max_bytes));
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      ::close(fd);
      return Status(StatusCode::kIo, fmt::format("{}: read failed after {} of {} bytes ({})", path, got, out.size(),
                                                 err ? std::strerror(err) : "file shrank"));
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  return out;
}

}  // namespace laya
