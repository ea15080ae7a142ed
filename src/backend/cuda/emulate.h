// The CUDA backend on the CPU (-DLAYA_CUDA_EMULATE=ON), for checking it where
// no GPU is at hand: the .cu files compile as C++ against these stand-ins
// for the CUDA names they use, and a kernel launch runs every thread of a
// block as a fiber (ucontext) on the calling thread, block after block.
// __syncthreads() and warp shuffles are real barriers over those fibers, so
// a missing barrier or a wrong lane shows as a wrong result; shared memory
// and fresh allocations start filled with 0xFF bytes (NaN), so does a read of
// something never written. Stream capture records launches and copies into
// a graph that cudaGraphLaunch replays. Slow (a context switch per barrier
// per thread): for the conformance suite and the tiny reference models, not
// for timing. Nothing here is used by a real CUDA build.
#pragma once

#include <chrono>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>

#include "core/fp16.h"

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint4 {
  uint32_t x, y, z, w;
};
struct float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
struct __half {
  uint16_t bits;
};

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorStreamCaptureUnsupported = 900,
};
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDeviceAttr {
  cudaDevAttrClockRate = 13,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
};
enum cudaStreamCaptureMode { cudaStreamCaptureModeThreadLocal = 1 };
constexpr unsigned cudaStreamNonBlocking = 1;
using cudaStream_t = struct EmuStream*;
using cudaGraph_t = struct EmuGraph*;
using cudaGraphExec_t = struct EmuGraph*;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
#define __shared__ static
#define __syncthreads() ::laya::emu::sync_block()
#define threadIdx (::laya::emu::thread_idx())
#define blockIdx (::laya::emu::block_idx())
#define blockDim (::laya::emu::block_dim())
#define gridDim (::laya::emu::grid_dim())
#define LAYA_LAUNCH(k, g, b, sm, st) (static_cast<void>(st), ::laya::emu::Launch{dim3(g), dim3(b), static_cast<size_t>(sm)} % (k))
#define LAYA_DYNAMIC_SHARED(T, name) T* name = static_cast<T*>(::laya::emu::dynamic_shared())
// A cooperative launch: every block of the grid runs at once (their threads
// are fibers of one scheduler), so blocks may wait for each other
// (persistent.cu's grid barrier: __nanosleep yields).
#define LAYA_LAUNCH_COOPERATIVE(k, g, b, sm, st) \
  (static_cast<void>(st), ::laya::emu::Launch{dim3(g), dim3(b), static_cast<size_t>(sm), true} % (k))

namespace laya::emu {

const dim3& thread_idx();
const dim3& block_idx();
const dim3& block_dim();
const dim3& grid_dim();
void sync_block();
// Value `v` of lane `src` of the calling thread's warp (every lane calls it).
uint64_t shuffle(uint64_t v, int src);
void* dynamic_shared();
// Runs body on every thread of every block (or records it into a capture);
// cooperative: all blocks at once rather than block after block.
void launch(dim3 grid, dim3 block, size_t smem, std::function<void()> body, bool cooperative = false);
// Lets the other fibers run (a spinning thread's __nanosleep).
void yield_thread();
bool capturing();
void record(std::function<void()> op);

struct Launch {
  dim3 grid, block;
  size_t smem;
  bool cooperative = false;
  template <class K>
  auto operator%(K kernel) const {
    return [g = grid, b = block, s = smem, c = cooperative, kernel](auto... args) {
      launch(g, b, s, [=] { kernel(args...); }, c);
    };
  }
};

template <class T>
uint64_t to_bits(T v) {
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof v);
  return b;
}
template <class T>
T from_bits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

}  // namespace laya::emu

template <class T>
T __ldg(const T* p) {
  return *p;
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int mask) {
  return laya::emu::from_bits<T>(laya::emu::shuffle(laya::emu::to_bits(v), static_cast<int>(threadIdx.x & 31) ^ mask));
}
template <class T>
T __shfl_sync(unsigned, T v, int src) {
  return laya::emu::from_bits<T>(laya::emu::shuffle(laya::emu::to_bits(v), src));
}
template <class T>
T __ldcg(const T* p) {
  return *p;
}
inline int atomicAdd(int* p, int v) {  // one fiber runs at a time
  const int old = *p;
  *p += v;
  return old;
}
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  const unsigned old = *p;
  *p += v;
  return old;
}
inline void __threadfence() {}
inline void __nanosleep(unsigned) { laya::emu::yield_thread(); }
// The SM's cycle counter: nanoseconds of the host's steady clock here.
inline long long clock64() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
inline float __int_as_float(int i) { return laya::emu::from_bits<float>(static_cast<uint32_t>(i)); }
inline float __uint_as_float(unsigned u) { return laya::emu::from_bits<float>(u); }
// Byte n of the result: byte (selector nibble n & 7) of the 8 bytes y:x.
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const uint64_t t = (static_cast<uint64_t>(y) << 32) | x;
  unsigned r = 0;
  for (int n = 0; n < 4; ++n) r |= static_cast<unsigned>((t >> (8 * ((s >> (4 * n)) & 7))) & 0xff) << (8 * n);
  return r;
}
inline __half __ushort_as_half(uint16_t u) { return __half{u}; }
inline float __half2float(__half h) { return laya::fp16_to_f32(h.bits); }
inline __half __float2half_rn(float f) { return __half{laya::f32_to_fp16(f)}; }

// ---- the runtime API the backend calls ------------------------------------------------------------
cudaError_t cudaGetDeviceCount(int* n);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDevice(int* d);
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int d);
struct cudaFuncAttributes {
  size_t sharedSizeBytes = 0;  // static shared memory: the emulation's __shared__ are host statics
};
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, const void* f);
// Two resident blocks of anything: a kernel sized by occupancy (the streaming
// matrix-vector kernel) gets a small grid, so its grid-stride loops run.
template <class F>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, F, int, size_t) {
  *n = 2;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetStreamPriorityRange(int* lo, int* hi);
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned flags, int prio);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaMalloc(void** p, size_t n);
cudaError_t cudaFree(void* p);
cudaError_t cudaMallocHost(void** p, size_t n);
cudaError_t cudaFreeHost(void* p);
cudaError_t cudaMemset(void* p, int v, size_t n);
cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t s);
cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind k);
cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind k, cudaStream_t st);
cudaError_t cudaGetLastError();
const char* cudaGetErrorString(cudaError_t e);
const char* cudaGetErrorName(cudaError_t e);
template <class F>
cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) {
  return cudaSuccess;
}
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode m);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* g);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* e, cudaGraph_t g, unsigned long long flags);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e);
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s);
