// `laya bench-sessions` end to end on a few short documents (a few seconds):
// the issue's JSON keys, sharing visible, and a store saved by one process
// and loaded by another gives the same next suggestions and logits (the
// --check files are equal); a damaged store is refused with its reason.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "test_util.h"

namespace laya {
namespace {

namespace fs = std::filesystem;

struct CliResult {
  int code = -1;
  std::string out;  // stdout + stderr
};

CliResult run(const std::string& args) {
  CliResult r;
  const std::string cmd = std::string(LAYA_CLI_PATH) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

TEST(BenchSessionsCli, SaveLoadCheckAndTheIssueKeys) {
  const std::string model = LAYA_SOURCE_DIR "/models/laya-default-q8_0.gguf";
  if (!fs::exists(model)) GTEST_SKIP() << "no " << model;
  const fs::path dir = fs::temp_directory_path() / ("laya_bench_sessions_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string d = dir.string();
  const std::string common = " -m " + model + " -t 1 --no-mlock";
  CliResult a = run("bench-sessions" + common + " --docs 3 --tokens 200 --shared-head 100 --switches 6 --recompute 2 --save " +
                    d + "/store --check " + d + "/a.check --json " + d + "/a.json");
  ASSERT_EQ(a.code, 0) << a.out;
  const auto j = nlohmann::json::parse(test::read_text_file(d + "/a.json"));
  for (const char* k : {"docs", "tokens_per_doc", "resident_docs", "kv_mb", "shared_mb", "switch_ms", "recompute_ms",
                        "save_ms", "load_ms"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["docs"], 3);
  EXPECT_EQ(j["tokens_per_doc"], 200);
  for (const char* k : {"p50", "p99", "max"}) EXPECT_TRUE(j["switch_ms"][k].is_number()) << k;
  for (const char* k : {"p50", "p99"}) EXPECT_GT(j["recompute_ms"][k].get<double>(), 0) << k;
  EXPECT_EQ(j["mismatches"], 0);
  EXPECT_GT(j["shared_mb"].get<double>(), 0) << "two documents share a head";
  EXPECT_EQ(j["resident_docs"], 3) << "the default budget keeps every document resident";
  EXPECT_GT(j["save_ms"].get<double>(), 0);
  EXPECT_TRUE(j["load_ms"].is_null());

  CliResult b = run("bench-sessions" + common + " --load " + d + "/store --switches 0 --check " + d + "/b.check --json " +
                    d + "/b.json");
  ASSERT_EQ(b.code, 0) << b.out;
  const std::string ca = test::read_text_file(d + "/a.check"), cb = test::read_text_file(d + "/b.check");
  EXPECT_EQ(std::count(ca.begin(), ca.end(), '\n'), 3);
  EXPECT_EQ(ca, cb) << "the loaded documents' next suggestions and logits";
  EXPECT_GT(nlohmann::json::parse(test::read_text_file(d + "/b.json"))["load_ms"].get<double>(), 0);

  // A flipped byte in the store: refused, naming the file and the reason.
  const std::string store = d + "/store/sessions.laya";
  {
    std::fstream f(store, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-5, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 4);
    f.seekp(-5, std::ios::end);
    f.write(&c, 1);
  }
  CliResult c = run("bench-sessions" + common + " --load " + d + "/store --switches 0");
  EXPECT_NE(c.code, 0);
  EXPECT_NE(c.out.find("sessions.laya: payload checksum mismatch"), std::string::npos) << c.out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace laya
