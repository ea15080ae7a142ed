// lock_pages: locks where allowed, and where the OS refuses, the error says
// what was refused, the limit, and how to raise it.
#include <gtest/gtest.h>

#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "core/memlock.h"

namespace laya {
namespace {

TEST(MemLock, LocksASmallBuffer) {
  // Fresh pages of their own (heap pages may be locked already by earlier tests).
  const size_t n = 64 * 1024;
  void* buf = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(buf, MAP_FAILED);
  const long long before = locked_bytes();
  if (before < 0) GTEST_SKIP() << "no VmLck in /proc/self/status on this system";
  Status st = lock_pages(buf, n, "a test buffer");
  if (!st.ok()) GTEST_SKIP() << "this system refuses even 64 KiB: " << st.to_string();
  EXPECT_GE(locked_bytes() - before, static_cast<long long>(n));
  munmap(buf, n);
}

// In a child without CAP_IPC_LOCK and with a 64 KiB limit, 1 MiB is refused.
TEST(MemLock, RefusalNamesTheLimitAndTheFix) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    if (syscall(SYS_capget, &hdr, data) == 0) {
      data[0].effective &= ~(1u << CAP_IPC_LOCK);
      syscall(SYS_capset, &hdr, data);
    }
    struct rlimit rl {64 * 1024, 64 * 1024};
    setrlimit(RLIMIT_MEMLOCK, &rl);
    std::vector<char> buf(1 << 20, 1);
    Status st = lock_pages(buf.data(), buf.size(), "a test buffer");
    if (st.ok()) _exit(3);  // could not take the right away: nothing to check
    const std::string& m = st.message();
    const bool good = st.code() == StatusCode::kOutOfMemory && m.find("a test buffer") != std::string::npos &&
                      m.find("64 KiB") != std::string::npos && m.find("ulimit -l") != std::string::npos;
    _exit(good ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 3) GTEST_SKIP() << "mlock is not limited here even without CAP_IPC_LOCK";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the refusal message lacks the buffer's name, the limit or the fix";
}

}  // namespace
}  // namespace laya
