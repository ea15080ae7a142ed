// The C API: errors with messages, and a generation loop written in C.
#include <gtest/gtest.h>

#include <string>

#include "laya/laya.h"
#include "test_util.h"

extern "C" int laya_capi_c_smoke(const char* model_path);

namespace {

TEST(CApi, ErrorsCarryCodeAndMessage) {
  laya_model* m = nullptr;
  EXPECT_EQ(laya_model_load("/nonexistent/x.gguf", &m), LAYA_NOT_FOUND);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(laya_last_error()).find("/nonexistent/x.gguf"), std::string::npos);
  EXPECT_EQ(laya_model_load(nullptr, &m), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_engine_create(nullptr, 1, 0, nullptr), LAYA_INVALID_ARGUMENT);
  EXPECT_EQ(laya_decode(nullptr, nullptr, 0), LAYA_INVALID_ARGUMENT);
}

TEST(CApi, GenerationLoopFromC) {
  LAYA_REQUIRE_FIXTURES(fx);
  EXPECT_EQ(laya_capi_c_smoke((fx + "/ref-models/qwen3-tiny/gguf/qwen3-tiny-q8_0.gguf").c_str()), 0) << laya_last_error();
}

}  // namespace
