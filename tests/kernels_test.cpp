// Kernel tables: every SIMD dequantize_row must equal the scalar reference
// bit for bit, every SIMD dot_row must agree with the scalar one within a
// tight tolerance; the scalar reference is checked against hand-built blocks
// with ggml's layouts; fp16 / bf16 conversions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kernels.h"
#include "core/dtype.h"
#include "core/fp16.h"
#include "float_sweep.h"

namespace laya::cpu {
namespace {

const Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon};
const DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,
                           DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                           DType::Q4_K, DType::Q5_K, DType::Q6_K};

uint32_t idx(DType t) { return static_cast<uint32_t>(t); }

std::vector<const KernelTable*> simd_tables() {
  std::vector<const KernelTable*> v;
  for (Isa isa : kAllIsas) {
    if (isa == Isa::kScalar) continue;
    if (const KernelTable* t = kernels_for(isa)) v.push_back(t);
  }
  return v;
}

const KernelTable& scalar() { return *kernels_for(Isa::kScalar); }

// ---- random rows ---------------------------------------------------------------------

uint16_t rand_scale(std::mt19937& rng, float lo, float hi, bool allow_negative) {
  std::uniform_real_distribution<float> u(lo, hi);
  float v = u(rng);
  if (allow_negative && (rng() & 1)) v = -v;
  return f32_to_fp16(v);
}

void fill_bytes(std::mt19937& rng, uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(rng());
}

// A random row of n elements of type t (random quant bytes, sane fp16 scales).
std::vector<uint8_t> random_row(DType t, int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> buf(row_bytes(t, n) + 64);
  buf.resize(row_bytes(t, n));
  std::uniform_real_distribution<float> uw(-2.0f, 2.0f);
  const int64_t nb = n / dtype_info(t).block_size;
  switch (t) {
    case DType::F32: {
      float* p = reinterpret_cast<float*>(buf.data());
      for (int64_t i = 0; i < n; ++i) p[i] = uw(rng);
      break;
    }
    case DType::F16: {
      uint16_t* p = reinterpret_cast<uint16_t*>(buf.data());
      for (int64_t i = 0; i < n; ++i) p[i] = f32_to_fp16(uw(rng));
      break;
    }
    case DType::BF16: {
      uint16_t* p = reinterpret_cast<uint16_t*>(buf.data());
      for (int64_t i = 0; i < n; ++i) p[i] = f32_to_bf16(uw(rng));
      break;
    }
    case DType::Q8_0: {
      auto* b = reinterpret_cast<BlockQ8_0*>(buf.data());
      for (int64_t i = 0; i < nb; ++i) {
        b[i].d = rand_scale(rng, 1e-4f, 2e-2f, true);
        fill_bytes(rng, reinterpret_cast<uint8_t*>(b[i].qs), sizeof(b[i].qs));
      }
      break;
    }
    case DType::Q4_0: {
      auto* b = reinterpret_cast<BlockQ4_0*>(buf.data());
      for (int64_t i = 0; i < nb; ++i) {
        b[i].d = rand_scale(rng, 1e-3f, 2e-1f, true);
        fill_bytes(rng, b[i].qs, sizeof(b[i].qs));
      }
      break;
    }
    case DType::Q4_1: {
      auto* b = reinterpret_cast<BlockQ4_1*>(buf.data());
      for (int64_t i = 0; i < nb; ++i) {
        b[i].d = rand_scale(rng, 1e-3f, 2e-1f, false);
        b[i].m = rand_scale(rng, 1e-3f, 1.0f, true);
        fill_bytes(rng, b[i].qs, sizeof(b[i].qs));
      }
      break;
    }
    case DType::Q5_0: {
      auto* b = reinterpret_cast<BlockQ5_0*>(buf.data());
      for (int64_t i = 0; i < nb; ++i) {
        b[i].d = rand_scale(rng, 1e-3f, 1e-1f, true);
        fill_bytes(rng, b[i].qh, sizeof(b[i].qh));
        fill_bytes(rng, b[i].qs, sizeof(b[i].qs));
      }
      break;
    }
    case DType::Q5_1: {
      auto* b = reinterpret_cast<BlockQ5_1*>(buf.data());
      for (int64_t i = 0; i < nb; ++i) {
        b[i].d = rand_scale(rng, 1e-3f, 1e-1f, false);
        b[i].m = rand_scale(rng, 1e-3f, 1.0f, true);
        fill_bytes(rng, b[i].qh, sizeof(b[i].qh));
        fill_bytes(rng, b[i].qs, sizeof(b[i].qs));
      }
      break;
    }
    case DType::Q4_K: {
      auto* b = reinterpret_cast<BlockQ4_K*>(buf.data());
      for (int64_t i = 0; i < nb; ++i) {
        b[i].d = rand_scale(rng, 1e-4f, 1e-2f, false);
        b[i].dmin = rand_scale(rng, 1e-4f, 1e-2f, false);
        fill_bytes(rng, b[i].scales, sizeof(b[i].scales));
        fill_bytes(rng, b[i].qs, sizeof(b[i].qs));
      }
      break;
    }
    case DType::Q5_K: {
      auto* b = reinterpret_cast<BlockQ5_K*>(buf.data());
      for (int64_t i = 0; i < nb; ++i) {
        b[i].d = rand_scale(rng, 1e-4f, 1e-2f, false);
        b[i].dmin = rand_scale(rng, 1e-4f, 1e-2f, false);
        fill_bytes(rng, b[i].scales, sizeof(b[i].scales));
        fill_bytes(rng, b[i].qh, sizeof(b[i].qh));
        fill_bytes(rng, b[i].qs, sizeof(b[i].qs));
      }
      break;
    }
    case DType::Q6_K: {
      auto* b = reinterpret_cast<BlockQ6_K*>(buf.data());
      for (int64_t i = 0; i < nb; ++i) {
        fill_bytes(rng, b[i].ql, sizeof(b[i].ql));
        fill_bytes(rng, b[i].qh, sizeof(b[i].qh));
        fill_bytes(rng, reinterpret_cast<uint8_t*>(b[i].scales), sizeof(b[i].scales));
        b[i].d = rand_scale(rng, 1e-5f, 1e-3f, true);
      }
      break;
    }
    default:
      ADD_FAILURE() << "no generator for " << dtype_name(t);
  }
  return buf;
}

