#include "core/mmap.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace laya {

MappedFile::~MappedFile() {
  if (owned_ && data_ && size_) munmap(const_cast<uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& o) noexcept { *this = std::move(o); }

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (owned_ && data_ && size_) munmap(const_cast<uint8_t*>(data_), size_);
    data_ = o.data_; size_ = o.size_; owned_ = o.owned_; path_ = std::move(o.path_);
    o.data_ = nullptr; o.size_ = 0; o.owned_ = false;
  }
  return *this;
}

Result<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status(errno == ENOENT ? StatusCode::kNotFound : StatusCode::kIo,
                  fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Status(StatusCode::kIo, fmt::format("{}: stat failed: {}", path, std::strerror(e)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status(StatusCode::kInvalidArgument, fmt::format("{}: not a regular file", path));
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
  ::close(fd);
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
