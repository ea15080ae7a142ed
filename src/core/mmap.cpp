#include "core/mmap.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <mutex>
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

// The mappings the SIGBUS handler may patch (see check_unchanged in mmap.h).
// Lock-free: the handler reads it at any moment. A slot is claimed with
// `used`, then end and begin are published (begin last, release); released
// in the opposite order. 256: a server holds two models of a few files each
// and a session store; a mapping that finds no slot is simply not guarded.
struct GuardSlot {
  std::atomic<bool> used{false};
  std::atomic<uintptr_t> begin{0}, end{0};
  std::atomic<bool> faulted{false};
};
constexpr int kGuardSlots = 256;
GuardSlot g_guard[kGuardSlots];
struct sigaction g_previous_bus {};
uintptr_t g_page = 4096;

void on_sigbus(int sig, siginfo_t* info, void* ctx) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
  for (GuardSlot& g : g_guard) {
    const uintptr_t b = g.begin.load(std::memory_order_acquire);
    const uintptr_t e = g.end.load(std::memory_order_acquire);
    if (b == 0 || a < b || a >= e) continue;
    // Every page from the faulting one to the end lies past the new end of
    // the file: zeros over all of them, in one call, so that a read of the
    // rest faults no more. mmap is a plain system call here (not listed as
    // async-signal-safe by POSIX, but it touches no user-space state).
    const uintptr_t page = a & ~(g_page - 1);
    void* p = mmap(reinterpret_cast<void*>(page), e - page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p == MAP_FAILED) break;
    g.faulted.store(true, std::memory_order_release);
    return;  // the faulting read runs again, on zeros
  }
  if ((g_previous_bus.sa_flags & SA_SIGINFO) && g_previous_bus.sa_sigaction) {
    g_previous_bus.sa_sigaction(sig, info, ctx);
    return;
  }
  if (g_previous_bus.sa_handler != SIG_DFL && g_previous_bus.sa_handler != SIG_IGN) {
    g_previous_bus.sa_handler(sig);
    return;
  }
  // Not a mapping of ours: the default action (the fault repeats on return;
  // a SIGBUS sent by kill is raised again).
  signal(SIGBUS, SIG_DFL);
  if (info->si_code <= 0) raise(SIGBUS);
}

int guard_mapping(const void* data, size_t size) {
  static std::once_flag installed;
  std::call_once(installed, [] {
    g_page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_previous_bus);
  });
  const uintptr_t b = reinterpret_cast<uintptr_t>(data);
  const uintptr_t e = (b + size + g_page - 1) & ~(g_page - 1);
  for (int i = 0; i < kGuardSlots; ++i) {
    bool expected = false;
    if (!g_guard[i].used.compare_exchange_strong(expected, true)) continue;
    g_guard[i].faulted.store(false);
    g_guard[i].end.store(e, std::memory_order_release);
    g_guard[i].begin.store(b, std::memory_order_release);
    return i;
  }
  return -1;
}

void unguard_mapping(int i) {
  if (i < 0) return;
  g_guard[i].begin.store(0, std::memory_order_release);
  g_guard[i].end.store(0, std::memory_order_release);
  g_guard[i].used.store(false, std::memory_order_release);
}
}  // namespace

MappedFile::~MappedFile() { release(); }

void MappedFile::release() {
  unguard_mapping(guard_);  // before the unmap: the handler must not patch a range someone else may map next
  guard_ = -1;
  if (owned_ && data_ && size_) munmap(const_cast<uint8_t*>(data_), size_);
  if (fd_ >= 0) ::close(fd_);
  data_ = nullptr; size_ = 0; owned_ = false; fd_ = -1;
}

MappedFile::MappedFile(MappedFile&& o) noexcept { *this = std::move(o); }

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    release();
    data_ = o.data_; size_ = o.size_; owned_ = o.owned_; fd_ = o.fd_; mtime_ns_ = o.mtime_ns_; guard_ = o.guard_;
    path_ = std::move(o.path_);
    o.data_ = nullptr; o.size_ = 0; o.owned_ = false; o.fd_ = -1; o.guard_ = -1;
  }
  return *this;
}

Status MappedFile::check_unchanged() const {
  if (fd_ < 0) return Status::Ok();
  if (guard_ >= 0 && g_guard[guard_].faulted.load(std::memory_order_acquire))
    return Status(StatusCode::kIo, fmt::format("{}: the file shrank while it was being read (its mapped pages past "
                                               "the new end read as zeros): load it again once it is whole "
                                               "(replace model files by renaming a new one over them)",
                                               path_));
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
    m.guard_ = guard_mapping(p, m.size_);
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
