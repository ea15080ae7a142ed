// Device-side dequantization of the weight types (MLX's affine types
// included), one 32-value group at a time: the same float operations in the
// same order as the scalar reference (cpu/ref/kernels_ref.cpp,
// affine_ref.cpp), so get_rows matches it to the last bit up to fused
// multiply-adds. Byte loads: the decode kernel's fast paths (16-byte
// loads) are in matmul.cu; this is the general path and the reference the
// fast paths are checked against (through the conformance suite).
#pragma once

#if defined(LAYA_CUDA_HOST_CHECK)
// A host build of the device code (tests/cuda/units_host_check.cpp): the
// few CUDA names it uses, on the CPU.
#include <cstring>

#include "core/dtype.h"
#include "core/fp16.h"
#define __device__
#define __forceinline__ inline
struct uint4 { uint32_t x, y, z, w; };
struct float4 { float x, y, z, w; };
template <class T>
T __ldg(const T* p) { return *p; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline float __uint_as_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s) {  // as emulate.h's
  const uint64_t t = (static_cast<uint64_t>(y) << 32) | x;
  uint32_t r = 0;
  for (int n = 0; n < 4; ++n) r |= static_cast<uint32_t>((t >> (8 * ((s >> (4 * n)) & 7))) & 0xff) << (8 * n);
  return r;
}
namespace laya::cuda {
struct DevMat {
  DType type = DType::F32;
  int64_t rows = 0, cols = 0;
  const uint8_t* data = nullptr;
  const uint16_t* scales = nullptr;
  size_t stride = 0;
  int32_t group = 0;
  DType group_type = DType::F16;
};
inline float h2f(uint16_t h) { return fp16_to_f32(h); }
inline float bf2f(uint16_t h) { return bf16_to_f32(h); }
}  // namespace laya::cuda
#else
#if !defined(LAYA_CUDA_EMULATE)
#include <cuda_fp16.h>
// A launch and a kernel's dynamic shared memory, spelled so that the
// emulation (emulate.h) can give them another meaning.
#define LAYA_LAUNCH(k, g, b, sm, st) k<<<g, b, sm, st>>>
#define LAYA_DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#endif

#include "backend/cuda/kernels.h"

namespace laya::cuda {
__device__ __forceinline__ float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float bf2f(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }
}  // namespace laya::cuda
#endif

namespace laya::cuda {
// Programmatic dependent launch (Hopper): a kernel launched with
// launch_chained() may start while the one before it in the stream is still
// running. It may read weights before pdl_wait() (prefetch_l2), and must
// call pdl_wait() before touching anything an earlier kernel writes or
// reads; pdl_wait() returns once the earlier kernels have completed and
// their writes are visible. pdl_release() lets the next chained kernel
// start. Every kernel calls both first, so any launch order is safe; on
// older GPUs and in the host builds they do nothing.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_release() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }
#else
__device__ __forceinline__ void pdl_wait() {}
__device__ __forceinline__ void pdl_release() {}
__device__ __forceinline__ void prefetch_l2(const void*) {}
#endif
__device__ __forceinline__ void pdl_enter() {
  pdl_wait();
  pdl_release();
}
}  // namespace laya::cuda

