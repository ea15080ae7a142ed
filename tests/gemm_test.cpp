// The prefill GEMM tiles of every ISA against the scalar one on random data.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backend/cpu/gemm.h"

namespace laya::cpu {
namespace {

TEST(KernelGemm, SimdTilesMatchScalar) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (!kernels_for(isa)) continue;
    GemmTileFn f = gemm_tile_for(isa);
    for (int64_t k : {16, 40, 256, 688, 896}) {
      for (int64_t nt : {1, 3, 4, 9}) {
        for (int64_t nr : {1, 5, 16}) {
          std::vector<float> wbuf(static_cast<size_t>(nr * k)), x(static_cast<size_t>(nt * k));
          for (auto& v : wbuf) v = nd(rng);
          for (auto& v : x) v = nd(rng);
          std::vector<const float*> rows(static_cast<size_t>(nr));
          for (int64_t r = 0; r < nr; ++r) rows[static_cast<size_t>(r)] = wbuf.data() + r * k;
          const int64_t ldy = nr + 3;
          std::vector<float> y_ref(static_cast<size_t>(nt * ldy), -1.f), y(static_cast<size_t>(nt * ldy), -1.f);
          gemm_tile_scalar(rows.data(), nr, x.data(), k, nt, k, y_ref.data(), ldy);
          f(rows.data(), nr, x.data(), k, nt, k, y.data(), ldy);
          for (int64_t t = 0; t < nt; ++t) {
            for (int64_t r = 0; r < ldy; ++r) {
              const size_t i = static_cast<size_t>(t * ldy + r);
              if (r >= nr) {
                EXPECT_EQ(y[i], -1.f) << "wrote past the tile";
                continue;
              }
              double mag = 0;
              for (int64_t j = 0; j < k; ++j) mag += std::fabs(rows[static_cast<size_t>(r)][j] * x[static_cast<size_t>(t * k + j)]);
              EXPECT_NEAR(y[i], y_ref[i], 1e-5 * mag + 1e-6) << isa_name(isa) << " k=" << k << " t=" << t << " r=" << r;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace laya::cpu