std::vector<float> random_x(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = u(rng);
  return x;
}

// Compares two float arrays bit for bit (reports the first difference).
::testing::AssertionResult bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "size " << a.size() << " vs " << b.size();
  for (size_t i = 0; i < a.size(); ++i) {
    if (f32_to_bits(a[i]) != f32_to_bits(b[i])) {
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs reference " << b[i]
                                           << " (bits " << std::hex << f32_to_bits(a[i]) << " vs "
                                           << f32_to_bits(b[i]) << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

int64_t lengths_for(DType t, int k) {
  static const int64_t kBlocks32[] = {32, 64, 96, 160, 256, 768, 4096};
  static const int64_t kBlocks256[] = {256, 512, 768, 1280, 2048, 4096, 4096};
  static const int64_t kPlain[] = {1, 7, 31, 96, 257, 688, 4096, 4099};
  const int64_t bs = dtype_info(t).block_size;
  if (bs == 1) return k < 8 ? kPlain[k] : -1;
  if (k >= 7) return -1;
  return bs == 32 ? kBlocks32[k] : kBlocks256[k];
}

// ---- dispatch ---------------------------------------------------------------------------

TEST(KernelDispatch, TablesAndIsa) {
  ASSERT_NE(kernels_for(Isa::kScalar), nullptr);
  EXPECT_EQ(kernels_for(Isa::kScalar)->isa, Isa::kScalar);
  for (Isa isa : kAllIsas) {
    EXPECT_STRNE(isa_name(isa), "unknown");
    EXPECT_EQ(kernels_for(isa) != nullptr, isa_supported(isa)) << isa_name(isa);
    if (const KernelTable* t = kernels_for(isa)) {
      EXPECT_EQ(t->isa, isa);
      EXPECT_EQ(kernels_for(isa), t) << "tables are built once";
      EXPECT_NE(t->dot_f32, nullptr);
      EXPECT_NE(t->axpy_f32, nullptr);
      for (DType ty : kAllTypes) {
        EXPECT_NE(t->dequantize_row[idx(ty)], nullptr) << isa_name(isa) << " " << dtype_name(ty);
        EXPECT_NE(t->dot_row[idx(ty)], nullptr) << isa_name(isa) << " " << dtype_name(ty);
      }
    }
  }
  EXPECT_TRUE(isa_supported(active_isa()));
  EXPECT_EQ(kernels().isa, active_isa());
  EXPECT_EQ(active_isa(), active_isa());
  std::printf("[ info ] active ISA: %s\n", isa_name(active_isa()));
}

TEST(KernelDispatch, EnvironmentForcesIsa) {
  const char* env = std::getenv("LAYA_ISA");
  if (env == nullptr || *env == '\0') GTEST_SKIP() << "LAYA_ISA not set";
  const std::string v(env);
  for (Isa isa : kAllIsas) {
    if (v == isa_name(isa) && isa_supported(isa)) {
      EXPECT_EQ(active_isa(), isa);
      return;
    }
  }
  // Unknown or unsupported: the best supported one.
  Isa best = Isa::kScalar;
  for (Isa isa : {Isa::kNeon, Isa::kAvx2, Isa::kAvx512})
    if (isa_supported(isa)) best = isa;
  EXPECT_EQ(active_isa(), best);
}

// ---- SIMD vs scalar ----------------------------------------------------------------------

TEST(KernelSimd, DequantizeMatchesScalarBitExact) {
  const auto tables = simd_tables();
  if (tables.empty()) GTEST_SKIP() << "no SIMD table on this CPU/build";
  std::mt19937 rng(1234);
  for (DType t : kAllTypes) {
    for (int k = 0; lengths_for(t, k) > 0; ++k) {
      const int64_t n = lengths_for(t, k);
      const auto row = random_row(t, n, rng);
      std::vector<float> ref(static_cast<size_t>(n), -1.0f);
      scalar().dequantize_row[idx(t)](row.data(), ref.data(), n);
      for (const KernelTable* tab : tables) {
        SCOPED_TRACE(std::string(isa_name(tab->isa)) + " " + dtype_name(t) + " n=" + std::to_string(n));
        std::vector<float> got(static_cast<size_t>(n), -2.0f);
        tab->dequantize_row[idx(t)](row.data(), got.data(), n);
        EXPECT_TRUE(bits_equal(got, ref));
      }
    }
  }
}

TEST(KernelSimd, DotRowMatchesScalar) {
  std::mt19937 rng(99);
  const auto tables = simd_tables();
  for (DType t : kAllTypes) {
    for (int k = 0; lengths_for(t, k) > 0; ++k) {
      const int64_t n = lengths_for(t, k);
      for (int rep = 0; rep < 3; ++rep) {
        const auto row = random_row(t, n, rng);
        const auto x = random_x(n, rng);
        std::vector<float> w(static_cast<size_t>(n));
        scalar().dequantize_row[idx(t)](row.data(), w.data(), n);
        double exact = 0.0, mag = 0.0;
        for (int64_t i = 0; i < n; ++i) {
          exact += static_cast<double>(w[i]) * x[i];
          mag += std::fabs(static_cast<double>(w[i]) * x[i]);
        }
        const float ref = scalar().dot_row[idx(t)](row.data(), x.data(), n);
        // The scalar dot accumulates in double: it is the exact sum rounded once.
        EXPECT_NEAR(ref, exact, 1e-7 * mag + 1e-30) << dtype_name(t) << " n=" << n;
        const double tol = 1e-5 * mag + 1e-30;
        for (const KernelTable* tab : tables) {
          const float got = tab->dot_row[idx(t)](row.data(), x.data(), n);
          EXPECT_NEAR(got, ref, tol) << isa_name(tab->isa) << " " << dtype_name(t) << " n=" << n;
        }
      }
    }
  }
}

TEST(KernelSimd, F16AllValuesMatchScalar) {
  // Every finite half (NaNs: only NaN-ness is compared; hardware may quieten them).
  std::vector<uint16_t> all(65536);
  for (int i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  for (DType t : {DType::F16, DType::BF16}) {
    std::vector<float> ref(65536);
    scalar().dequantize_row[idx(t)](all.data(), ref.data(), 65536);
    for (const KernelTable* tab : simd_tables()) {
      std::vector<float> got(65536);
      tab->dequantize_row[idx(t)](all.data(), got.data(), 65536);
      int bad = 0;
      for (int i = 0; i < 65536; ++i) {
        if (std::isnan(ref[i])) {
          if (!std::isnan(got[i])) ++bad;
        } else if (f32_to_bits(got[i]) != f32_to_bits(ref[i])) {
          if (bad++ < 5) ADD_FAILURE() << isa_name(tab->isa) << " " << dtype_name(t) << " 0x" << std::hex << i;
        }
      }
      EXPECT_EQ(bad, 0) << isa_name(tab->isa) << " " << dtype_name(t);
    }
  }
}

TEST(KernelSimd, DotF32AndAxpy) {
  std::mt19937 rng(7);
  for (int64_t n : {1, 3, 8, 15, 16, 17, 33, 64, 100, 255, 1000, 4096, 4103}) {
    const auto a = random_x(n, rng);
    const auto b = random_x(n, rng);
    double exact = 0.0, mag = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      exact += static_cast<double>(a[i]) * b[i];
      mag += std::fabs(static_cast<double>(a[i]) * b[i]);
    }
    const float alpha = 0.37f;
    std::vector<float> yref = b;
    scalar().axpy_f32(alpha, a.data(), yref.data(), n);
    for (Isa isa : kAllIsas) {
      const KernelTable* tab = kernels_for(isa);
      if (tab == nullptr) continue;
      EXPECT_NEAR(tab->dot_f32(a.data(), b.data(), n), exact, 1e-5 * mag + 1e-30) << isa_name(isa) << " n=" << n;
      std::vector<float> y = b;
      y.push_back(12345.0f);  // must not be touched
      tab->axpy_f32(alpha, a.data(), y.data(), n);
      EXPECT_EQ(y.back(), 12345.0f) << isa_name(isa) << " n=" << n;
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_NEAR(y[i], yref[i], 2e-7 * (std::fabs(yref[i]) + std::fabs(alpha * a[i])) + 1e-30)
            << isa_name(isa) << " n=" << n << " i=" << i;
      }
    }
  }
}

TEST(KernelSimd, DispatchHelpersUseActiveTable) {
  std::mt19937 rng(5);
  const int64_t n = 512;
  const auto row = random_row(DType::Q4_K, n, rng);
  const auto x = random_x(n, rng);
  std::vector<float> a(n), b(n);
  dequantize_row(DType::Q4_K, row.data(), a.data(), n);
  kernels().dequantize_row[idx(DType::Q4_K)](row.data(), b.data(), n);
  EXPECT_TRUE(bits_equal(a, b));
  EXPECT_EQ(dot_row(DType::Q4_K, row.data(), x.data(), n),
            kernels().dot_row[idx(DType::Q4_K)](row.data(), x.data(), n));
}

// MLX affine rows (random packed values, scales and biases of every type):
// every SIMD table's dequantization equals the scalar one (F16 / BF16 scales:
// s·q is exact, so a fused s·q + z rounds as the reference's product then
// sum; F32: within that product's rounding) and its dot product agrees within
// the float bound of DotRowMatchesScalar. tests/mlx_quant_test.cpp holds the
// scalar one to the format's formula.
TEST(KernelSimd, AffineMatchesScalar) {
  constexpr int64_t n = 384;  // a multiple of every group size
  std::mt19937 rng(41);
  const auto x = random_x(n, rng);
  std::vector<float> x4(n), sum32(n / 32);
  affine_prepare(x.data(), n, x4.data(), sum32.data());
  const AffineX ax{x.data(), x4.data(), sum32.data()};
  std::uniform_real_distribution<float> us(0.001f, 0.05f), uz(-0.2f, 0.2f);
  for (int bits : {2, 3, 4, 5, 6, 8}) {
    for (int group : {32, 64, 128}) {
      for (DType type : {DType::F16, DType::BF16, DType::F32}) {
        std::vector<uint8_t> q(static_cast<size_t>(n * bits / 8)), sb(static_cast<size_t>(n / group * 4)),
            zb(sb.size());
        fill_bytes(rng, q.data(), q.size());
        for (int64_t g = 0; g < n / group; ++g) {
          const float s = us(rng), z = uz(rng);
          if (type == DType::F32) {
            std::memcpy(sb.data() + g * 4, &s, 4);
            std::memcpy(zb.data() + g * 4, &z, 4);
          } else {
            const uint16_t hs = type == DType::F16 ? f32_to_fp16(s) : f32_to_bf16(s);
            const uint16_t hz = type == DType::F16 ? f32_to_fp16(z) : f32_to_bf16(z);
            std::memcpy(sb.data() + g * 2, &hs, 2);
            std::memcpy(zb.data() + g * 2, &hz, 2);
          }
        }
        const AffineRow row{q.data(), sb.data(), zb.data(), type, group};
        std::vector<float> want(n);
        scalar().affine_dequantize[bits](row, want.data(), n);
        const float ref = scalar().affine_dot[bits](row, ax, n);
        double mag = 0;
        for (int64_t i = 0; i < n; ++i) mag += std::fabs(static_cast<double>(want[i]) * x[i]);
        for (const KernelTable* tab : simd_tables()) {
          SCOPED_TRACE(std::string(isa_name(tab->isa)) + " bits " + std::to_string(bits) + " group " +
                       std::to_string(group) + " " + dtype_name(type));
          std::vector<float> got(n);
          tab->affine_dequantize[bits](row, got.data(), n);
          if (type != DType::F32) {
            EXPECT_TRUE(bits_equal(got, want));
          }
          // F32: half an ulp of |s·q| <= 0.05 · 255.
          for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], want[i], 1e-6) << i;
          EXPECT_NEAR(tab->affine_dot[bits](row, ax, n), ref, 1e-5 * mag + 1e-30);
        }
      }
    }
  }
}

