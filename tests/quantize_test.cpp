// Scalar quantizers (backend/cpu/quantize.h): quantize random rows, decode
// with laya's scalar dequantizers, check the error bound of each type and
// that re-quantizing decoded values is stable.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/kernels.h"
#include "format/quantize.h"
#include "core/dtype.h"
#include "core/fp16.h"

namespace laya {
namespace {

std::vector<float> random_row(int64_t n, uint32_t seed, float std = 1.0f, bool outliers = true) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, std);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = nd(rng);
  if (outliers) {
    for (int64_t i = 0; i < n; i += 97) x[static_cast<size_t>(i)] *= 6.0f;  // a few large values
    for (int64_t i = 40; i < 72 && i < n; ++i) x[static_cast<size_t>(i)] = 0.0f;  // an all-zero block
    if (n > 200) for (int64_t i = 128; i < 160; ++i) x[static_cast<size_t>(i)] = 0.5f;  // a constant block
    if (n > 300) for (int64_t i = 256; i < 288; ++i) x[static_cast<size_t>(i)] = std::fabs(x[static_cast<size_t>(i)]);  // all positive
  }
  return x;
}

std::vector<float> roundtrip(DType t, const std::vector<float>& x, std::vector<uint8_t>* bytes = nullptr) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(row_bytes(t, n));
  quantize_row(t, x.data(), q.data(), n);
  std::vector<float> y(x.size());
  const cpu::KernelTable* k = cpu::kernels_for(cpu::Isa::kScalar);
  EXPECT_NE(k, nullptr);
  EXPECT_NE(k->dequantize_row[static_cast<uint32_t>(t)], nullptr) << dtype_name(t);
  k->dequantize_row[static_cast<uint32_t>(t)](q.data(), y.data(), n);
  if (bytes) *bytes = std::move(q);
  return y;
}

double rms(const std::vector<float>& a) {
  double s = 0;
  for (float v : a) s += double(v) * v;
  return std::sqrt(s / double(a.size()));
}

double rms_err(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(s / double(a.size()));
}

constexpr int64_t kN = 256 * 8;

TEST(QuantizeFloat, F16AndBF16RoundToNearest) {
  auto x = random_row(kN, 1);
  auto y16 = roundtrip(DType::F16, x);
  auto yb = roundtrip(DType::BF16, x);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_LE(std::fabs(y16[i] - x[i]), std::fabs(x[i]) * 0x1p-11f + 0x1p-25f) << i;
    EXPECT_LE(std::fabs(yb[i] - x[i]), std::fabs(x[i]) * 0x1p-8f) << i;
    EXPECT_EQ(y16[i], fp16_to_f32(f32_to_fp16(x[i])));
    EXPECT_EQ(yb[i], bf16_to_f32(f32_to_bf16(x[i])));
  }
  EXPECT_EQ(roundtrip(DType::F16, y16), y16);
  EXPECT_EQ(roundtrip(DType::BF16, yb), yb);
}

// Q8_0 / Q4_0 / Q5_0: one scale per 32; the error is bounded by the scale.
void check_block32(DType t, int qmax_levels) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    auto x = random_row(kN, seed, seed == 3 ? 0.02f : 1.0f);
    std::vector<uint8_t> bytes;
    auto y = roundtrip(t, x, &bytes);
    const size_t bb = dtype_info(t).block_bytes;
    for (int64_t b = 0; b < kN / 32; ++b) {
      uint16_t dbits;
      std::memcpy(&dbits, bytes.data() + b * bb, 2);
      const float d = std::fabs(fp16_to_f32(dbits));
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
      // Q8_0: round to nearest (d/2), plus the fp16 rounding of d over 127 levels.
      // Q4_0 / Q5_0: values opposite the extreme can clip by up to one step.
      const float bound = t == DType::Q8_0 ? d * 0.5f * (1 + 1e-3f) + amax * 0x1p-11f : d * (1 + 1e-3f) + amax * 0x1p-10f;
      for (int j = 0; j < 32; ++j) {
        const size_t i = static_cast<size_t>(b * 32 + j);
        ASSERT_LE(std::fabs(y[i] - x[i]), bound + 1e-9f) << dtype_name(t) << " block " << b << " elem " << j;
      }
    }
    // Decoded values are fixed points of the quantizer: same bytes again.
    std::vector<uint8_t> bytes2;
    auto y2 = roundtrip(t, y, &bytes2);
    EXPECT_EQ(y2, y) << dtype_name(t);
    EXPECT_EQ(bytes2, bytes) << dtype_name(t);
    EXPECT_LT(rms_err(x, y), rms(x) * (qmax_levels == 127 ? 0.01 : qmax_levels == 15 ? 0.12 : 0.06)) << dtype_name(t);
  }
}

