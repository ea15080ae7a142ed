#include "core/atomic_file.h"

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

namespace laya {

namespace {

std::string dir_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The likely cause of a failed write, for the message.
const char* write_cause(int err) {
  switch (err) {
    case ENOSPC: return ": the disk is full";
    case EDQUOT: return ": the disk quota is exhausted";
    case EFBIG: return ": the file size limit was reached (ulimit -f)";
    case EROFS: return ": the filesystem is read-only";
    case EACCES:
    case EPERM: return ": no permission to write there";
    default: return "";
  }
}

// Names that are an open descriptor of this process (`--json /dev/stdout`):
// replacing their target by a rename would not reach the descriptor, so they
// are written in place like a device.
bool names_a_descriptor(const std::string& p) {
  return p == "/dev/stdout" || p == "/dev/stderr" || p.rfind("/dev/fd/", 0) == 0 || p.rfind("/proc/self/fd/", 0) == 0;
}

const char* file_type_name(mode_t m) {
  if (S_ISDIR(m)) return "a folder";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

Status refuse(const std::string& dest, const OutputOptions& opt, const std::string& why) {
  return Status(StatusCode::kInvalidArgument,
                fmt::format("{}: {}; nothing was written: choose another {} path", dest, why, opt.option));
}

// The destination against the inputs: the same file (device and inode, which
// also catches hard links and symlinks), or a file inside an input folder.
Status check_not_input(const std::string& dest, const struct stat& dst, const OutputOptions& opt) {
  struct stat parent {};
  char resolved[PATH_MAX];
  const bool have_parent = ::realpath(dest.c_str(), resolved) && ::stat(dir_of(resolved).c_str(), &parent) == 0;
  for (const std::string& in : opt.inputs) {
    struct stat ist {};
    if (in.empty() || ::stat(in.c_str(), &ist) != 0) continue;
    if (ist.st_dev == dst.st_dev && ist.st_ino == dst.st_ino)
      return refuse(dest, opt, fmt::format("is also an input of this command{}; writing it would destroy it",
                                           in == dest ? "" : fmt::format(" ({})", in)));
    if (S_ISDIR(ist.st_mode) && have_parent && ist.st_dev == parent.st_dev && ist.st_ino == parent.st_ino)
      return refuse(dest, opt, fmt::format("is a file of the input folder {}; writing it could destroy the input", in));
  }
  return Status::Ok();
}

}  // namespace

bool file_starts_with(const std::string& path, std::string_view prefix) {
  // O_NONBLOCK: a FIFO must not hang the check; only regular files qualify.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat st {};
  std::string head(prefix.size(), '\0');
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<size_t>(st.st_size) >= prefix.size();
  size_t got = 0;
  while (ok && got < head.size()) {
    const ssize_t n = ::read(fd, head.data() + got, head.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ok = false;
    else got += static_cast<size_t>(n);
  }
  ::close(fd);
  return ok && head == prefix;
}

Status check_output(const std::string& dest, const OutputOptions& opt) {
  if (dest.empty()) return Status(StatusCode::kInvalidArgument, fmt::format("empty {} path", opt.option));
  if (names_a_descriptor(dest)) return Status::Ok();
  struct stat st {};
  if (::stat(dest.c_str(), &st) != 0) {
    const int err = errno;
    if (err != ENOENT) return refuse(dest, opt, fmt::format("cannot be checked ({})", std::strerror(err)));
    const std::string dir = dir_of(dest);
    struct stat dst {};
    if (::stat(dir.c_str(), &dst) != 0)
      return refuse(dest, opt, fmt::format("the folder {} does not exist ({})", dir, std::strerror(errno)));
    if (!S_ISDIR(dst.st_mode)) return refuse(dest, opt, fmt::format("{} is not a folder", dir));
    return Status::Ok();
  }
  if (S_ISDIR(st.st_mode)) return refuse(dest, opt, "is a folder, not a file");
  if (S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode))
    return refuse(dest, opt, fmt::format("is {}; laya writes only files, character devices and FIFOs",
                                         file_type_name(st.st_mode)));
  if (!S_ISREG(st.st_mode)) return Status::Ok();  // /dev/null, /dev/full, a FIFO: written in place
  LAYA_TRY(check_not_input(dest, st, opt));
  if (st.st_size == 0 || opt.overwrite) return Status::Ok();
  if (opt.replaceable && opt.replaceable(dest)) return Status::Ok();
  const std::string kind = opt.kind.empty() ? "" : fmt::format(" and is not {}", opt.kind);
  return Status(StatusCode::kInvalidArgument,
                fmt::format("{}: the file exists{}; laya does not replace it: remove it or choose another {} path{}",
                            dest, kind, opt.option,
                            opt.force_flag.empty() ? "" : fmt::format(" (or pass {} to replace it)", opt.force_flag)));
}

AtomicFile::~AtomicFile() { discard(); }

AtomicFile::AtomicFile(AtomicFile&& o) noexcept { *this = std::move(o); }

AtomicFile& AtomicFile::operator=(AtomicFile&& o) noexcept {
  if (this != &o) {
    discard();
    f_ = o.f_;
    dest_ = std::move(o.dest_);
    final_ = std::move(o.final_);
    tmp_ = std::move(o.tmp_);
    o.f_ = nullptr;
    o.tmp_.clear();
  }
  return *this;
}

void AtomicFile::discard() {
  if (f_) std::fclose(f_);
  f_ = nullptr;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
}

Status AtomicFile::io_error(const std::string& what, int err, int fd) {
  const bool in_place = tmp_.empty();
  if (fd >= 0) ::close(fd);
  discard();
  return Status(StatusCode::kIo, fmt::format("{}: {} ({}{}); {}", dest_, what, std::strerror(err), write_cause(err),
                                             in_place ? "the output is incomplete"
                                                      : "nothing was written there (an existing file is unchanged)"));
}

Result<AtomicFile> AtomicFile::create(const std::string& dest, const OutputOptions& opt) {
  LAYA_TRY(check_output(dest, opt));
  AtomicFile out;
  out.dest_ = dest;
  struct stat st {};
  const bool exists = ::stat(dest.c_str(), &st) == 0;
  if (names_a_descriptor(dest) || (exists && !S_ISREG(st.st_mode))) {
    // In place. O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of
    // hanging; once open, writes block normally.
    const int fd = ::open(dest.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      const int err = errno;
      return Status(StatusCode::kIo, fmt::format("{}: cannot open for writing ({}{})", dest, std::strerror(err),
                                                 err == ENXIO ? ": no process reads this FIFO" : ""));
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    out.f_ = ::fdopen(fd, "ab");
    if (!out.f_) return out.io_error("cannot open a stream", errno, fd);
  } else {
    // The rename replaces a symlink's target, not the link.
    char resolved[PATH_MAX];
    out.final_ = exists && ::realpath(dest.c_str(), resolved) ? std::string(resolved) : dest;
    const std::string dir = dir_of(out.final_);
    static std::atomic<unsigned> counter{0};
    int fd = -1;
    for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
      out.tmp_ = fmt::format("{}/.{}.tmp-{}-{}", dir, base_of(out.final_), ::getpid(), counter++);
      // 0666 and the umask, as a plain create would give; O_EXCL: never an existing file.
      fd = ::open(out.tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
      const int err = errno;
      out.tmp_.clear();
      return Status(StatusCode::kIo, fmt::format("{}: cannot create a temporary file in the folder {} ({}{})", dest,
                                                 dir, std::strerror(err), write_cause(err)));
    }
    if (exists) (void)::fchmod(fd, st.st_mode & 07777);  // the replaced file's permissions
    out.f_ = ::fdopen(fd, "wb");
    if (!out.f_) return out.io_error("cannot open a stream", errno, fd);
  }
  std::setvbuf(out.f_, nullptr, _IOFBF, 1 << 20);
  return out;
}

Status AtomicFile::write(const void* data, size_t n) {
  if (!f_) return Status(StatusCode::kInternal, fmt::format("{}: write after the file was closed", dest_));
  if (n > 0 && std::fwrite(data, 1, n, f_) != n) return io_error("write failed", errno);
  return Status::Ok();
}

Status AtomicFile::commit() {
  if (!f_) return Status(StatusCode::kInternal, fmt::format("{}: commit after the file was closed", dest_));
  if (std::fflush(f_) != 0) return io_error("write failed", errno);
  // fsync before the rename: after a crash the name shows the old file or the
  // whole new one, never an empty one. Devices and FIFOs cannot be synced.
  if (!tmp_.empty() && ::fsync(::fileno(f_)) != 0) return io_error("fsync failed", errno);
  const int closed = std::fclose(f_);
  f_ = nullptr;
  if (closed != 0) return io_error("close failed", errno);
  if (tmp_.empty()) return Status::Ok();
  if (::rename(tmp_.c_str(), final_.c_str()) != 0) return io_error("cannot rename the temporary file over it", errno);
  tmp_.clear();
  // The folder's entry is durable only once the folder is synced; the data is
  // already complete under its name, so a failure here is not an error.
  const int dfd = ::open(dir_of(final_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

Status write_file_atomic(const std::string& dest, std::string_view data, const OutputOptions& opt) {
  LAYA_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::create(dest, opt));
  LAYA_TRY(f.write(data));
  return f.commit();
}

}  // namespace laya