// ---- the families' elementwise ops and LayerNorm (KernelTable::scale_f32 ..) -----------------
// Every table against the scalar one, at lengths around each vector width
// (the tails go through padded copies) and at an odd offset; one float past
// the end must stay untouched.
const int64_t kOpLengths[] = {0, 1, 3, 4, 7, 8, 15, 16, 17, 31, 33, 100, 1001};

TEST(KernelOps, ScaleAndMulEqualScalarBitExact) {
  // One rounded product per value, on every ISA: the same bits.
  std::mt19937 rng(31);
  for (int64_t n : kOpLengths) {
    auto y0 = random_x(n + 2, rng), x = random_x(n + 2, rng);
    y0[1] = -0.0f;
    if (n > 2) x[3] = std::numeric_limits<float>::infinity();
    std::vector<float> ys = y0, ym = y0;
    scalar().scale_f32(ys.data() + 1, n, -1.7f);
    scalar().mul_f32(ym.data() + 1, x.data() + 1, n);
    for (Isa isa : kAllIsas) {
      const KernelTable* tab = kernels_for(isa);
      if (tab == nullptr) continue;
      SCOPED_TRACE(std::string(isa_name(isa)) + " n=" + std::to_string(n));
      std::vector<float> y = y0;
      tab->scale_f32(y.data() + 1, n, -1.7f);
      EXPECT_TRUE(bits_equal(y, ys));
      y = y0;
      tab->mul_f32(y.data() + 1, x.data() + 1, n);
      EXPECT_TRUE(bits_equal(y, ym));
    }
  }
}

