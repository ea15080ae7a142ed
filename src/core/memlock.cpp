#include "core/memlock.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

namespace laya {

Status lock_pages(const void* p, size_t n, const char* what) {
  if (p == nullptr || n == 0) return Status::Ok();
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t b = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + n + page - 1) / page * page;
  if (mlock(reinterpret_cast<const void*>(b), e - b) == 0) return Status::Ok();
  const int err = errno;
  struct rlimit rl {};
  getrlimit(RLIMIT_MEMLOCK, &rl);
  const std::string limit =
      rl.rlim_cur == RLIM_INFINITY ? std::string("unlimited") : fmt::format("{} KiB", rl.rlim_cur / 1024);
  return Status(StatusCode::kOutOfMemory,
                fmt::format("memory not locked: mlock of {} ({:.1f} MB) refused ({}; locked-memory limit {}); raise it "
                            "(`ulimit -l unlimited`, or memlock in /etc/security/limits.conf) or turn locking off "
                            "(--no-mlock); pages may be evicted and a token then waits for them",
                            what, static_cast<double>(e - b) / 1e6, std::strerror(err), limit));
}

void unlock_pages(const void* p, size_t n) {
  if (p == nullptr || n == 0) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (e > b) (void)munlock(reinterpret_cast<const void*>(b), e - b);  // nothing to report: the memory is being freed
}

long long locked_bytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long long kb = -1;
  while (std::fgets(line, sizeof(line), f)) {
    if (std::sscanf(line, "VmLck: %lld kB", &kb) == 1) break;
  }
  std::fclose(f);
  return kb < 0 ? -1 : kb * 1024;
}

}  // namespace laya