namespace laya::cuda {

__device__ __forceinline__ uint16_t ld16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
__device__ __forceinline__ uint32_t ld32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

// Scale and min of sub-block j (0..7) of a Q4_K / Q5_K block from its 12 bytes.
__device__ __forceinline__ void scale_min_k4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// ---- MLX affine types (DType::MLX_Q*, core/dtype.h): w = s·q + z per group ----------------------
// A group's scale s and bias z.
struct MlxParams {
  float s, z;
};
// From a device pair of 16-bit values (layout.h: the scale in the low half).
__device__ __forceinline__ MlxParams mlx_pair16(uint32_t p, bool bf16) {
  const uint16_t s = static_cast<uint16_t>(p & 0xffff), z = static_cast<uint16_t>(p >> 16);
  return bf16 ? MlxParams{bf2f(s), bf2f(z)} : MlxParams{h2f(s), h2f(z)};
}
// Pair i of m (its groups row-major), any scale type.
__device__ __forceinline__ MlxParams mlx_params(const DevMat& m, size_t i) {
  if (m.group_type == DType::F32) {
    const float* p = reinterpret_cast<const float*>(m.scales) + 2 * i;
    return MlxParams{__ldg(p), __ldg(p + 1)};
  }
  return mlx_pair16(__ldg(reinterpret_cast<const uint32_t*>(m.scales) + i), m.group_type == DType::BF16);
}
// The MLX matrices the decode kernel's own units take (units.cuh, UnitMlx):
// 4 and 8 bits with F16 / BF16 scales, what mlx-lm writes. Other widths and
// F32 scales go through deq32 (UnitGeneric).
constexpr bool mlx_unit_type(DType t, DType group_type) {
  return (t == DType::MLX_Q4 || t == DType::MLX_Q8) && group_type != DType::F32;
}

// Value j (0..31) of a run of 32 values packed in kBits uint32 words: the
// kBits bits at bit j·kBits of their little-endian stream, low bits first.
// 3, 5 and 6 bits straddle words, as the CPU reference's value_at reads them
// across bytes. The callers unroll j: the shifts are constants.
template <int kBits>
__device__ __forceinline__ uint32_t mlx_value(const uint32_t* w, int j) {
  const int bit = j * kBits, k = bit >> 5, sh = bit & 31;
  uint32_t v = w[k] >> sh;
  if (sh + kBits > 32) v |= w[k + 1] << (32 - sh);
  return v & ((1u << kBits) - 1);
}

// Values [32 g, 32 g + 32) of row r of an MLX matrix: s·q + z in float32, as
// the reference (with F16 / BF16 scales s·q is exact, so a fused multiply-add
// gives the reference's two roundings' result).
template <int kBits>
__device__ inline void deq32_mlx(const DevMat& m, int64_t r, int64_t g, float* out) {
  const uint32_t* src = reinterpret_cast<const uint32_t*>(m.data + static_cast<size_t>(r) * m.stride) + g * kBits;
  uint32_t w[kBits];
#pragma unroll
  for (int i = 0; i < kBits; ++i) w[i] = __ldg(src + i);
  const MlxParams p = mlx_params(m, static_cast<size_t>(r * (m.cols / m.group) + g * 32 / m.group));
#pragma unroll
  for (int j = 0; j < 32; ++j) out[j] = p.s * static_cast<float>(mlx_value<kBits>(w, j)) + p.z;
}

// Values [32 g, 32 g + 32) of row r of m into out (zeros past cols).
__device__ inline void deq32(const DevMat& m, int64_t r, int64_t g, float* out) {
  const uint8_t* row = m.data + static_cast<size_t>(r) * m.stride;
  switch (m.type) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: {
      for (int j = 0; j < 32; ++j) {
        const int64_t c = g * 32 + j;
        float v = 0.f;
        if (c < m.cols) {
          if (m.type == DType::F32) v = reinterpret_cast<const float*>(row)[c];
          else if (m.type == DType::F16) v = h2f(reinterpret_cast<const uint16_t*>(row)[c]);
          else v = bf2f(reinterpret_cast<const uint16_t*>(row)[c]);
        }
        out[j] = v;
      }
      return;
    }
    case DType::Q8_0: {
      const int8_t* q = reinterpret_cast<const int8_t*>(row) + g * 32;
      const float d = h2f(m.scales[static_cast<size_t>(r) * static_cast<size_t>(m.cols / 32) + g]);
      for (int j = 0; j < 32; ++j) out[j] = static_cast<float>(q[j]) * d;
      return;
    }
    case DType::Q4_0: {
      const uint8_t* b = row + g * 18;
      const float d = h2f(ld16(b));
      for (int j = 0; j < 16; ++j) {
        out[j] = static_cast<float>((b[2 + j] & 0x0F) - 8) * d;
        out[j + 16] = static_cast<float>((b[2 + j] >> 4) - 8) * d;
      }
      return;
    }
    case DType::Q4_1: {
      const uint8_t* b = row + g * 20;
      const float d = h2f(ld16(b)), mn = h2f(ld16(b + 2));
      for (int j = 0; j < 16; ++j) {
        out[j] = static_cast<float>(b[4 + j] & 0x0F) * d + mn;
        out[j + 16] = static_cast<float>(b[4 + j] >> 4) * d + mn;
      }
      return;
    }
    case DType::Q5_0:
    case DType::Q5_1: {
      const bool has_m = m.type == DType::Q5_1;
      const uint8_t* b = row + g * (has_m ? 24 : 22);
      const float d = h2f(ld16(b)), mn = has_m ? h2f(ld16(b + 2)) : 0.f;
      const uint8_t* hb = b + (has_m ? 4 : 2);
      const uint32_t qh = ld32(hb);
      const uint8_t* qs = hb + 4;
      for (int j = 0; j < 16; ++j) {
        const uint32_t xh0 = ((qh >> j) << 4) & 0x10, xh1 = (qh >> (j + 12)) & 0x10;
        const int x0 = static_cast<int>((qs[j] & 0x0F) | xh0), x1 = static_cast<int>((qs[j] >> 4) | xh1);
        if (has_m) {
          out[j] = static_cast<float>(x0) * d + mn;
          out[j + 16] = static_cast<float>(x1) * d + mn;
        } else {
          out[j] = static_cast<float>(x0 - 16) * d;
          out[j + 16] = static_cast<float>(x1 - 16) * d;
        }
      }
      return;
    }
    case DType::Q4_K:
    case DType::Q5_K: {
      const bool q5 = m.type == DType::Q5_K;
      const uint8_t* b = row + (g / 8) * (q5 ? 176 : 144);
      const int j = static_cast<int>(g % 8);  // sub-block: 64-value group j / 2, high nibbles when odd
      int sc, mn;
      scale_min_k4(j, b + 4, &sc, &mn);
      const float d1 = h2f(ld16(b)) * static_cast<float>(sc), m1 = h2f(ld16(b + 2)) * static_cast<float>(mn);
      const uint8_t* qh = b + 16;
      const uint8_t* qs = b + (q5 ? 48 : 16) + 32 * (j / 2);
      const int shift = (j & 1) ? 4 : 0;
      for (int l = 0; l < 32; ++l) {
        int q = (qs[l] >> shift) & 0x0F;
        if (q5 && (qh[l] & (1 << j))) q += 16;
        out[l] = d1 * static_cast<float>(q) - m1;
      }
      return;
    }
    case DType::Q6_K: {  // split on the device: 208-byte bodies, fp16 scales apart (kernels.h)
      const uint8_t* b = row + (g / 8) * 208;
      const int n = static_cast<int>((g % 8) / 4), qd = static_cast<int>(g % 4);
      const uint8_t* ql = b + 64 * n + ((qd & 1) ? 32 : 0);
      const uint8_t* qh = b + 128 + 32 * n;
      const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + 8 * n + 2 * qd;
      const float d = h2f(m.scales[static_cast<size_t>(r) * static_cast<size_t>(m.cols / 256) + g / 8]);
      const int shift = qd >= 2 ? 4 : 0;
      for (int l = 0; l < 32; ++l) {
        const int q = static_cast<int>(((ql[l] >> shift) & 0x0F) | (((qh[l] >> (2 * qd)) & 3) << 4)) - 32;
        out[l] = d * static_cast<float>(sc[l / 16]) * static_cast<float>(q);
      }
      return;
    }
    case DType::MLX_Q2: return deq32_mlx<2>(m, r, g, out);
    case DType::MLX_Q3: return deq32_mlx<3>(m, r, g, out);
    case DType::MLX_Q4: return deq32_mlx<4>(m, r, g, out);
    case DType::MLX_Q5: return deq32_mlx<5>(m, r, g, out);
    case DType::MLX_Q6: return deq32_mlx<6>(m, r, g, out);
    case DType::MLX_Q8: return deq32_mlx<8>(m, r, g, out);
    default:
      for (int j = 0; j < 32; ++j) out[j] = __int_as_float(0x7fc00000);  // unsupported: NaN, never silently zero
  }
}

}  // namespace laya::cuda