// GELU on a sweep of ~63,000 inputs: steps of 1/2048 over [-12, 12]; ±0;
// ±2^-149 .. ±2^127 (tiny, denormal, large); NaN, +inf; steps of 1e-4
// around x = ±5.3, where tanh(u) saturates in float (|u| ~ 9), and around
// x = -10.2, where e^(-2u) passes exp_poly::kMaxArg. The SIMD tables compute
// x / (1 + e^(-2u)) with exp_poly.h's exp, the scalar one 0.5·x·(1 + tanh(u))
// with std::tanh, both in float. Each table is held to a double-precision
// formula written here (its own constants, in the sigmoid form: no
// cancellation) and the SIMD tables to the scalar one, with one bound:
//   |got - want| <= 1e-6·|want| + 2^-24·|x| + 2^-149:
// 1e-6 relative, plus what a float 1 + tanh(u) has where u is very negative
// (an ulp of 1, 2^-23, times 0.5·|x|: there the scalar table has no more),
// plus the step of a denormal result.
// Measured worst (x86-64 glibc; AVX2 and AVX-512 measure the same), over
// normal outputs: SIMD vs double 4.3e-7 relative where x >= -2 (where the
// value is at least 4 % of |x|) and 0.21 of the bound overall; scalar vs
// double 9.1e-7 and 0.30; SIMD vs scalar 0.32 of the bound (at x = -1.98,
// the scalar table's own error). Mutations: 0.044715 -> 0.04472 (kGeluCubic)
// fails every table at 17x the bound; the exp's 1/24 -> 1/25 fails at 20x;
// 1/120 -> 1/121 (2e-7 in e^f, float's own noise) passes at 0.48.
std::vector<float> gelu_sweep() {
  std::vector<float> v;
  for (int i = -12 * 2048; i <= 12 * 2048; ++i) v.push_back(static_cast<float>(i) / 2048.0f);
  test::append_binades(&v);
  for (float c : {5.3f, -5.3f, -10.2f})
    for (int k = -2000; k <= 2000; ++k) v.push_back(c + static_cast<float>(k) * 1e-4f);
  v.push_back(0.0f);
  v.push_back(-0.0f);
  v.push_back(std::numeric_limits<float>::infinity());
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  return v;
}

