#include "core/mmap.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace laya {

namespace {
Status not_regular(const std::string& path, mode_t mode) {
  const char* what = S_ISDIR(mode) ? "a folder" : S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device"
                     : S_ISBLK(mode) ? "a block device" : S_ISSOCK(mode) ? "a socket" : "a special file";
  return Status(StatusCode::kInvalidArgument, fmt::format("{}: not a regular file ({}); expected a file on disk", path, what));
}

int64_t mtime_ns(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}
}  // namespace

MappedFile::~MappedFile() { release(); }

void MappedFile::release() {
  if (owned_ && data_ && size_) munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
  data_ = nullptr; size_ = 0; owned_ = false; fd_ = -1;
}

MappedFile::MappedFile(MappedFile&& o) noexcept { *this = std::move(o); }

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    release();
    data_ = o.data_; size_ = o.size_; owned_ = o.owned_; fd_ = o.fd_; mtime_ns_ = o.mtime_ns_;
    path_ = std::move(o.path_);
    o.data_ = nullptr; o.size_ = 0; o.owned_ = false; o.fd_ = -1;
  }
  return *this;
}

Status MappedFile::check_unchanged() const {
  if (fd_ < 0) return Status::Ok();
  struct stat st {};
  if (fstat(fd_, &st) != 0) {
    return Status(StatusCode::kIo, fmt::format("{}: stat failed: {}", path_, std::strerror(errno)));
  }
  if (static_cast<uint64_t>(st.st_size) != size_ || mtime_ns(st) != mtime_ns_) {
    return Status(StatusCode::kIo,
                  fmt::format("{}: the file changed on disk after it was loaded ({} bytes then, {} now{}): its mapped "
                              "weights are no longer valid; load it again (replace model files by renaming a new one "
                              "over them, not by writing into them)",
                              path_, size_, static_cast<int64_t>(st.st_size),
                              static_cast<uint64_t>(st.st_size) == size_ ? ", rewritten in place" : ""));
  }
  return Status::Ok();
}

Result<MappedFile> MappedFile::open(const std::string& path) {
  // stat before open: opening a FIFO blocks until a writer appears, and
  // opening a device can have effects. O_NONBLOCK covers a file swapped for a
  // FIFO between the two calls; the fstat below is the check that counts.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int e = errno;
    return Status(e == ENOENT ? StatusCode::kNotFound : StatusCode::kIo,
                  fmt::format("{}: cannot open: {}", path, std::strerror(e)));
  }
  if (!S_ISREG(st.st_mode)) return not_regular(path, st.st_mode);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int e = errno;
    return Status(e == ENOENT ? StatusCode::kNotFound : StatusCode::kIo,
                  fmt::format("{}: cannot open: {}", path, std::strerror(e)));
  }
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Status(StatusCode::kIo, fmt::format("{}: stat failed: {}", path, std::strerror(e)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return not_regular(path, st.st_mode);
  }
  MappedFile m;
  m.path_ = path;
  m.size_ = static_cast<size_t>(st.st_size);
  if (m.size_ > 0) {
    void* p = mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return Status(StatusCode::kIo, fmt::format("{}: mmap failed: {}", path, std::strerror(e)));
    }
    m.data_ = static_cast<const uint8_t*>(p);
    m.owned_ = true;
  }
  m.fd_ = fd;  // kept: check_unchanged()
  m.mtime_ns_ = mtime_ns(st);
  return m;
}

MappedFile MappedFile::borrow(const void* data, size_t size, std::string name) {
  MappedFile m;
  m.data_ = static_cast<const uint8_t*>(data);
  m.size_ = size;
  m.owned_ = false;
  m.path_ = std::move(name);
  return m;
}

Status MappedFile::lock() {
  if (!data_ || !size_) return Status::Ok();
  if (mlock(data_, size_) != 0) {
    return Status(StatusCode::kOutOfMemory, fmt::format("{}: mlock of {} bytes refused ({}); raise `ulimit -l` or run "
                                                        "without --mlock (latency may spike when pages are evicted)",
                                                        path_, size_, std::strerror(errno)));
  }
  return Status::Ok();
}

}  // namespace laya
