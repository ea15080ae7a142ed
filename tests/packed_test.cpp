// Packed Q8_0 layout and its VNNI matvec against the file-layout scalar kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "backend/cpu/kernels.h"
#include "backend/cpu/packed.h"
#include "core/fp16.h"

namespace laya::cpu {
namespace {

struct Fixture {
  std::vector<uint8_t> file;  // Q8_0 rows
  Tensor t;
};

// f.file holds rows × cols values of `type` in the file layout.
Fixture finish(Fixture f, DType type, int64_t rows, int64_t cols) {
  f.t.type = type;
  f.t.n_dims = 2;
  f.t.ne[0] = cols;
  f.t.ne[1] = rows;
  f.t.data = f.file.data();
  f.t.nbytes = f.file.size();
  return f;
}

Fixture random_q8(int64_t rows, int64_t cols, std::mt19937& rng) {
  Fixture f;
  const int64_t nb = cols / 32;
  f.file.resize(static_cast<size_t>(rows * nb) * sizeof(BlockQ8_0));
  std::uniform_int_distribution<int> q(-127, 127);
  std::uniform_real_distribution<float> d(1e-4f, 2e-2f);
  auto* blk = reinterpret_cast<BlockQ8_0*>(f.file.data());
  for (int64_t i = 0; i < rows * nb; ++i) {
    blk[i].d = f32_to_fp16(d(rng));
    for (auto& v : blk[i].qs) v = static_cast<int8_t>(q(rng));
  }
  return finish(std::move(f), DType::Q8_0, rows, cols);
}

struct XBuf {
  std::vector<int8_t> hi, lo;
  std::vector<float> d;
  std::vector<int32_t> corr;
  std::vector<float> sum;
  std::vector<int32_t> corr16;
  QuantizedX q;
  explicit XBuf(int64_t cols) : hi(cols), lo(cols), d(cols / 32), corr(cols / 32), sum(cols / 32), corr16(cols / 16) {
    q.hi = hi.data(); q.lo = lo.data(); q.d = d.data(); q.corr = corr.data(); q.sum = sum.data(); q.corr16 = corr16.data();
  }
};

Fixture random_q6k(int64_t rows, int64_t cols, std::mt19937& rng) {
  Fixture f;
  const int64_t nb = cols / 256;
  f.file.resize(static_cast<size_t>(rows * nb) * sizeof(BlockQ6_K));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> d(1e-4f, 2e-3f);
  auto* blk = reinterpret_cast<BlockQ6_K*>(f.file.data());
  for (int64_t i = 0; i < rows * nb; ++i) {
    blk[i].d = f32_to_fp16(d(rng));
    for (auto& v : blk[i].scales) v = static_cast<int8_t>(byte(rng) - 128);
    for (auto& v : blk[i].ql) v = static_cast<uint8_t>(byte(rng));
    for (auto& v : blk[i].qh) v = static_cast<uint8_t>(byte(rng));
  }
  return finish(std::move(f), DType::Q6_K, rows, cols);
}

Fixture random_q5_0(int64_t rows, int64_t cols, std::mt19937& rng) {
  Fixture f;
  const int64_t nb = cols / 32;
  f.file.resize(static_cast<size_t>(rows * nb) * sizeof(BlockQ5_0));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> d(1e-4f, 2e-2f);
  auto* blk = reinterpret_cast<BlockQ5_0*>(f.file.data());
  for (int64_t i = 0; i < rows * nb; ++i) {
    blk[i].d = f32_to_fp16(d(rng));
    for (auto& v : blk[i].qh) v = static_cast<uint8_t>(byte(rng));
    for (auto& v : blk[i].qs) v = static_cast<uint8_t>(byte(rng));
  }
  return finish(std::move(f), DType::Q5_0, rows, cols);
}

Fixture random_q4k(int64_t rows, int64_t cols, std::mt19937& rng) {
  Fixture f;
  const int64_t nb = cols / 256;
  f.file.resize(static_cast<size_t>(rows * nb) * sizeof(BlockQ4_K));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> d(1e-4f, 2e-3f);
  auto* blk = reinterpret_cast<BlockQ4_K*>(f.file.data());
  for (int64_t i = 0; i < rows * nb; ++i) {
    blk[i].d = f32_to_fp16(d(rng));
    blk[i].dmin = f32_to_fp16(d(rng));
    for (auto& v : blk[i].scales) v = static_cast<uint8_t>(byte(rng));
    for (auto& v : blk[i].qs) v = static_cast<uint8_t>(byte(rng));
  }
  return finish(std::move(f), DType::Q4_K, rows, cols);
}

// Packs f, then checks (1) every packed group dequantizes to the file
// layout's values and (2) the scalar and fastest packed matvec (`scalar`,
// packed_matvec_for) against the float dot of the dequantized weights, within
// the two-term activation quantization bound.
void check_dequantize_and_matvec(const Fixture& f, PackedMatvecFn scalar, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  const DType type = f.t.type;
  const int64_t rows = f.t.rows(), cols = f.t.cols();
  std::vector<uint8_t> buf(packed_bytes(f.t) + 64);
  uint8_t* p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t{63});
  PackedMatrix m;
  pack(f.t, p, &m);
  const KernelTable& ref = *kernels_for(Isa::kScalar);
  std::vector<float> grp(static_cast<size_t>(16 * cols)), w(static_cast<size_t>(cols));
  for (int64_t g = 0; g < rows / 16; ++g) {
    dequantize_group(m, g, grp.data());
    for (int64_t r = 0; r < 16; ++r) {
      ref.dequantize_row[static_cast<uint32_t>(type)](f.t.row(g * 16 + r), w.data(), cols);
      for (int64_t k = 0; k < cols; ++k)
        ASSERT_NEAR(grp[static_cast<size_t>(r * cols + k)], w[static_cast<size_t>(k)], 1e-6f * std::fabs(w[static_cast<size_t>(k)]) + 1e-9f)
            << dtype_name(type) << " row " << g * 16 + r << " k " << k;
    }
  }
  std::vector<float> x(static_cast<size_t>(cols));
  for (auto& v : x) v = nd(rng);
  XBuf xs(cols), xf(cols);
  quantize_x(x.data(), cols, &xs.q);
  quantize_x_best()(x.data(), cols, &xf.q);
  std::vector<float> ys(static_cast<size_t>(rows)), yv(static_cast<size_t>(rows));
  scalar(m, 0, rows / 16, xs.q, ys.data());
  PackedMatvecFn fast = packed_matvec_for(type);
  if (fast) fast(m, 0, rows / 16, xf.q, yv.data());
  for (int64_t r = 0; r < rows; ++r) {
    ref.dequantize_row[static_cast<uint32_t>(type)](f.t.row(r), w.data(), cols);
    double want = 0, bound = 0;
    for (int64_t b = 0; b < cols / 32; ++b) {
      double amax = 0;
      for (int k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(static_cast<double>(x[static_cast<size_t>(b * 32 + k)])));
      for (int k = 0; k < 32; ++k) {
        const size_t i = static_cast<size_t>(b * 32 + k);
        want += static_cast<double>(w[i]) * x[i];
        bound += (std::fabs(w[i]) + 0.1) * amax / (127.0 * 256.0) + std::fabs(w[i] * x[i]) * 1e-6;
      }
    }
    EXPECT_NEAR(ys[static_cast<size_t>(r)], want, 1.01 * bound) << dtype_name(type) << " scalar row " << r;
    if (fast) {
      EXPECT_NEAR(yv[static_cast<size_t>(r)], want, 1.01 * bound) << dtype_name(type) << " vnni row " << r;
    }
  }
}

TEST(KernelPacked, Q4KDequantizeAndMatvec) {
  std::mt19937 rng(3);
  for (int64_t cols : {256, 768}) check_dequantize_and_matvec(random_q4k(32, cols, rng), packed_matvec_q4k_scalar, rng);
}

TEST(KernelPacked, Q5_0DequantizeAndMatvec) {
  std::mt19937 rng(5);
  for (int64_t cols : {32, 96, 896}) check_dequantize_and_matvec(random_q5_0(32, cols, rng), packed_matvec_q5_0_scalar, rng);
}

TEST(KernelPacked, Q6KDequantizeAndMatvec) {
  std::mt19937 rng(4);
  for (int64_t cols : {256, 768}) check_dequantize_and_matvec(random_q6k(32, cols, rng), packed_matvec_q6k_scalar, rng);
}

TEST(KernelPacked, TransposedDequantizeEqualsRowMajor) {
#if defined(LAYA_HAVE_X86)
  if (!packed_matvec_best()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  std::mt19937 rng(9);
  for (int which = 0; which < 4; ++which) {
    Fixture f = which == 0 ? random_q8(32, 512, rng)
              : which == 1 ? random_q4k(32, 512, rng)
              : which == 2 ? random_q6k(32, 512, rng)
                           : random_q5_0(32, 512, rng);
    std::vector<uint8_t> buf(packed_bytes(f.t) + 64);
    uint8_t* p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t{63});
    PackedMatrix m;
    pack(f.t, p, &m);
    std::vector<float> rm(16 * 512), wt(16 * 512);
    for (int64_t g = 0; g < 2; ++g) {
      dequantize_group(m, g, rm.data());
      dequantize_group_t_avx512(m, g, wt.data());
      for (int64_t r = 0; r < 16; ++r)
        for (int64_t k = 0; k < 512; ++k)
          ASSERT_NEAR(wt[static_cast<size_t>(k * 16 + r)], rm[static_cast<size_t>(r * 512 + k)],
                      1e-6f * std::fabs(rm[static_cast<size_t>(r * 512 + k)]) + 1e-9f)
              << dtype_name(f.t.type) << " row " << r << " k " << k;
    }
  }
#else
  GTEST_SKIP() << "x86 only";
#endif
}

TEST(KernelPacked, DequantizeGroupEqualsFileLayout) {
  std::mt19937 rng(1);
  Fixture f = random_q8(48, 96, rng);
  std::vector<uint8_t, std::allocator<uint8_t>> buf(packed_bytes(f.t) + 64);
  uint8_t* p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t{63});
  PackedMatrix m;
  pack_q8_0(f.t, p, &m);
  std::vector<float> got(16 * 96), want(96);
  for (int64_t g = 0; g < 3; ++g) {
    dequantize_group(m, g, got.data());
    for (int64_t r = 0; r < 16; ++r) {
      kernels_for(Isa::kScalar)->dequantize_row[static_cast<uint32_t>(DType::Q8_0)](f.t.row(g * 16 + r), want.data(), 96);
      for (int k = 0; k < 96; ++k) ASSERT_EQ(got[static_cast<size_t>(r * 96 + k)], want[static_cast<size_t>(k)]);
    }
  }
}

