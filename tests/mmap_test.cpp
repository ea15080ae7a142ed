// A mapped file truncated while it is read (issue 29: `cp` over a model while
// /admin/model loaded it raised SIGBUS and ended the server).
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "core/mmap.h"

namespace laya {
namespace {

std::string temp_file(const std::string& name, size_t bytes) {
  const std::string p = (std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()))).string();
  std::ofstream(p, std::ios::binary) << std::string(bytes, 'w');
  return p;
}

TEST(MappedFile, TruncatedWhileReadReadsZerosAndFailsTheCheck) {
  const std::string path = temp_file("laya-mmap-trunc", 256 << 10);
  auto m = MappedFile::open(path);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->data()[100], 'w');
  ASSERT_EQ(truncate(path.c_str(), 4096), 0);
  // Past the new end: without the guard this read raises SIGBUS.
  volatile const uint8_t* d = m->data();
  EXPECT_EQ(d[200000], 0);
  EXPECT_EQ(d[256 * 1024 - 1], 0);
  EXPECT_EQ(d[100], 'w');  // the pages before the end are the file's still
  Status st = m->check_unchanged();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("shrank while it was being read"), std::string::npos) << st.message();
  std::filesystem::remove(path);
}

TEST(MappedFile, BusErrorOutsideAMappingStillEndsTheProcess) {
  const std::string path = temp_file("laya-mmap-other", 4096);
  auto m = MappedFile::open(path);  // installs the handler
  ASSERT_TRUE(m.ok());
  EXPECT_EXIT(raise(SIGBUS), testing::KilledBySignal(SIGBUS), "");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace laya
