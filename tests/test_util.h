// Helpers shared by tests: fixture paths (skip when absent) and .npy reading.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <initializer_list>
#include <vector>

#include "core/status.h"

namespace laya::tok {
class Tokenizer;
}

namespace laya::test {

// ../shared/fixtures beside the project root, or $LAYA_FIXTURES; "" if absent.
std::string fixtures_dir();

// GTEST_SKIP()s with a clear message when the fixtures are absent.
#define LAYA_REQUIRE_FIXTURES(var)                                                    \
  std::string var = ::laya::test::fixtures_dir();                                     \
  if (var.empty()) GTEST_SKIP() << "../shared/fixtures not found (set LAYA_FIXTURES); " \
                                   "skipping fixture-based test"

// Tests that run the built `laya` binary: the sanitizer build does not build
// the CLI (tools/ci/sanitize.sh), so they skip there instead of failing.
#define LAYA_REQUIRE_CLI()                                                              \
  if (!std::filesystem::exists(LAYA_CLI_PATH))                                          \
  GTEST_SKIP() << LAYA_CLI_PATH << " not built (the sanitizer build has no CLI); skipping CLI test"

// The AddressSanitizer build (tools/ci/sanitize.sh), whose instrumented code
// runs its tests ~3-10x slower inside CI's 30 minutes: the helpers below make
// its long tests smaller; the Release build runs them in full.
// GCC defines __SANITIZE_ADDRESS__; clang (which builds it now) says so
// through __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define LAYA_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LAYA_TEST_ASAN 1
#endif
#endif
#if defined(LAYA_TEST_ASAN)
inline constexpr bool kSanitizerBuild = true;
#else
inline constexpr bool kSanitizerBuild = false;
#endif

// Iterations of a long randomized test: n, or a quarter of n under the
// sanitizer.
constexpr size_t sanitizer_scaled(size_t n) { return kSanitizerBuild ? (n / 4 > 0 ? n / 4 : 1) : n; }

// Every how many events a long replay compares with a from-scratch result: 1,
// or 4 under the sanitizer (the incremental path still runs on every event,
// and the last one is always compared).
constexpr int sanitizer_stride() { return kSanitizerBuild ? 4 : 1; }

// Engine threads for a test: 1 under the sanitizer, whose tests run in one
// process a core (tools/ci/sanitize.sh): 2-thread engines in both on CI's 2
// cores made every forward pass wait for a descheduled worker.
constexpr int sanitizer_threads(int n) { return kSanitizerBuild && n > 0 ? 1 : n; }

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;  // float32 only
};
// Reads a little-endian float32 C-order .npy file; fails the test on error.
bool read_npy_f32(const std::string& path, NpyArray* out, std::string* err);

// The whole file (laya::read_file), or "" when it cannot be read.
std::string read_text_file(const std::string& path);

// A tokenizer loaded once per path for the whole test binary (tokenizer.json
// files are ~10 MB); nullptr, and a test failure, when it does not load.
const tok::Tokenizer* cached_tokenizer(const std::string& path);

// Fails the test unless st has `code` and its message contains every fragment.
void expect_status(const Status& st, StatusCode code, std::initializer_list<const char*> fragments);

}  // namespace laya::test
