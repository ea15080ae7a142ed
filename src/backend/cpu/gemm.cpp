#include "backend/cpu/gemm.h"

namespace laya::cpu {

void gemm_tile_scalar(const float* const* w, int64_t n_rows, const float* x, int64_t ldx, int64_t n_tok, int64_t k,
                      float* y, int64_t ldy) {
  const KernelTable& kt = *kernels_for(Isa::kScalar);
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t r = 0; r < n_rows; ++r) y[t * ldy + r] = kt.dot_f32(w[r], x + t * ldx, k);
}

GemmTileFn gemm_tile_for(Isa isa) {
#if defined(LAYA_HAVE_X86)
  if (isa == Isa::kAvx512) return gemm_tile_avx512;
  if (isa == Isa::kAvx2) return gemm_tile_avx2;
#endif
  (void)isa;
  return gemm_tile_scalar;
}

}  // namespace laya::cpu