TEST(KernelPacked, MatvecMatchesFloatReference) {
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int64_t cols : {32, 64, 896, 1024}) {
    const int64_t rows = 64;
    Fixture f = random_q8(rows, cols, rng);
    std::vector<uint8_t> buf(packed_bytes(f.t) + 64);
    uint8_t* p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t{63});
    PackedMatrix m;
    pack_q8_0(f.t, p, &m);
    std::vector<float> x(static_cast<size_t>(cols));
    for (auto& v : x) v = nd(rng) * (nd(rng) > 1.5f ? 20.f : 1.f);  // a few outliers
    XBuf xb(cols);
    quantize_x(x.data(), cols, &xb.q);
    std::vector<float> ys(static_cast<size_t>(rows)), yv(static_cast<size_t>(rows));
    packed_matvec_scalar(m, 0, rows / 16, xb.q, ys.data());
    PackedMatvecFn fast = packed_matvec_best();
    XBuf xf(cols);
    quantize_x_best()(x.data(), cols, &xf.q);
    for (int64_t i = 0; i < cols; ++i) {  // SIMD quantizer: same ints (ties may round apart by one)
      ASSERT_LE(std::abs(xf.hi[static_cast<size_t>(i)] - xb.hi[static_cast<size_t>(i)]), 1);
    }
    if (fast) fast(m, 0, rows / 16, xf.q, yv.data());
    for (int64_t r = 0; r < rows; ++r) {
      const double ref = kernels_for(Isa::kScalar)->dot_row[static_cast<uint32_t>(DType::Q8_0)](f.t.row(r), x.data(), cols);
      // Error bound of two-term activations: each element is off by at most
      // amax(block) / 127 / 256, plus float rounding.
      double mag = 0, bound = 0;
      std::vector<float> w(static_cast<size_t>(cols));
      kernels_for(Isa::kScalar)->dequantize_row[static_cast<uint32_t>(DType::Q8_0)](f.t.row(r), w.data(), cols);
      for (int64_t b = 0; b < cols / 32; ++b) {
        double amax = 0;
        for (int k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(static_cast<double>(x[static_cast<size_t>(b * 32 + k)])));
        for (int k = 0; k < 32; ++k) {
          const size_t i = static_cast<size_t>(b * 32 + k);
          mag += std::fabs(w[i] * x[i]);
          bound += std::fabs(w[i]) * amax / (127.0 * 256.0);
        }
      }
      EXPECT_NEAR(ys[static_cast<size_t>(r)], ref, 1.01 * bound + 1e-6 * mag) << "cols " << cols << " row " << r;
      if (fast) {
        EXPECT_NEAR(yv[static_cast<size_t>(r)], ref, 1.01 * bound + 1e-6 * mag) << "vnni row " << r;
      }
    }
  }
}

}  // namespace
}  // namespace laya::cpu
