// Output files are never lost (issue 11): core/atomic_file.h, and the
// non-blocking opens of model and text files (FIFOs, devices, folders).
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/atomic_file.h"
#include "core/io.h"
#include "core/mmap.h"
#include "format/gguf_writer.h"
#include "laya/laya.h"
#include "test_util.h"

namespace laya {
namespace {

namespace fs = std::filesystem;

// A fresh folder per test, removed after.
struct TempDir {
  fs::path dir;
  TempDir() {
    dir = fs::temp_directory_path() /
          ("laya_atomic_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string operator/(const std::string& name) const { return (dir / name).string(); }
  // Names in the folder, to see that no temporary file was left behind.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void spit(const std::string& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

OutputOptions overwrite() {
  OutputOptions o;
  o.overwrite = true;
  return o;
}

TEST(AtomicFile, WritesANewFileAndLeavesNoTemporary) {
  TempDir d;
  ASSERT_TRUE(write_file_atomic(d / "out.txt", "hello\n", {}).ok());
  EXPECT_EQ(slurp(d / "out.txt"), "hello\n");
  EXPECT_EQ(d.names(), std::vector<std::string>{"out.txt"});
}

TEST(AtomicFile, ExistingFileIsRefusedUnlessAllowed) {
  TempDir d;
  spit(d / "keep.txt", "precious");
  OutputOptions o;
  o.option = "-o";
  o.force_flag = "--force";
  test::expect_status(write_file_atomic(d / "keep.txt", "new", o), StatusCode::kInvalidArgument,
                      {"keep.txt", "exists", "--force", "-o"});
  EXPECT_EQ(slurp(d / "keep.txt"), "precious");
  ASSERT_TRUE(write_file_atomic(d / "keep.txt", "new", overwrite()).ok());
  EXPECT_EQ(slurp(d / "keep.txt"), "new");
  EXPECT_EQ(d.names(), std::vector<std::string>{"keep.txt"});
}

TEST(AtomicFile, ReplaceablePredicateAndEmptyFiles) {
  TempDir d;
  OutputOptions o;
  o.kind = "a greeting";
  o.replaceable = [](const std::string& p) { return file_starts_with(p, "hello"); };
  spit(d / "a", "hello old");
  spit(d / "b", "something else");
  spit(d / "empty", "");
  EXPECT_TRUE(write_file_atomic(d / "a", "hello new", o).ok());
  EXPECT_EQ(slurp(d / "a"), "hello new");
  test::expect_status(write_file_atomic(d / "b", "hello", o), StatusCode::kInvalidArgument, {"/b", "a greeting"});
  EXPECT_EQ(slurp(d / "b"), "something else");
  EXPECT_TRUE(write_file_atomic(d / "empty", "x", o).ok());  // nothing to lose
}

TEST(AtomicFile, MissingFolderIsAClearError) {
  TempDir d;
  const std::string dest = d / "no/such/folder/out.json";
  test::expect_status(check_output(dest, {}), StatusCode::kInvalidArgument, {"out.json", "does not exist"});
  test::expect_status(write_file_atomic(dest, "x", {}), StatusCode::kInvalidArgument, {"out.json", "does not exist"});
}

TEST(AtomicFile, SameFileAsAnInputIsRefused) {
  TempDir d;
  spit(d / "model.gguf", "GGUF weights");
  fs::create_hard_link(d / "model.gguf", d / "hard.gguf");
  fs::create_symlink(d / "model.gguf", d / "link.gguf");
  fs::create_directories(d / "hf");
  spit(d / "hf/config.json", "{}");
  OutputOptions o = overwrite();  // even --force never replaces an input
  o.inputs = {d / "model.gguf", d / "hf"};
  for (const char* name : {"model.gguf", "hard.gguf", "link.gguf"}) {
    test::expect_status(write_file_atomic(d / name, "npy", o), StatusCode::kInvalidArgument, {name, "input"});
  }
  test::expect_status(write_file_atomic(d / "hf/config.json", "npy", o), StatusCode::kInvalidArgument,
                      {"config.json", "input folder"});
  EXPECT_EQ(slurp(d / "model.gguf"), "GGUF weights");
  EXPECT_EQ(slurp(d / "hf/config.json"), "{}");
  EXPECT_TRUE(write_file_atomic(d / "hf/new.npy", "x", o).ok());  // a new file beside the inputs loses nothing
}

TEST(AtomicFile, FolderDestinationIsRefused) {
  TempDir d;
  test::expect_status(write_file_atomic(d.dir.string(), "x", overwrite()), StatusCode::kInvalidArgument, {"a folder"});
}

// A write past RLIMIT_FSIZE (ulimit -f) fails with EFBIG, as a full disk
// fails with ENOSPC: the existing file must stay whole and no temporary may
// remain. In a child, so the limit does not reach the test binary.
TEST(AtomicFile, FailedWriteKeepsTheExistingFile) {
  TempDir d;
  const std::string dest = d / "victim.bin";
  spit(dest, "the old, complete file");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl {4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &rl);
    const std::string big(size_t{4} << 20, 'x');
    Status st = write_file_atomic(dest, big, overwrite());
    const bool named = st.message().find("victim.bin") != std::string::npos &&
                       st.message().find("ulimit -f") != std::string::npos;
    ::_exit(st.code() == StatusCode::kIo && named ? 0 : 1);
  }
  int ws = 0;
  ASSERT_EQ(::waitpid(pid, &ws, 0), pid);
  ASSERT_TRUE(WIFEXITED(ws));
  EXPECT_EQ(WEXITSTATUS(ws), 0) << "the write past the limit did not fail with a message naming the path";
  EXPECT_EQ(slurp(dest), "the old, complete file");
  EXPECT_EQ(d.names(), std::vector<std::string>{"victim.bin"});
}

TEST(AtomicFile, DevFullIsAnError) {
  if (::access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full";
  test::expect_status(write_file_atomic("/dev/full", "{}\n", {}), StatusCode::kIo, {"/dev/full", "disk is full"});
  EXPECT_TRUE(write_file_atomic("/dev/null", "{}\n", {}).ok());  // a device is written in place
}

TEST(AtomicFile, UncommittedFileIsDiscarded) {
  TempDir d;
  spit(d / "old", "old");
  {
    auto f = AtomicFile::create(d / "old", overwrite());
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->write("half of it").ok());
  }  // destroyed without commit: a failed command
  EXPECT_EQ(slurp(d / "old"), "old");
  EXPECT_EQ(d.names(), std::vector<std::string>{"old"});
}

TEST(AtomicFile, SymlinkDestinationReplacesItsTarget) {
  TempDir d;
  spit(d / "target", "");
  fs::create_symlink(d / "target", d / "link");
  ASSERT_TRUE(write_file_atomic(d / "link", "data", {}).ok());
  EXPECT_TRUE(fs::is_symlink(d / "link"));
  EXPECT_EQ(slurp(d / "target"), "data");
}

TEST(AtomicFile, FifoWithoutReaderDoesNotHang) {
  TempDir d;
  ASSERT_EQ(::mkfifo((d / "fifo").c_str(), 0600), 0);
  test::expect_status(write_file_atomic(d / "fifo", "x", {}), StatusCode::kIo, {"fifo", "no process reads"});
}

TEST(AtomicFile, GgufWriterLeavesNoPartialFile) {
  TempDir d;
  spit(d / "m.gguf", "old model");
  gguf::Writer w;
  ASSERT_TRUE(w.add_tensor("a", DType::F32, {8}).ok());
  test::expect_status(w.begin(d / "m.gguf"), StatusCode::kInvalidArgument, {"m.gguf", "exists"});
  ASSERT_TRUE(w.begin(d / "m.gguf", overwrite()).ok());
  float x[4] = {};
  ASSERT_TRUE(w.write(x, sizeof(x)).ok());
  EXPECT_FALSE(w.finish().ok());  // incomplete: discarded
  EXPECT_EQ(slurp(d / "m.gguf"), "old model");
  EXPECT_EQ(d.names(), std::vector<std::string>{"m.gguf"});
}

// Opening a FIFO for reading blocks until a writer appears: the model and
// text readers must refuse FIFOs, devices and folders without blocking.
TEST(NonRegularInputs, AreRefusedWithoutBlocking) {
  TempDir d;
  ASSERT_EQ(::mkfifo((d / "fifo.gguf").c_str(), 0600), 0);
  test::expect_status(MappedFile::open(d / "fifo.gguf").status(), StatusCode::kInvalidArgument,
                      {"fifo.gguf", "not a regular file", "FIFO"});
  test::expect_status(read_file(d / "fifo.gguf").status(), StatusCode::kInvalidArgument, {"fifo.gguf", "FIFO"});
  test::expect_status(MappedFile::open(d.dir.string()).status(), StatusCode::kInvalidArgument, {"a folder"});
  test::expect_status(MappedFile::open("/dev/zero").status(), StatusCode::kInvalidArgument,
                      {"/dev/zero", "character device"});
  test::expect_status(read_file("/dev/zero").status(), StatusCode::kInvalidArgument, {"/dev/zero"});
}

// The same through the C API door (laya_model_load uses Model::load).
TEST(NonRegularInputs, CApiModelLoadDoesNotBlock) {
  TempDir d;
  ASSERT_EQ(::mkfifo((d / "fifo.gguf").c_str(), 0600), 0);
  laya_model* m = nullptr;
  EXPECT_EQ(laya_model_load((d / "fifo.gguf").c_str(), &m), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_model_load("/dev/zero", &m), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_model_load(d.dir.c_str(), &m), LAYA_NOT_FOUND);  // a folder without config.json
  EXPECT_EQ(m, nullptr);
}

}  // namespace
}  // namespace laya
