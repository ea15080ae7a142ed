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
  // LAYA_CUDA_PERSISTENT=1: decode steps run the persistent kernel (cuda/persistent.h) where the step allows it.
  // Off by default: on the H100 it is slower than the graph (1B Q8_0 1.669 against 1.299 ms, docs/CUDA.md).
  bool persistent = false;
  // LAYA_CUDA_PERSISTENT_PROFILE=1: the persistent kernel times each instruction in each block (clock64) and
  // `laya bench` prints where a step's time goes; every step then waits for its clocks to download.
  bool persistent_profile = false;
  // LAYA_CUDA_PERSISTENT_PREFETCH=0..2: what the persistent kernel's warps send into L2 besides the loads they
  // stream: 0 nothing; 1 the rest of their rows of a matrix-vector instruction, before they wait to start it;
  // 2 that, and at the start of each one, their rows of the next (where it is at most 24 MB). 0 by default:
  // 1 and 2 are not yet timed on a GPU (docs/CUDA.md).
  int persistent_prefetch = 0;

  // The tuning the variables above give, `var(name)` returning a variable's
  // value or nullptr when unset; a value out of its range leaves the default.
  static CudaTuning parse(const std::function<const char*(const char* name)>& var);
  // parse() of the process environment.
  static CudaTuning from_env();

  bool operator==(const CudaTuning&) const = default;
};

}  // namespace laya
