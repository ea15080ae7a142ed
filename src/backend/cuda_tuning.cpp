#include "backend/cuda_tuning.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace laya {

namespace {

// "0" turns an on-by-default knob off; anything else (or unset) leaves it on.
bool unless_zero(const char* v) { return !(v && std::strcmp(v, "0") == 0); }

// An integer in [lo, hi] spelled wholly in decimal, else `otherwise`.
int in_range(const char* v, int lo, int hi, int otherwise) {
  if (!v) return otherwise;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return end != v && *end == 0 && n >= lo && n <= hi ? static_cast<int>(n) : otherwise;
}

}  // namespace

CudaTuning CudaTuning::parse(const std::function<const char*(const char* name)>& var) {
  CudaTuning t;
  t.graphs = unless_zero(var("LAYA_CUDA_GRAPHS"));
  t.pinned = unless_zero(var("LAYA_CUDA_PINNED"));
  t.attn_split = in_range(var("LAYA_CUDA_ATTN_SPLIT"), 1, 32, 0);
  t.chained = unless_zero(var("LAYA_CUDA_PDL"));
  const char* pf = var("LAYA_CUDA_PREFETCH");
  t.prefetch = pf && std::strcmp(pf, "1") == 0;
  const char* rpw = var("LAYA_CUDA_RPW");  // one digit
  t.rows_per_warp = rpw && rpw[0] >= '1' && rpw[0] <= '4' && rpw[1] == 0 ? rpw[0] - '0' : 0;
  t.stream = unless_zero(var("LAYA_CUDA_STREAM"));
  // Clamped rather than refused, as the sweeps have always set it.
  if (const char* sb = var("LAYA_CUDA_STREAM_BLOCKS")) t.stream_blocks = std::clamp(std::atoi(sb), 0, 32);
  t.stream_deep = unless_zero(var("LAYA_CUDA_STREAM_DEEP"));
  const char* pk = var("LAYA_CUDA_PERSISTENT");
  t.persistent = pk && std::strcmp(pk, "1") == 0;
  const char* pp = var("LAYA_CUDA_PERSISTENT_PROFILE");
  t.persistent_profile = pp && std::strcmp(pp, "1") == 0;
  const char* ppf = var("LAYA_CUDA_PERSISTENT_PREFETCH");  // one digit
  if (ppf && ppf[0] >= '0' && ppf[0] <= '2' && ppf[1] == 0) t.persistent_prefetch = ppf[0] - '0';
  return t;
}

CudaTuning CudaTuning::from_env() {
  return parse([](const char* name) { return static_cast<const char*>(std::getenv(name)); });
}

}  // namespace laya