// gelu_tanh(x) in double: x · sigmoid(2u) (= 0.5·x·(1 + tanh(u))).
double gelu_double(double x) {
  const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return x / (1.0 + std::exp(-2.0 * u));
}

TEST(KernelOps, GeluMatchesDoubleAndScalar) {
  const std::vector<float> x = gelu_sweep();
  std::vector<float> ref = x;
  scalar().gelu_f32(ref.data(), static_cast<int64_t>(ref.size()));
  for (Isa isa : kAllIsas) {
    const KernelTable* tab = kernels_for(isa);
    if (tab == nullptr) continue;
    std::vector<float> got = x;
    got.push_back(12345.0f);  // must not be touched
    tab->gelu_f32(got.data(), static_cast<int64_t>(x.size()));
    EXPECT_EQ(got.back(), 12345.0f) << isa_name(isa);
    // Worst relative error where x >= -2 (the value is >= 4 % of |x|), worst
    // fraction of the bound, against the double formula and the scalar table.
    double rel = 0, of_bound = 0, of_bound_scalar = 0;
    float rel_x = 0;
    int bad = 0;
    auto check = [&](size_t i, double want, const char* against, double* worst) {
      const double xi = x[i], g = got[i];
      const double err = std::fabs(g - want);
      const double bound = 1e-6 * std::fabs(want) + std::ldexp(std::fabs(xi), -24) + 0x1p-149;  // + a denormal's step
      if (std::fabs(want) >= std::numeric_limits<float>::min()) *worst = std::max(*worst, err / bound);
      if (!(err <= bound) && bad++ < 5)
        ADD_FAILURE() << isa_name(isa) << " gelu(" << xi << ") = " << g << ", " << against << " " << want;
    };
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i])) {
        EXPECT_TRUE(std::isnan(got[i])) << isa_name(isa);
        continue;
      }
      if (std::isinf(x[i])) {
        EXPECT_EQ(got[i], x[i]) << isa_name(isa);
        continue;
      }
      const double want = gelu_double(x[i]);
      check(i, want, "double", &of_bound);
      if (x[i] >= -2.0f && std::fabs(want) >= std::numeric_limits<float>::min()) {
        const double r = std::fabs(got[i] - want) / std::fabs(want);
        if (r > rel) rel = r, rel_x = x[i];
      }
      if (isa != Isa::kScalar) check(i, ref[i], "scalar", &of_bound_scalar);
      // A zero keeps the sign of x (the tanh form's -0 for large negative x).
      if (got[i] == 0 && x[i] != 0 && std::signbit(got[i]) != std::signbit(x[i]) && bad++ < 5)
        ADD_FAILURE() << isa_name(isa) << " gelu(" << x[i] << ") = " << got[i];
    }
    EXPECT_EQ(bad, 0) << isa_name(isa);
    std::printf("[ measure  ] gelu %s over %zu inputs: vs double %.2e relative where x >= -2, %.2f of the bound; "
                "vs scalar %.2f of the bound (worst relative at x = %g)\n",
                isa_name(isa), x.size(), rel, of_bound, of_bound_scalar, static_cast<double>(rel_x));
  }
}