TEST(QuantizeQ8_0, ErrorWithinHalfScale) { check_block32(DType::Q8_0, 127); }
TEST(QuantizeQ4_0, ErrorWithinOneScale) { check_block32(DType::Q4_0, 15); }
TEST(QuantizeQ5_0, ErrorWithinOneScale) { check_block32(DType::Q5_0, 31); }

// K-quants: two-level scales found by search; check the relative RMS error
// against what ggml's reference quantizer achieves on Gaussian data, a max
// error bound relative to the block's range, and that re-quantizing the
// decoded values changes them much less than the first quantization did.
void check_k(DType t, double rel_rms_max) {
  for (uint32_t seed : {11u, 12u, 13u}) {
    auto x = random_row(kN, seed, seed == 13 ? 0.02f : 1.0f, seed != 12);
    auto y = roundtrip(t, x);
    const double e1 = rms_err(x, y);
    EXPECT_LT(e1, rms(x) * rel_rms_max) << dtype_name(t) << " seed " << seed;
    for (int64_t b = 0; b < kN / 256; ++b) {
      float mn = 0, mx = 0;
      for (int j = 0; j < 256; ++j) {
        mn = std::min(mn, x[b * 256 + j]);
        mx = std::max(mx, x[b * 256 + j]);
      }
      for (int j = 0; j < 256; ++j) {
        const size_t i = static_cast<size_t>(b * 256 + j);
        ASSERT_LE(std::fabs(y[i] - x[i]), (mx - mn) * 0.25f + 1e-6f) << dtype_name(t) << " block " << b << " elem " << j;
      }
    }
    auto y2 = roundtrip(t, y);
    EXPECT_LE(rms_err(y, y2), e1 * 0.5 + 1e-7) << dtype_name(t) << ": re-quantizing is not stable";
    auto y3 = roundtrip(t, y2);
    EXPECT_LE(rms_err(y2, y3), e1 * 0.5 + 1e-7) << dtype_name(t);
  }
}

TEST(QuantizeQ4_K, RelativeRmsError) { check_k(DType::Q4_K, 0.11); }
TEST(QuantizeQ5_K, RelativeRmsError) { check_k(DType::Q5_K, 0.055); }
TEST(QuantizeQ6_K, RelativeRmsError) { check_k(DType::Q6_K, 0.03); }

TEST(QuantizeKQuants, ZeroAndConstantRows) {
  for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_0, DType::Q4_0, DType::Q5_0}) {
    std::vector<float> z(512, 0.0f);
    auto y = roundtrip(t, z);
    for (float v : y) ASSERT_EQ(v, 0.0f) << dtype_name(t);
    std::vector<float> c(512, 0.25f);
    y = roundtrip(t, c);
    for (float v : y) ASSERT_NEAR(v, 0.25f, 0.25f * 0.02f) << dtype_name(t);
    std::vector<float> neg(512, -0.125f);
    y = roundtrip(t, neg);
    for (float v : y) ASSERT_NEAR(v, -0.125f, 0.125f * 0.02f) << dtype_name(t);
  }
}

// The levels use the full code range: the extreme element of a Q6_K block
// maps to -32 (scale -128), of a Q8_0 block to ±127 — as ggml's reference.
TEST(QuantizeQ6_K, UsesFullRangeLikeGgml) {
  auto x = random_row(256, 5, 1.0f, false);
  std::vector<uint8_t> q(row_bytes(DType::Q6_K, 256));
  quantize_row_q6_k(x.data(), q.data(), 256);
  BlockQ6_K b;
  std::memcpy(&b, q.data(), sizeof(b));
  int min_scale = 127;
  for (int8_t s : b.scales) min_scale = std::min<int>(min_scale, s);
  EXPECT_EQ(min_scale, -128);  // the sub-block with the largest scale gets -128 (iscale = -128 / max_scale)
}

TEST(QuantizeQ8_0, ExtremeMapsTo127) {
  auto x = random_row(32, 9, 1.0f, false);
  BlockQ8_0 b;
  quantize_row_q8_0(x.data(), &b, 32);
  int amax = 0;
  for (int8_t v : b.qs) amax = std::max(amax, std::abs(int(v)));
  EXPECT_EQ(amax, 127);
}

TEST(QuantizeApi, CanQuantizeTypes) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q5_0, DType::Q8_0, DType::Q4_K, DType::Q5_K,
                  DType::Q6_K})
    EXPECT_TRUE(can_quantize(t)) << dtype_name(t);
  EXPECT_FALSE(can_quantize(DType::Q2_K));
  EXPECT_FALSE(can_quantize(DType::Q8_K));
}

}  // namespace
}  // namespace laya
