// launch_chained(): a kernel launch that lets the kernel start before the
// previous kernel in the stream has finished (programmatic dependent launch,
// Hopper), so a decode step's ~100 small kernels overlap their launch and
// their first weight loads with the tail of the kernel before. The kernel
// must begin with pdl_wait() (dequant.cuh) before it touches activations.
// Captured into a decode step's CUDA graph as programmatic edges. Where
// `chained` (Launch::chained) is false it is a plain launch.
#pragma once

#include "backend/cuda/dequant.cuh"

namespace laya::cuda {

template <typename... P, typename... A>
cudaError_t launch_chained(bool chained, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                           A... args) {
#if defined(LAYA_CUDA_EMULATE)
  (void)chained;
  LAYA_LAUNCH(kernel, grid, block, smem, s)(args...);
  return cudaGetLastError();
#else
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = chained ? 1 : 0;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, args...);
#endif
}

}  // namespace laya::cuda