// LayerNorm rows with a mean far from 0 (the two passes must not lose it):
// the SIMD tables sum in double as the reference does, so mean and 1/std
// round to the same floats but in rare ties; the output differs by the fused
// multiply-add (half an ulp of the row's largest term). Bound: 2^-22 of the
// row's largest |ref| (2 ulps at 1.0, 2.4e-7); measured worst 1.1e-7 of it
// (AVX2, AVX-512).
TEST(KernelOps, LayerNormMatchesScalar) {
  std::mt19937 rng(37);
  double worst[4] = {};
  for (int64_t n : {1, 3, 8, 17, 64, 100, 1001}) {
    for (float mean : {0.0f, 50.0f, -3000.0f}) {
      auto x = random_x(n + 1, rng), w = random_x(n, rng), b = random_x(n, rng);
      for (float& v : x) v += mean;
      std::vector<float> ref(static_cast<size_t>(n));
      scalar().layer_norm_f32(x.data() + 1, w.data(), b.data(), n, 1e-5f, ref.data());
      double scale = 0;
      for (float r : ref) scale = std::max(scale, std::fabs(static_cast<double>(r)));
      for (Isa isa : kAllIsas) {
        const KernelTable* tab = kernels_for(isa);
        if (tab == nullptr || isa == Isa::kScalar) continue;
        std::vector<float> got(static_cast<size_t>(n) + 1, 12345.0f);
        tab->layer_norm_f32(x.data() + 1, w.data(), b.data(), n, 1e-5f, got.data());
        EXPECT_EQ(got.back(), 12345.0f) << isa_name(isa);
        for (int64_t i = 0; i < n; ++i) {
          const double err = std::fabs(static_cast<double>(got[i]) - ref[i]);
          worst[static_cast<int>(isa)] = std::max(worst[static_cast<int>(isa)], err / scale);
          ASSERT_LE(err, std::ldexp(scale, -22)) << isa_name(isa) << " n=" << n << " mean=" << mean << " i=" << i;
        }
      }
    }
  }
  for (const KernelTable* tab : simd_tables())
    std::printf("[ measure  ] layer_norm %s vs scalar: max err %.2e of the row's largest value\n", isa_name(tab->isa),
                worst[static_cast<int>(tab->isa)]);
}

// ---- the scalar reference against hand-built blocks (ggml layouts) ------------------------

std::vector<float> deq(DType t, const void* src, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  scalar().dequantize_row[idx(t)](src, y.data(), n);
  return y;
}

