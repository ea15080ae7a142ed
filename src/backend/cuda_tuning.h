// The CUDA backend's tuning: knobs for measuring kernel variants on a GPU
// (bench/cuda/run_on_device.sh's sweeps) and for turning a mechanism off
// when it misbehaves. Plain C++ (no CUDA header): BackendOptions carries it,
// and every build parses it, so the parsing is tested where no GPU is.
//
// Each CudaBackend keeps the tuning it was made with and passes it to its
// launchers: a backend made for a hot swap, with other settings, does not
// change those of the engine still serving. The environment variables only
// give the defaults, read once where a backend is made without a tuning.
#pragma once

#include <functional>

namespace laya {

struct CudaTuning {
  bool graphs = true;       // LAYA_CUDA_GRAPHS=0: decode steps issue their ops one by one (no graph replay)
  bool pinned = true;       // LAYA_CUDA_PINNED=0: downloads go straight to pageable memory
  int attn_split = 0;       // LAYA_CUDA_ATTN_SPLIT=1..32: a fixed decode attention split (0: by shape)
  bool chained = true;      // LAYA_CUDA_PDL=0: no chained launches (programmatic dependent launch, cc >= 9.0)
  bool prefetch = false;    // LAYA_CUDA_PREFETCH=1: rows into L2 before staging x even without chained launches
  int rows_per_warp = 0;    // LAYA_CUDA_RPW=1..4: the per-row kernel's rows per warp (0: by matrix size)
  bool stream = true;       // LAYA_CUDA_STREAM=0: the per-row decode kernel only, no streaming kernel
  int stream_blocks = 0;    // LAYA_CUDA_STREAM_BLOCKS=1..32: the streaming kernel's blocks per SM (0: as many as fit)
  bool stream_deep = true;  // LAYA_CUDA_STREAM_DEEP=0: no double-size chunks for long rows
  bool persistent = true;   // LAYA_CUDA_PERSISTENT=0: decode steps replay their graph, not the persistent kernel

  // The tuning the variables above give, `var(name)` returning a variable's
  // value or nullptr when unset; a value out of its range leaves the default.
  static CudaTuning parse(const std::function<const char*(const char* name)>& var);
  // parse() of the process environment.
  static CudaTuning from_env();

  bool operator==(const CudaTuning&) const = default;
};

}  // namespace laya
