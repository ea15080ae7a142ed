#include "backend/cpu/packed.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/kernels.h"
#include "core/dtype.h"
#include "core/fp16.h"

namespace laya::cpu {

bool packable(const Tensor& t) {
  if (t.ne[2] != 1 || t.ne[3] != 1 || t.rows() % kPackRows != 0) return false;
  return ((t.type == DType::Q8_0 || t.type == DType::Q5_0) && t.cols() % 32 == 0) ||
         ((t.type == DType::Q4_K || t.type == DType::Q6_K) && t.cols() % 256 == 0);
}

namespace {
// The 256 6-bit values of a Q6_K block in element order (ggml's layout).
void unpack_q6k(const BlockQ6_K& b, uint8_t* q) {
  for (int n = 0; n < 2; ++n) {
    const uint8_t* ql = b.ql + 64 * n;
    const uint8_t* qh = b.qh + 32 * n;
    uint8_t* y = q + 128 * n;
    for (int l = 0; l < 32; ++l) {
      y[l] = static_cast<uint8_t>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4));
      y[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
      y[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
      y[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
    }
  }
}

// Offsets inside one Q6_K (group, super-block) record.
inline size_t q6_lo_index(int o, int64_t r, int i) { return 288 + ((static_cast<size_t>(o) * 16 + static_cast<size_t>(r)) * 4 + static_cast<size_t>(i)); }
inline size_t q6_hi_index(int o, int64_t r, int i) { return 288 + 2048 + ((static_cast<size_t>(o / 2) * 16 + static_cast<size_t>(r)) * 4 + static_cast<size_t>(i)); }

// ggml's get_scale_min_k4: 6-bit scale and min of sub-block j (0..7).
void scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}
}  // namespace

// The header of t's packed form at dst: one place for every layout's sizes.
static PackedMatrix describe(const Tensor& t, uint8_t* dst) {
  PackedMatrix m;
  m.type = t.type;
  m.rows = t.rows();
  m.cols = t.cols();
  m.nb = m.cols / 32;
  m.data = dst;
  const size_t nsb = static_cast<size_t>(m.cols / 256);
  switch (t.type) {
    case DType::Q4_K: m.group_bytes = nsb * kQ4kRecordBytes; break;
    case DType::Q6_K: m.group_bytes = nsb * kQ6kRecordBytes; break;
    case DType::Q5_0: m.group_bytes = static_cast<size_t>(m.nb) * kQ5RecordBytes; break;
    default:  // Q8_0: records of two blocks, a last odd block alone
      m.group_bytes = static_cast<size_t>(m.nb / 2) * kQ8PairBytes + static_cast<size_t>(m.nb % 2) * (64 + 512);
      break;
  }
  return m;
}

size_t packed_bytes(const Tensor& t) { return static_cast<size_t>(t.rows() / kPackRows) * describe(t, nullptr).group_bytes; }

void pack(const Tensor& t, uint8_t* dst, PackedMatrix* out) {
  if (t.type == DType::Q4_K) pack_q4_k(t, dst, out);
  else if (t.type == DType::Q6_K) pack_q6_k(t, dst, out);
  else if (t.type == DType::Q5_0) pack_q5_0(t, dst, out);
  else pack_q8_0(t, dst, out);
}

void pack_q5_0(const Tensor& t, uint8_t* dst, PackedMatrix* out) {
  PackedMatrix& m = *out = describe(t, dst);
  const size_t stride = t.row_stride();
  for (int64_t g = 0; g < m.rows / kPackRows; ++g) {
    for (int64_t b = 0; b < m.nb; ++b) {
      uint8_t* p = dst + static_cast<size_t>(g) * m.group_bytes + static_cast<size_t>(b) * kQ5RecordBytes;
      for (int64_t r = 0; r < kPackRows; ++r) {
        BlockQ5_0 blk;
        std::memcpy(&blk, t.data + static_cast<size_t>(g * kPackRows + r) * stride + static_cast<size_t>(b) * sizeof(BlockQ5_0),
                    sizeof(blk));
        uint32_t qh;
        std::memcpy(&qh, blk.qh, 4);
        uint8_t q[32];
        for (int j = 0; j < 16; ++j) {
          q[j] = static_cast<uint8_t>((blk.qs[j] & 0xF) | (((qh >> j) & 1) << 4));
          q[j + 16] = static_cast<uint8_t>((blk.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
        }
        std::memcpy(p + 2 * r, &blk.d, 2);
        uint32_t hb = 0;
        for (int k = 0; k < 32; ++k) hb |= static_cast<uint32_t>(q[k] >> 4) << k;
        std::memcpy(p + 32 + 4 * r, &hb, 4);
        for (int o = 0; o < 4; ++o)
          for (int i = 0; i < 4; ++i)
            p[96 + (o * 16 + r) * 4 + i] = static_cast<uint8_t>((q[8 * o + i] & 0xF) | ((q[8 * o + 4 + i] & 0xF) << 4));
      }
    }
  }
}

static inline int q5_value(const uint8_t* p, int64_t r, int k) {
  uint32_t hb;
  std::memcpy(&hb, p + 32 + 4 * r, 4);
  const int o = k / 8, i = k % 8;
  const uint8_t v = p[96 + (o * 16 + r) * 4 + (i % 4)];
  const int lo = i < 4 ? (v & 0xF) : (v >> 4);
  return lo | static_cast<int>(((hb >> k) & 1) << 4);
}

void packed_matvec_q5_0_scalar(const PackedMatrix& m, int64_t g_begin, int64_t g_end, const QuantizedX& x, float* y) {
  for (int64_t g = g_begin; g < g_end; ++g) {
    for (int64_t r = 0; r < kPackRows; ++r) {
      float acc = 0;
      for (int64_t b = 0; b < m.nb; ++b) {
        const uint8_t* p = m.group(g) + static_cast<size_t>(b) * kQ5RecordBytes;
        int32_t shi = 0, slo = 0;
        for (int k = 0; k < 32; ++k) {
          const int q = q5_value(p, r, k);
          shi += q * x.hi[b * 32 + k];
          slo += q * x.lo[b * 32 + k];
        }
        uint16_t h;
        std::memcpy(&h, p + 2 * r, 2);
        acc += static_cast<float>(128 * shi + slo - x.corr[b] / 8) * (fp16_to_f32(h) * x.d[b]);
      }
      y[g * kPackRows + r] = acc;
    }
  }
}

void pack_q6_k(const Tensor& t, uint8_t* dst, PackedMatrix* out) {
  PackedMatrix& m = *out = describe(t, dst);
  const int64_t nsb = m.cols / 256;
  const size_t stride = t.row_stride();
  for (int64_t g = 0; g < m.rows / kPackRows; ++g) {
    for (int64_t sb = 0; sb < nsb; ++sb) {
      uint8_t* p = dst + static_cast<size_t>(g) * m.group_bytes + static_cast<size_t>(sb) * kQ6kRecordBytes;
      std::memset(p, 0, kQ6kRecordBytes);
      uint16_t* d = reinterpret_cast<uint16_t*>(p);
      int8_t* sc = reinterpret_cast<int8_t*>(p + 32);
      for (int64_t r = 0; r < kPackRows; ++r) {
        BlockQ6_K blk;
        std::memcpy(&blk, t.data + static_cast<size_t>(g * kPackRows + r) * stride + static_cast<size_t>(sb) * sizeof(BlockQ6_K),
                    sizeof(blk));
        d[r] = blk.d;
        for (int j = 0; j < 16; ++j) sc[j * 16 + r] = blk.scales[j];
        uint8_t q[256];
        unpack_q6k(blk, q);
        for (int o = 0; o < 32; ++o) {
          for (int i = 0; i < 4; ++i) {
            const uint8_t a = q[8 * o + i], b = q[8 * o + 4 + i];
            p[q6_lo_index(o, r, i)] = static_cast<uint8_t>((a & 0xF) | ((b & 0xF) << 4));
            const int shift = (o % 2) * 4;
            p[q6_hi_index(o, r, i)] |= static_cast<uint8_t>(((a >> 4) << shift) | ((b >> 4) << (shift + 2)));
          }
        }
      }
    }
  }
}

void packed_matvec_q6k_scalar(const PackedMatrix& m, int64_t g_begin, int64_t g_end, const QuantizedX& x, float* y) {
  const int64_t nsb = m.cols / 256;
  for (int64_t g = g_begin; g < g_end; ++g) {
    for (int64_t r = 0; r < kPackRows; ++r) {
      float acc = 0;
      for (int64_t sb = 0; sb < nsb; ++sb) {
        const uint8_t* p = m.group(g) + static_cast<size_t>(sb) * kQ6kRecordBytes;
        const float d = fp16_to_f32(reinterpret_cast<const uint16_t*>(p)[r]);
        const int8_t* sc = reinterpret_cast<const int8_t*>(p + 32);
        for (int j = 0; j < 16; ++j) {  // sub-blocks of 16 = octets 2j, 2j+1
          const int64_t b = sb * 8 + j / 2;
          int32_t shi = 0, slo = 0;
          for (int o = 2 * j; o < 2 * j + 2; ++o) {
            for (int i = 0; i < 4; ++i) {
              const uint8_t lo = p[q6_lo_index(o, r, i)], hi = p[q6_hi_index(o, r, i)];
              const int shift = (o % 2) * 4;
              const int qa = (lo & 0xF) | (((hi >> shift) & 3) << 4);
              const int qb = (lo >> 4) | (((hi >> (shift + 2)) & 3) << 4);
              const int64_t ka = (8 * o + i) % 32, kb = (8 * o + 4 + i) % 32;
              shi += qa * x.hi[b * 32 + ka] + qb * x.hi[b * 32 + kb];
              slo += qa * x.lo[b * 32 + ka] + qb * x.lo[b * 32 + kb];
            }
          }
          acc += static_cast<float>(128 * shi + slo - x.corr16[sb * 16 + j]) * (d * sc[j * 16 + r] * x.d[b]);
        }
      }
      y[g * kPackRows + r] = acc;
    }
  }
}

void pack_q4_k(const Tensor& t, uint8_t* dst, PackedMatrix* out) {
  PackedMatrix& m = *out = describe(t, dst);
  const int64_t nsb = m.cols / 256;
  const size_t stride = t.row_stride();
  for (int64_t g = 0; g < m.rows / kPackRows; ++g) {
    for (int64_t sb = 0; sb < nsb; ++sb) {
      uint8_t* p = dst + static_cast<size_t>(g) * m.group_bytes + static_cast<size_t>(sb) * kQ4kRecordBytes;
      uint16_t* d = reinterpret_cast<uint16_t*>(p);
      uint16_t* dmin = d + 16;
      uint8_t* sc = p + 64;
      uint8_t* mn = p + 192;
      uint8_t* q = p + 320;
      for (int64_t r = 0; r < kPackRows; ++r) {
        BlockQ4_K blk;
        std::memcpy(&blk, t.data + static_cast<size_t>(g * kPackRows + r) * stride + static_cast<size_t>(sb) * sizeof(BlockQ4_K),
                    sizeof(blk));
        d[r] = blk.d;
        dmin[r] = blk.dmin;
        uint8_t qv[256];
        for (int c = 0; c < 4; ++c) {
          for (int l = 0; l < 32; ++l) {
            qv[64 * c + l] = blk.qs[32 * c + l] & 0xF;
            qv[64 * c + 32 + l] = blk.qs[32 * c + l] >> 4;
          }
        }
        for (int s = 0; s < 8; ++s) {
          scale_min_k4(s, blk.scales, &sc[s * 16 + r], &mn[s * 16 + r]);
          for (int o = 0; o < 4; ++o) {
            for (int i = 0; i < 4; ++i) {
              q[((s * 4 + o) * 16 + r) * 4 + i] =
                  static_cast<uint8_t>(qv[s * 32 + 8 * o + i] | (qv[s * 32 + 8 * o + 4 + i] << 4));
            }
          }
        }
      }
    }
  }
}

void pack_q8_0(const Tensor& t, uint8_t* dst, PackedMatrix* out) {
  PackedMatrix& m = *out = describe(t, dst);
  const size_t stride = t.row_stride();
  for (int64_t g = 0; g < m.rows / kPackRows; ++g) {
    uint8_t* gp = dst + static_cast<size_t>(g) * m.group_bytes;
    std::memset(gp, 0, m.group_bytes);  // the unused scale half of an odd last record
    for (int64_t r = 0; r < kPackRows; ++r) {
      const BlockQ8_0* row = reinterpret_cast<const BlockQ8_0*>(t.data + static_cast<size_t>(g * kPackRows + r) * stride);
      for (int64_t b = 0; b < m.nb; ++b) {
        BlockQ8_0 blk;
        std::memcpy(&blk, row + b, sizeof(blk));
        std::memcpy(gp + q8_scales_at(b) + static_cast<size_t>(r) * 2, &blk.d, 2);
        uint8_t* qb = gp + q8_quants_at(b);
        for (int k = 0; k < 32; ++k) {
          qb[(k / 4) * 64 + r * 4 + (k % 4)] = static_cast<uint8_t>(static_cast<int>(blk.qs[k]) + 128);
        }
      }
    }
  }
}

static void dequantize_group_q4k(const PackedMatrix& m, int64_t g, float* out) {
  const int64_t nsb = m.cols / 256;
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* p = m.group(g) + static_cast<size_t>(sb) * kQ4kRecordBytes;
    const uint16_t* d = reinterpret_cast<const uint16_t*>(p);
    const uint8_t* sc = p + 64;
    const uint8_t* mn = p + 192;
    const uint8_t* q = p + 320;
    for (int64_t r = 0; r < kPackRows; ++r) {
      const float dr = fp16_to_f32(d[r]), dm = fp16_to_f32(d[16 + r]);
      float* o = out + r * m.cols + sb * 256;
      for (int s = 0; s < 8; ++s) {
        const float a = dr * sc[s * 16 + r], b = dm * mn[s * 16 + r];
        for (int o8 = 0; o8 < 4; ++o8) {
          for (int i = 0; i < 4; ++i) {
            const uint8_t v = q[((s * 4 + o8) * 16 + r) * 4 + i];
            o[s * 32 + 8 * o8 + i] = a * static_cast<float>(v & 0xF) - b;
            o[s * 32 + 8 * o8 + 4 + i] = a * static_cast<float>(v >> 4) - b;
          }
        }
      }
    }
  }
}

static void dequantize_group_q6k(const PackedMatrix& m, int64_t g, float* out) {
  const int64_t nsb = m.cols / 256;
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* p = m.group(g) + static_cast<size_t>(sb) * kQ6kRecordBytes;
    const int8_t* sc = reinterpret_cast<const int8_t*>(p + 32);
    for (int64_t r = 0; r < kPackRows; ++r) {
      const float d = fp16_to_f32(reinterpret_cast<const uint16_t*>(p)[r]);
      float* o = out + r * m.cols + sb * 256;
      for (int oc = 0; oc < 32; ++oc) {
        for (int i = 0; i < 4; ++i) {
          const uint8_t lo = p[q6_lo_index(oc, r, i)], hi = p[q6_hi_index(oc, r, i)];
          const int shift = (oc % 2) * 4;
          const int qa = (lo & 0xF) | (((hi >> shift) & 3) << 4);
          const int qb = (lo >> 4) | (((hi >> (shift + 2)) & 3) << 4);
          const int ka = 8 * oc + i, kb = 8 * oc + 4 + i;
          o[ka] = d * static_cast<float>(sc[(ka / 16) * 16 + r]) * static_cast<float>(qa - 32);
          o[kb] = d * static_cast<float>(sc[(kb / 16) * 16 + r]) * static_cast<float>(qb - 32);
        }
      }
    }
  }
}

static void dequantize_group_q5_0(const PackedMatrix& m, int64_t g, float* out) {
  for (int64_t b = 0; b < m.nb; ++b) {
    const uint8_t* p = m.group(g) + static_cast<size_t>(b) * kQ5RecordBytes;
    for (int64_t r = 0; r < kPackRows; ++r) {
      uint16_t h;
      std::memcpy(&h, p + 2 * r, 2);
      const float d = fp16_to_f32(h);
      for (int k = 0; k < 32; ++k) out[r * m.cols + b * 32 + k] = static_cast<float>(q5_value(p, r, k) - 16) * d;
    }
  }
}

void dequantize_group(const PackedMatrix& m, int64_t g, float* out) {
  if (m.type == DType::Q5_0) {
    dequantize_group_q5_0(m, g, out);
    return;
  }
  if (m.type == DType::Q6_K) {
    dequantize_group_q6k(m, g, out);
    return;
  }
  if (m.type == DType::Q4_K) {
    dequantize_group_q4k(m, g, out);
    return;
  }
  const uint8_t* gp = m.group(g);
  for (int64_t r = 0; r < kPackRows; ++r) {
    float* o = out + r * m.cols;
    for (int64_t b = 0; b < m.nb; ++b) {
      uint16_t h;
      std::memcpy(&h, gp + q8_scales_at(b) + static_cast<size_t>(r) * 2, 2);
      const float d = fp16_to_f32(h);
      const uint8_t* qb = gp + q8_quants_at(b);
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
    float sum = 0;
    for (int k = 0; k < 32; ++k) sum += xb[k];
    if (q->sum) q->sum[b] = sum;
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
    if (q->corr16) {
      for (int h = 0; h < 2; ++h) {
        int32_t a = 0, c = 0;
        for (int k = 16 * h; k < 16 * h + 16; ++k) {
          a += q->hi[b * 32 + k];
          c += q->lo[b * 32 + k];
        }
        q->corr16[2 * b + h] = 32 * (128 * a + c);
      }
    }
  }
}

void packed_matvec_scalar(const PackedMatrix& m, int64_t g_begin, int64_t g_end, const QuantizedX& x, float* y) {
  for (int64_t g = g_begin; g < g_end; ++g) {
    const uint8_t* gp = m.group(g);
    for (int64_t r = 0; r < kPackRows; ++r) {
      float acc = 0;
      for (int64_t b = 0; b < m.nb; ++b) {
        const uint8_t* qb = gp + q8_quants_at(b);
        int32_t shi = 0, slo = 0;
        for (int k = 0; k < 32; ++k) {
          const int w = qb[(k / 4) * 64 + r * 4 + (k % 4)];
          shi += w * x.hi[b * 32 + k];
          slo += w * x.lo[b * 32 + k];
        }
        uint16_t h;
        std::memcpy(&h, gp + q8_scales_at(b) + static_cast<size_t>(r) * 2, 2);
        acc += static_cast<float>(128 * shi + slo - x.corr[b]) * (fp16_to_f32(h) * x.d[b]);
      }
      y[g * kPackRows + r] = acc;
    }
  }
}

void packed_matvec_q4k_scalar(const PackedMatrix& m, int64_t g_begin, int64_t g_end, const QuantizedX& x, float* y) {
  const int64_t nsb = m.cols / 256;
  for (int64_t g = g_begin; g < g_end; ++g) {
    for (int64_t r = 0; r < kPackRows; ++r) {
      float acc = 0;
      for (int64_t sb = 0; sb < nsb; ++sb) {
        const uint8_t* p = m.group(g) + static_cast<size_t>(sb) * kQ4kRecordBytes;
        const uint16_t* d = reinterpret_cast<const uint16_t*>(p);
        const uint8_t* sc = p + 64;
        const uint8_t* mn = p + 192;
        const uint8_t* q = p + 320;
        for (int s = 0; s < 8; ++s) {
          const int64_t b = sb * 8 + s;
          int32_t shi = 0, slo = 0;
          for (int o = 0; o < 4; ++o) {
            for (int i = 0; i < 4; ++i) {
              const uint8_t v = q[((s * 4 + o) * 16 + r) * 4 + i];
              const int k0 = 8 * o + i, k1 = 8 * o + 4 + i;
              shi += (v & 0xF) * x.hi[b * 32 + k0] + (v >> 4) * x.hi[b * 32 + k1];
              slo += (v & 0xF) * x.lo[b * 32 + k0] + (v >> 4) * x.lo[b * 32 + k1];
            }
          }
          acc += static_cast<float>(128 * shi + slo) * (fp16_to_f32(d[r]) * sc[s * 16 + r] * x.d[b]) -
                 fp16_to_f32(d[16 + r]) * mn[s * 16 + r] * x.sum[b];
        }
      }
      y[g * kPackRows + r] = acc;
    }
  }
}

PackedMatvecFn packed_matvec_for(DType type, Isa isa) {
  PackedMatvecFn best = packed_matvec_best(isa);
  if (!best) return nullptr;
#if defined(LAYA_HAVE_X86)
  if (type == DType::Q4_K) return packed_matvec_q4k_avx512vnni;
  if (type == DType::Q6_K) return packed_matvec_q6k_avx512vnni;
  if (type == DType::Q5_0) return packed_matvec_q5_0_avx512vnni;
#endif
  return type == DType::Q8_0 ? best : nullptr;
}

PackedMatvecFn packed_matvec_best(Isa isa) {
#if defined(LAYA_HAVE_X86) && (defined(__x86_64__) || defined(__i386__))
  static const bool vnni = __builtin_cpu_supports("avx512vnni");
  return isa == Isa::kAvx512 && vnni ? packed_matvec_avx512vnni : nullptr;
#else
  (void)isa;
  return nullptr;
#endif
}

}  // namespace laya::cpu

namespace laya::cpu {
QuantizeXFn quantize_x_best(Isa isa) {
#if defined(LAYA_HAVE_X86)
  if (packed_matvec_best(isa) == packed_matvec_avx512vnni) return quantize_x_avx512;
#else
  (void)isa;
#endif
  return quantize_x;
}
}  // namespace laya::cpu