TEST(KernelReference, Q8_0AndQ4_0Layout) {
  BlockQ8_0 b8{};
  b8.d = f32_to_fp16(0.5f);
  for (int j = 0; j < 32; ++j) b8.qs[j] = static_cast<int8_t>(j * 8 - 128);
  auto y = deq(DType::Q8_0, &b8, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.5f * (j * 8 - 128)) << j;

  BlockQ4_0 b4{};
  b4.d = f32_to_fp16(0.25f);
  for (int j = 0; j < 16; ++j) b4.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  y = deq(DType::Q4_0, &b4, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.25f * (j - 8)) << j;                // low nibbles: elements 0..15
    EXPECT_EQ(y[16 + j], 0.25f * ((15 - j) - 8)) << j;    // high nibbles: 16..31
  }

  BlockQ4_1 b41{};
  b41.d = f32_to_fp16(0.5f);
  b41.m = f32_to_fp16(-1.0f);
  for (int j = 0; j < 16; ++j) b41.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  y = deq(DType::Q4_1, &b41, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * j - 1.0f);
    EXPECT_EQ(y[16 + j], 0.5f * (15 - j) - 1.0f);
  }
}

TEST(KernelReference, Q5Layout) {
  BlockQ5_0 b{};
  b.d = f32_to_fp16(1.0f);
  const uint32_t qh = 0xA5C3F00Fu;
  std::memcpy(b.qh, &qh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>((j * 7) & 15) | static_cast<uint8_t>(((j * 3) & 15) << 4);
  auto y = deq(DType::Q5_0, &b, 32);
  for (int j = 0; j < 16; ++j) {
    const int lo = ((j * 7) & 15) | (((qh >> j) & 1) << 4);
    const int hi = ((j * 3) & 15) | (((qh >> (j + 16)) & 1) << 4);
    EXPECT_EQ(y[j], static_cast<float>(lo - 16)) << j;
    EXPECT_EQ(y[16 + j], static_cast<float>(hi - 16)) << j;
  }
  BlockQ5_1 b1{};
  b1.d = f32_to_fp16(2.0f);
  b1.m = f32_to_fp16(0.5f);
  std::memcpy(b1.qh, &qh, 4);
  std::memcpy(b1.qs, b.qs, 16);
  y = deq(DType::Q5_1, &b1, 32);
  for (int j = 0; j < 16; ++j) {
    const int lo = ((j * 7) & 15) | (((qh >> j) & 1) << 4);
    const int hi = ((j * 3) & 15) | (((qh >> (j + 16)) & 1) << 4);
    EXPECT_EQ(y[j], 2.0f * lo + 0.5f) << j;
    EXPECT_EQ(y[16 + j], 2.0f * hi + 0.5f) << j;
  }
}

// Packs 8 six-bit scales and mins the way ggml's quantize_row_q4_K does.
void pack_scales_k4(const int sc[8], const int mn[8], uint8_t out[12]) {
  for (int j = 0; j < 4; ++j) {
    out[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    out[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
    out[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
}

TEST(KernelReference, Q4KAndQ5KLayout) {
  const int sc[8] = {1, 63, 17, 40, 5, 33, 62, 48};
  const int mn[8] = {0, 9, 63, 21, 50, 16, 2, 37};
  const float d = 0.0078125f, dmin = 0.001953125f;  // exact in fp16
  BlockQ4_K b{};
  b.d = f32_to_fp16(d);
  b.dmin = f32_to_fp16(dmin);
  pack_scales_k4(sc, mn, b.scales);
  std::mt19937 rng(3);
  fill_bytes(rng, b.qs, sizeof(b.qs));
  BlockQ5_K b5{};
  b5.d = b.d;
  b5.dmin = b.dmin;
  std::memcpy(b5.scales, b.scales, 12);
  std::memcpy(b5.qs, b.qs, sizeof(b.qs));
  fill_bytes(rng, b5.qh, sizeof(b5.qh));
  const auto y = deq(DType::Q4_K, &b, 256);
  const auto y5 = deq(DType::Q5_K, &b5, 256);
  for (int jj = 0; jj < 4; ++jj) {
    for (int l = 0; l < 32; ++l) {
      const int qlo = b.qs[32 * jj + l] & 15, qhi = b.qs[32 * jj + l] >> 4;
      const int s0 = 2 * jj, s1 = 2 * jj + 1;
      EXPECT_EQ(y[64 * jj + l], d * sc[s0] * qlo - dmin * mn[s0]);
      EXPECT_EQ(y[64 * jj + 32 + l], d * sc[s1] * qhi - dmin * mn[s1]);
      const int h0 = (b5.qh[l] >> (2 * jj)) & 1, h1 = (b5.qh[l] >> (2 * jj + 1)) & 1;
      EXPECT_EQ(y5[64 * jj + l], d * sc[s0] * (qlo + 16 * h0) - dmin * mn[s0]);
      EXPECT_EQ(y5[64 * jj + 32 + l], d * sc[s1] * (qhi + 16 * h1) - dmin * mn[s1]);
    }
  }
}

TEST(KernelReference, Q6KLayout) {
  BlockQ6_K b{};
  std::mt19937 rng(4);
  fill_bytes(rng, b.ql, sizeof(b.ql));
  fill_bytes(rng, b.qh, sizeof(b.qh));
  for (int k = 0; k < 16; ++k) b.scales[k] = static_cast<int8_t>(k * 13 - 100);
  const float d = 0.0009765625f;
  b.d = f32_to_fp16(d);
  const auto y = deq(DType::Q6_K, &b, 256);
  // Element e: half h = e / 128, r = e % 128, quarter g = r / 32, l = r % 32;
  // low 4 bits from ql[64h + l + 32*(g&1)] (nibble g>>1), high 2 bits from
  // qh[32h + l] bits 2g..2g+1, scale scales[8h + l/16 + 2g].
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, r = e % 128, g = r / 32, l = r % 32;
    const uint8_t qlb = b.ql[64 * h + l + 32 * (g & 1)];
    const int low = (g >> 1) ? (qlb >> 4) : (qlb & 15);
    const int high = (b.qh[32 * h + l] >> (2 * g)) & 3;
    const int q = (low | (high << 4)) - 32;
    const int s = b.scales[8 * h + l / 16 + 2 * g];
    EXPECT_EQ(y[e], d * static_cast<float>(s) * static_cast<float>(q)) << e;
  }
}

TEST(KernelReference, PlainFloats) {
  const float f[3] = {1.5f, -2.25f, 3.0e-5f};
  EXPECT_EQ(deq(DType::F32, f, 3), std::vector<float>(f, f + 3));
  const uint16_t h[3] = {0x3c00, 0xc000, 0x0001};
  const auto y = deq(DType::F16, h, 3);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(y[2], std::ldexp(1.0f, -24));
  const uint16_t bf[2] = {0x3f80, 0xc0a0};
  const auto yb = deq(DType::BF16, bf, 2);
  EXPECT_EQ(yb[0], 1.0f);
  EXPECT_EQ(yb[1], -5.0f);
}

// ---- fp16 / bf16 conversions -------------------------------------------------------------

TEST(Fp16Conversion, KnownValues) {
  EXPECT_EQ(fp16_to_f32(0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(fp16_to_f32(0x8000)));
  EXPECT_EQ(fp16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_f32(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(fp16_to_f32(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(fp16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(fp16_to_f32(0x7c00)));
  EXPECT_TRUE(std::isnan(fp16_to_f32(0x7e00)));
  EXPECT_EQ(f32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_fp16(65520.0f), 0x7c00);  // rounds to inf
  EXPECT_EQ(f32_to_fp16(1e10f), 0x7c00);
  EXPECT_EQ(f32_to_fp16(-1e10f), 0xfc00);
  EXPECT_EQ(f32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);         // tie -> even (0)
  EXPECT_EQ(f32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie -> even
  EXPECT_EQ(f32_to_fp16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(f32_to_fp16(std::nanf("")) & 0x7c00, 0x7c00);
  EXPECT_NE(f32_to_fp16(std::nanf("")) & 0x03ff, 0);
}

TEST(Fp16Conversion, RoundTripAllHalves) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float f = fp16_to_f32(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_f32(f32_to_fp16(f)))) << std::hex << i;
      continue;
    }
    ASSERT_EQ(f32_to_fp16(f), h) << std::hex << i;
  }
}

TEST(Fp16Conversion, RoundsToNearestEven) {
  // For random floats in the half range, the result must be one of the two
  // neighbouring halves and the nearer one (ties to even mantissa).
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> ub(0, 0x477fefffu);  // |f| < 65520
  for (int k = 0; k < 200000; ++k) {
    const uint32_t bits = ub(rng) | ((rng() & 1u) << 31);
    const float f = bits_to_f32(bits);
    const uint16_t h = f32_to_fp16(f);
    const double err = std::fabs(static_cast<double>(fp16_to_f32(h)) - f);
    for (int delta : {-1, 1}) {
      const uint16_t h2 = static_cast<uint16_t>((h & 0x7fff) + delta) | (h & 0x8000);
      if ((h & 0x7fff) == 0 && delta < 0) continue;
      if ((h2 & 0x7fff) >= 0x7c00) continue;
      const double err2 = std::fabs(static_cast<double>(fp16_to_f32(h2)) - f);
      ASSERT_LE(err, err2) << f;
      if (err == err2) {
        ASSERT_EQ(h & 1, 0) << "tie not to even: " << f;
      }
    }
  }
}

TEST(Fp16Conversion, Bf16) {
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f818000u)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3f808001u)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(bits_to_f32(0x7f800001u)))));  // NaN stays NaN
  for (uint32_t i = 0; i < 65536; ++i) {
    const float f = bf16_to_f32(static_cast<uint16_t>(i));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), i) << std::hex << i;
  }
}

}  // namespace
}  // namespace laya::cpu
