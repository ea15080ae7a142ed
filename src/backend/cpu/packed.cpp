#include "backend/cpu/packed.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/kernels.h"
#include "core/dtype.h"
#include "core/fp16.h"

namespace laya::cpu {

bool packable(const Tensor& t) {
  return t.type == DType::Q8_0 && t.ne[2] == 1 && t.ne[3] == 1 && t.rows() % kPackRows == 0 && t.cols() % 32 == 0;
}

static size_t scale_bytes_of(int64_t nb) { return (static_cast<size_t>(nb) * 32 + 63) / 64 * 64; }

size_t packed_bytes(const Tensor& t) {
  const int64_t nb = t.cols() / 32;
  return static_cast<size_t>(t.rows() / kPackRows) * (scale_bytes_of(nb) + static_cast<size_t>(nb) * 512);
}

void pack_q8_0(const Tensor& t, uint8_t* dst, PackedMatrix* out) {
  PackedMatrix& m = *out;
  m.rows = t.rows();
  m.cols = t.cols();
  m.nb = m.cols / 32;
  m.scale_bytes = scale_bytes_of(m.nb);
  m.group_bytes = m.scale_bytes + static_cast<size_t>(m.nb) * 512;
  m.data = dst;
  const size_t stride = t.row_stride();
  for (int64_t g = 0; g < m.rows / kPackRows; ++g) {
    uint8_t* gp = dst + static_cast<size_t>(g) * m.group_bytes;
    std::memset(gp, 0, m.scale_bytes);
    uint16_t* scales = reinterpret_cast<uint16_t*>(gp);
    uint8_t* quants = gp + m.scale_bytes;
    for (int64_t r = 0; r < kPackRows; ++r) {
      const BlockQ8_0* row = reinterpret_cast<const BlockQ8_0*>(t.data + static_cast<size_t>(g * kPackRows + r) * stride);
      for (int64_t b = 0; b < m.nb; ++b) {
        BlockQ8_0 blk;
        std::memcpy(&blk, row + b, sizeof(blk));
        scales[b * kPackRows + r] = blk.d;
        uint8_t* qb = quants + static_cast<size_t>(b) * 512;
        for (int k = 0; k < 32; ++k) {
          qb[(k / 4) * 64 + r * 4 + (k % 4)] = static_cast<uint8_t>(static_cast<int>(blk.qs[k]) + 128);
        }
      }
    }
  }
}

void dequantize_group(const PackedMatrix& m, int64_t g, float* out) {
  const uint8_t* gp = m.group(g);
  const uint16_t* scales = reinterpret_cast<const uint16_t*>(gp);
  const uint8_t* quants = gp + m.scale_bytes;
  for (int64_t r = 0; r < kPackRows; ++r) {
    float* o = out + r * m.cols;
    for (int64_t b = 0; b < m.nb; ++b) {
      uint16_t h;
      std::memcpy(&h, scales + b * kPackRows + r, 2);
      const float d = fp16_to_f32(h);
      const uint8_t* qb = quants + static_cast<size_t>(b) * 512;
      for (int k = 0; k < 32; ++k) {
        o[b * 32 + k] = static_cast<float>(static_cast<int>(qb[(k / 4) * 64 + r * 4 + (k % 4)]) - 128) * d;
      }
    }
  }
}

void quantize_x(const float* x, int64_t cols, QuantizedX* q) {
  q->nb = cols / 32;
  for (int64_t b = 0; b < q->nb; ++b) {
    const float* xb = x + b * 32;
    float amax = 0;
    for (int k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(xb[k]));
    const float d = amax / 127.0f;
    const float id = d > 0 ? 1.0f / d : 0.0f;
    int32_t shi = 0, slo = 0;
    for (int k = 0; k < 32; ++k) {
      const int hi = std::clamp(static_cast<int>(std::lrintf(xb[k] * id)), -127, 127);
      const float r = xb[k] - static_cast<float>(hi) * d;
      const int lo = std::clamp(static_cast<int>(std::lrintf(r * id * 128.0f)), -127, 127);
      q->hi[b * 32 + k] = static_cast<int8_t>(hi);
      q->lo[b * 32 + k] = static_cast<int8_t>(lo);
      shi += hi;
      slo += lo;
    }
    q->d[b] = d / 128.0f;
    q->corr[b] = 128 * (128 * shi + slo);
  }
}

void packed_matvec_scalar(const PackedMatrix& m, int64_t g_begin, int64_t g_end, const QuantizedX& x, float* y) {
  for (int64_t g = g_begin; g < g_end; ++g) {
    const uint8_t* gp = m.group(g);
    const uint16_t* scales = reinterpret_cast<const uint16_t*>(gp);
    const uint8_t* quants = gp + m.scale_bytes;
    for (int64_t r = 0; r < kPackRows; ++r) {
      float acc = 0;
      for (int64_t b = 0; b < m.nb; ++b) {
        const uint8_t* qb = quants + static_cast<size_t>(b) * 512;
        int32_t shi = 0, slo = 0;
        for (int k = 0; k < 32; ++k) {
          const int w = qb[(k / 4) * 64 + r * 4 + (k % 4)];
          shi += w * x.hi[b * 32 + k];
          slo += w * x.lo[b * 32 + k];
        }
        uint16_t h;
        std::memcpy(&h, scales + b * kPackRows + r, 2);
        acc += static_cast<float>(128 * shi + slo - x.corr[b]) * (fp16_to_f32(h) * x.d[b]);
      }
      y[g * kPackRows + r] = acc;
    }
  }
}

PackedMatvecFn packed_matvec_best() {
#if defined(LAYA_HAVE_X86) && (defined(__x86_64__) || defined(__i386__))
  static const PackedMatvecFn best = []() -> PackedMatvecFn {
    if (active_isa() == Isa::kAvx512 && __builtin_cpu_supports("avx512vnni")) return packed_matvec_avx512vnni;
    return nullptr;
  }();
  return best;
#else
  return nullptr;
#endif
}

}  // namespace laya::cpu

namespace laya::cpu {
QuantizeXFn quantize_x_best() {
#if defined(LAYA_HAVE_X86)
  if (packed_matvec_best() == packed_matvec_avx512vnni) return quantize_x_avx512;
#endif
  return quantize_x;
}
}  // namespace laya::cpu
