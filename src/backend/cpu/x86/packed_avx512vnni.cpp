// AVX-512 VNNI matrix-vector product over packed Q8_0 weights (packed.h).
#include <immintrin.h>

// GCC 12 reports the intrinsics' own "undefined" pass-through operands
// (_mm512_undefined_*) as maybe-uninitialized once they are inlined here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "backend/cpu/packed.h"

namespace laya::cpu {

namespace {

// One block of 32 columns × 16 rows: the two-term dot products, scaled.
inline __m512 q8_block(const uint8_t* qb, const uint8_t* scales, const QuantizedX& x, int64_t b, __m512 acc) {
  const int32_t* xh = reinterpret_cast<const int32_t*>(x.hi + b * 32);
  const int32_t* xl = reinterpret_cast<const int32_t*>(x.lo + b * 32);
  __m512i h0 = _mm512_setzero_si512(), h1 = _mm512_setzero_si512();
  __m512i l0 = _mm512_setzero_si512(), l1 = _mm512_setzero_si512();
  for (int j = 0; j < 8; j += 2) {
    const __m512i w0 = _mm512_load_si512(qb + j * 64);
    const __m512i w1 = _mm512_load_si512(qb + (j + 1) * 64);
    h0 = _mm512_dpbusd_epi32(h0, w0, _mm512_set1_epi32(xh[j]));
    l0 = _mm512_dpbusd_epi32(l0, w0, _mm512_set1_epi32(xl[j]));
    h1 = _mm512_dpbusd_epi32(h1, w1, _mm512_set1_epi32(xh[j + 1]));
    l1 = _mm512_dpbusd_epi32(l1, w1, _mm512_set1_epi32(xl[j + 1]));
  }
  __m512i s = _mm512_add_epi32(_mm512_slli_epi32(_mm512_add_epi32(h0, h1), 7), _mm512_add_epi32(l0, l1));
  s = _mm512_sub_epi32(s, _mm512_set1_epi32(x.corr[b]));
  const __m512 sc = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(scales)));
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(sc, _mm512_set1_ps(x.d[b])), acc);
}

// How far ahead of the record being computed the loads are requested. The
// groups of a thread's range are contiguous, so the stream runs straight on
// into the next group (and harmlessly past the range's end). Measured on the
// 2-core EPYC: 1 record ahead 28 GB/s, 4-6 ahead 41 GB/s (one core's
// sequential read rate is ~40 GB/s).
constexpr size_t kQ8PrefetchBytes = 6 * kQ8PairBytes;

}  // namespace

void packed_matvec_avx512vnni(const PackedMatrix& m, int64_t g_begin, int64_t g_end, const QuantizedX& x, float* y) {
  const int64_t nb = m.nb, pairs = nb / 2;
  for (int64_t g = g_begin; g < g_end; ++g) {
    const uint8_t* gp = m.group(g);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t p = 0; p < pairs; ++p) {
      const uint8_t* rec = gp + static_cast<size_t>(p) * kQ8PairBytes;
      const char* pf = reinterpret_cast<const char*>(rec + kQ8PrefetchBytes);
      for (int l = 0; l < 17; ++l) _mm_prefetch(pf + l * 64, _MM_HINT_T0);
      acc = q8_block(rec + 64, rec, x, 2 * p, acc);
      acc = q8_block(rec + 64 + 512, rec + 32, x, 2 * p + 1, acc);
    }
    if (nb % 2) acc = q8_block(gp + q8_quants_at(nb - 1), gp + q8_scales_at(nb - 1), x, nb - 1, acc);
    _mm512_storeu_ps(y + g * kPackRows, acc);
  }
}

}  // namespace laya::cpu

namespace laya::cpu {

void quantize_x_avx512(const float* x, int64_t cols, QuantizedX* q) {
  q->nb = cols / 32;
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t b = 0; b < q->nb; ++b) {
    const __m512 x0 = _mm512_loadu_ps(x + b * 32), x1 = _mm512_loadu_ps(x + b * 32 + 16);
    const __m512 ax = _mm512_max_ps(_mm512_andnot_ps(sign, x0), _mm512_andnot_ps(sign, x1));
    const float amax = _mm512_reduce_max_ps(ax);
    const float d = amax / 127.0f;
    const float idf = d > 0 ? 1.0f / d : 0.0f;
    const __m512 id = _mm512_set1_ps(idf), dv = _mm512_set1_ps(d), id128 = _mm512_set1_ps(idf * 128.0f);
    const __m512i h0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, id));
    const __m512i h1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, id));
    const __m512 r0 = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(h0), dv, x0);
    const __m512 r1 = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(h1), dv, x1);
    const __m512i l0 = _mm512_cvtps_epi32(_mm512_mul_ps(r0, id128));
    const __m512i l1 = _mm512_cvtps_epi32(_mm512_mul_ps(r1, id128));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q->hi + b * 32), _mm512_cvtsepi32_epi8(h0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q->hi + b * 32 + 16), _mm512_cvtsepi32_epi8(h1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q->lo + b * 32), _mm512_cvtsepi32_epi8(l0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q->lo + b * 32 + 16), _mm512_cvtsepi32_epi8(l1));
    const int32_t shi = _mm512_reduce_add_epi32(_mm512_add_epi32(h0, h1));
    const int32_t slo = _mm512_reduce_add_epi32(_mm512_add_epi32(l0, l1));
    q->d[b] = d / 128.0f;
    q->corr[b] = 128 * (128 * shi + slo);
    if (q->sum) q->sum[b] = _mm512_reduce_add_ps(_mm512_add_ps(x0, x1));
    if (q->corr16) {
      q->corr16[2 * b] = 32 * (128 * _mm512_reduce_add_epi32(h0) + _mm512_reduce_add_epi32(l0));
      q->corr16[2 * b + 1] = 32 * (128 * _mm512_reduce_add_epi32(h1) + _mm512_reduce_add_epi32(l1));
    }
  }
}

}  // namespace laya::cpu

namespace laya::cpu {

void packed_matvec_q4k_avx512vnni(const PackedMatrix& m, int64_t g_begin, int64_t g_end, const QuantizedX& x, float* y) {
  const int64_t nsb = m.cols / 256;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  constexpr size_t kSb = kQ4kRecordBytes;
  for (int64_t g = g_begin; g < g_end; ++g) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; ++sb) {
      const uint8_t* p = m.group(g) + static_cast<size_t>(sb) * kSb;
      const __m512 dv = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
      const __m512 dmv = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32)));
      const uint8_t* sc = p + 64;
      const uint8_t* mn = p + 192;
      const uint8_t* q = p + 320;
      for (int s = 0; s < 8; ++s) {
        // Request the record 3 ahead (~7 KB, as for Q8_0: 1 ahead read 15 % slower).
        for (int l = 0; l < 5; ++l) _mm_prefetch(reinterpret_cast<const char*>(p + 3 * kSb + (s * 5 + l) * 64), _MM_HINT_T0);
        const int64_t b = sb * 8 + s;
        const int32_t* xh = reinterpret_cast<const int32_t*>(x.hi + b * 32);
        const int32_t* xl = reinterpret_cast<const int32_t*>(x.lo + b * 32);
        __m512i h0 = _mm512_setzero_si512(), h1 = _mm512_setzero_si512();
        __m512i l0 = _mm512_setzero_si512(), l1 = _mm512_setzero_si512();
        for (int o = 0; o < 4; ++o) {
          const __m512i v = _mm512_load_si512(q + (s * 4 + o) * 64);
          const __m512i qa = _mm512_and_si512(v, low4);
          const __m512i qb = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
          h0 = _mm512_dpbusd_epi32(h0, qa, _mm512_set1_epi32(xh[2 * o]));
          l0 = _mm512_dpbusd_epi32(l0, qa, _mm512_set1_epi32(xl[2 * o]));
          h1 = _mm512_dpbusd_epi32(h1, qb, _mm512_set1_epi32(xh[2 * o + 1]));
          l1 = _mm512_dpbusd_epi32(l1, qb, _mm512_set1_epi32(xl[2 * o + 1]));
        }
        const __m512i sI = _mm512_add_epi32(_mm512_slli_epi32(_mm512_add_epi32(h0, h1), 7), _mm512_add_epi32(l0, l1));
        const __m512 scf = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(sc + s * 16))));
        const __m512 mnf = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(mn + s * 16))));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sI), _mm512_mul_ps(_mm512_mul_ps(dv, scf), _mm512_set1_ps(x.d[b])), acc);
        acc = _mm512_fnmadd_ps(_mm512_mul_ps(dmv, mnf), _mm512_set1_ps(x.sum[b]), acc);
      }
    }
    _mm512_storeu_ps(y + g * kPackRows, acc);
  }
}

}  // namespace laya::cpu

namespace laya::cpu {

void packed_matvec_q6k_avx512vnni(const PackedMatrix& m, int64_t g_begin, int64_t g_end, const QuantizedX& x, float* y) {
  const int64_t nsb = m.cols / 256;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i two = _mm512_set1_epi8(0x03);
  constexpr size_t kSb = kQ6kRecordBytes;  // not a multiple of 64: unaligned loads
  for (int64_t g = g_begin; g < g_end; ++g) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; ++sb) {
      const uint8_t* p = m.group(g) + static_cast<size_t>(sb) * kSb;
      const __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
      const int8_t* sc = reinterpret_cast<const int8_t*>(p + 32);
      const uint8_t* lo = p + 288;
      const uint8_t* hi = p + 288 + 2048;
      for (int j = 0; j < 16; ++j) {  // sub-block of 16 values: octets 2j, 2j+1
        // Request the record 2 ahead (~7 KB; 1 ahead read 8 % slower).
        for (int l = 0; l < 4; ++l) _mm_prefetch(reinterpret_cast<const char*>(p + 2 * kSb + (j * 4 + l) * 64), _MM_HINT_T0);
        const int64_t b = sb * 8 + j / 2;
        const int half = (j % 2) * 4;  // int32 offset of this half of the x block
        const int32_t* xh = reinterpret_cast<const int32_t*>(x.hi + b * 32) + half;
        const int32_t* xl = reinterpret_cast<const int32_t*>(x.lo + b * 32) + half;
        const __m512i h = _mm512_loadu_si512(hi + j * 64);
        const __m512i v0 = _mm512_loadu_si512(lo + (2 * j) * 64);
        const __m512i v1 = _mm512_loadu_si512(lo + (2 * j + 1) * 64);
        // Octet 2j: bits 0-1 / 2-3 of h; octet 2j+1: bits 4-5 / 6-7.
        const __m512i q0a = _mm512_or_si512(_mm512_and_si512(v0, low4), _mm512_slli_epi16(_mm512_and_si512(h, two), 4));
        const __m512i q0b = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v0, 4), low4),
                                            _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 2), two), 4));
        const __m512i q1a = _mm512_or_si512(_mm512_and_si512(v1, low4),
                                            _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 4), two), 4));
        const __m512i q1b = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v1, 4), low4),
                                            _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 6), two), 4));
        __m512i sh = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q0a, _mm512_set1_epi32(xh[0]));
        __m512i sl = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q0a, _mm512_set1_epi32(xl[0]));
        sh = _mm512_dpbusd_epi32(sh, q0b, _mm512_set1_epi32(xh[1]));
        sl = _mm512_dpbusd_epi32(sl, q0b, _mm512_set1_epi32(xl[1]));
        sh = _mm512_dpbusd_epi32(sh, q1a, _mm512_set1_epi32(xh[2]));
        sl = _mm512_dpbusd_epi32(sl, q1a, _mm512_set1_epi32(xl[2]));
        sh = _mm512_dpbusd_epi32(sh, q1b, _mm512_set1_epi32(xh[3]));
        sl = _mm512_dpbusd_epi32(sl, q1b, _mm512_set1_epi32(xl[3]));
        __m512i sI = _mm512_add_epi32(_mm512_slli_epi32(sh, 7), sl);
        sI = _mm512_sub_epi32(sI, _mm512_set1_epi32(x.corr16[sb * 16 + j]));
        const __m512 scf = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc + j * 16))));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sI), _mm512_mul_ps(_mm512_mul_ps(dv, scf), _mm512_set1_ps(x.d[b])), acc);
      }
    }
    _mm512_storeu_ps(y + g * kPackRows, acc);
  }
}

}  // namespace laya::cpu

namespace laya::cpu {

void packed_matvec_q5_0_avx512vnni(const PackedMatrix& m, int64_t g_begin, int64_t g_end, const QuantizedX& x, float* y) {
  constexpr size_t kBlk = kQ5RecordBytes;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i bit5 = _mm512_set1_epi8(0x10);
  // Per 4-byte row lane, byte i tests bit i (low-nibble values) or bit 4+i.
  const __m512i test_lo = _mm512_set1_epi32(0x08040201);
  const __m512i test_hi = _mm512_set1_epi32(static_cast<int32_t>(0x80402010u));
  __m512i spread[4];  // byte o of each row's high-bit word, copied to the lane's 4 bytes
  for (int o = 0; o < 4; ++o) {
    alignas(64) int8_t c[64];
    for (int j = 0; j < 64; ++j) c[j] = static_cast<int8_t>((j % 16) / 4 * 4 + o);
    spread[o] = _mm512_load_si512(c);
  }
  for (int64_t g = g_begin; g < g_end; ++g) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < m.nb; ++b) {
      const uint8_t* p = m.group(g) + static_cast<size_t>(b) * kBlk;
      // ~7 KB ahead, as the other layouts (4 blocks ahead read 7 % slower).
      for (int l = 0; l < 6; ++l) _mm_prefetch(reinterpret_cast<const char*>(p + 20 * kBlk + l * 64), _MM_HINT_T0);
      const __m512i hb = _mm512_loadu_si512(p + 32);
      const int32_t* xh = reinterpret_cast<const int32_t*>(x.hi + b * 32);
      const int32_t* xl = reinterpret_cast<const int32_t*>(x.lo + b * 32);
      __m512i h0 = _mm512_setzero_si512(), h1 = _mm512_setzero_si512();
      __m512i l0 = _mm512_setzero_si512(), l1 = _mm512_setzero_si512();
      for (int o = 0; o < 4; ++o) {
        const __m512i v = _mm512_loadu_si512(p + 96 + o * 64);
        const __m512i hs = _mm512_shuffle_epi8(hb, spread[o]);
        __m512i qa = _mm512_and_si512(v, low4);
        __m512i qb = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
        qa = _mm512_or_si512(qa, _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(hs, test_lo), bit5));
        qb = _mm512_or_si512(qb, _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(hs, test_hi), bit5));
        h0 = _mm512_dpbusd_epi32(h0, qa, _mm512_set1_epi32(xh[2 * o]));
        l0 = _mm512_dpbusd_epi32(l0, qa, _mm512_set1_epi32(xl[2 * o]));
        h1 = _mm512_dpbusd_epi32(h1, qb, _mm512_set1_epi32(xh[2 * o + 1]));
        l1 = _mm512_dpbusd_epi32(l1, qb, _mm512_set1_epi32(xl[2 * o + 1]));
      }
      __m512i sI = _mm512_add_epi32(_mm512_slli_epi32(_mm512_add_epi32(h0, h1), 7), _mm512_add_epi32(l0, l1));
      sI = _mm512_sub_epi32(sI, _mm512_set1_epi32(x.corr[b] / 8));  // the −16 offset: 16·(128Σhi + Σlo)
      const __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sI), _mm512_mul_ps(dv, _mm512_set1_ps(x.d[b])), acc);
    }
    _mm512_storeu_ps(y + g * kPackRows, acc);
  }
}

}  // namespace laya::cpu

namespace laya::cpu {

namespace {
inline __m512i field(__m512i v, int shift, int mask) {
  return _mm512_and_si512(_mm512_srlv_epi32(v, _mm512_set1_epi32(shift)), _mm512_set1_epi32(mask));
}
}  // namespace

// Prefill: group g straight into the transposed tile wt (cols, 16) that the
// outer-product GEMM reads — lane r of every packed vector is row r, so this
// is shifts and masks, with no separate transpose.
void dequantize_group_t_avx512(const PackedMatrix& m, int64_t g, float* wt) {
  const uint8_t* gp = m.group(g);
  if (m.type == DType::Q8_0) {
    for (int64_t b = 0; b < m.nb; ++b) {
      const __m512 sv = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(gp + q8_scales_at(b))));
      for (int j = 0; j < 8; ++j) {
        const __m512i v = _mm512_load_si512(gp + q8_quants_at(b) + j * 64);
        for (int i = 0; i < 4; ++i) {
          const __m512i q = _mm512_sub_epi32(field(v, 8 * i, 0xFF), _mm512_set1_epi32(128));
          _mm512_storeu_ps(wt + (b * 32 + 4 * j + i) * 16, _mm512_mul_ps(_mm512_cvtepi32_ps(q), sv));
        }
      }
    }
    return;
  }
  if (m.type == DType::Q4_K) {
    constexpr size_t kSb = kQ4kRecordBytes;
    for (int64_t sb = 0; sb < m.cols / 256; ++sb) {
      const uint8_t* p = gp + static_cast<size_t>(sb) * kSb;
      const __m512 dv = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
      const __m512 dmv = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32)));
      for (int s = 0; s < 8; ++s) {
        const __m512 a = _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p + 64 + s * 16)))));
        const __m512 mb = _mm512_mul_ps(dmv, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p + 192 + s * 16)))));
        for (int o = 0; o < 4; ++o) {
          const __m512i v = _mm512_load_si512(p + 320 + (s * 4 + o) * 64);
          for (int i = 0; i < 4; ++i) {
            const int64_t k = sb * 256 + s * 32 + 8 * o + i;
            _mm512_storeu_ps(wt + k * 16, _mm512_fmsub_ps(a, _mm512_cvtepi32_ps(field(v, 8 * i, 0xF)), mb));
            _mm512_storeu_ps(wt + (k + 4) * 16, _mm512_fmsub_ps(a, _mm512_cvtepi32_ps(field(v, 8 * i + 4, 0xF)), mb));
          }
        }
      }
    }
    return;
  }
  if (m.type == DType::Q6_K) {
    constexpr size_t kSb = kQ6kRecordBytes;
    for (int64_t sb = 0; sb < m.cols / 256; ++sb) {
      const uint8_t* p = gp + static_cast<size_t>(sb) * kSb;
      const __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
      for (int o = 0; o < 32; ++o) {
        const __m512 sc = _mm512_mul_ps(
            dv, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32 + (o / 2) * 16)))));
        const __m512i v = _mm512_loadu_si512(p + 288 + o * 64);
        const __m512i h = _mm512_loadu_si512(p + 288 + 2048 + (o / 2) * 64);
        const int hs = (o % 2) * 4;
        for (int i = 0; i < 4; ++i) {
          const __m512i qa = _mm512_or_si512(field(v, 8 * i, 0xF), _mm512_slli_epi32(field(h, 8 * i + hs, 3), 4));
          const __m512i qb = _mm512_or_si512(field(v, 8 * i + 4, 0xF), _mm512_slli_epi32(field(h, 8 * i + hs + 2, 3), 4));
          const int64_t k = sb * 256 + 8 * o + i;
          _mm512_storeu_ps(wt + k * 16, _mm512_mul_ps(sc, _mm512_cvtepi32_ps(_mm512_sub_epi32(qa, _mm512_set1_epi32(32)))));
          _mm512_storeu_ps(wt + (k + 4) * 16, _mm512_mul_ps(sc, _mm512_cvtepi32_ps(_mm512_sub_epi32(qb, _mm512_set1_epi32(32)))));
        }
      }
    }
    return;
  }
  // Q5_0
  constexpr size_t kBlk = kQ5RecordBytes;
  for (int64_t b = 0; b < m.nb; ++b) {
    const uint8_t* p = gp + static_cast<size_t>(b) * kBlk;
    const __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    const __m512i hb = _mm512_loadu_si512(p + 32);
    for (int o = 0; o < 4; ++o) {
      const __m512i v = _mm512_loadu_si512(p + 96 + o * 64);
      for (int i = 0; i < 4; ++i) {
        const __m512i qa = _mm512_or_si512(field(v, 8 * i, 0xF), _mm512_slli_epi32(field(hb, 8 * o + i, 1), 4));
        const __m512i qb = _mm512_or_si512(field(v, 8 * i + 4, 0xF), _mm512_slli_epi32(field(hb, 8 * o + 4 + i, 1), 4));
        const int64_t k = b * 32 + 8 * o + i;
        _mm512_storeu_ps(wt + k * 16, _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_sub_epi32(qa, _mm512_set1_epi32(16)))));
        _mm512_storeu_ps(wt + (k + 4) * 16, _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_sub_epi32(qb, _mm512_set1_epi32(16)))));
      }
    }
  }
}

}  // namespace laya::cpu

namespace laya::cpu {

// Prefill over packed Q8_0 / Q4_K: several tokens' two-term int8 activations
// against one group at a time, so each weight vector loaded feeds 2 × nt
// vpdpbusd. y[t * ldy + g * 16 + r].
namespace {

template <int NT>
void q8_tokens(const PackedMatrix& m, int64_t g, const QuantizedX* xs, float* y, int64_t ldy) {
  const uint8_t* gp = m.group(g);
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < m.nb; ++b) {
    if (b % 2 == 0) {  // the matvec's prefetch distance: a pass of a few tokens streams the weights as decode does
      const char* pf = reinterpret_cast<const char*>(gp + q8_scales_at(b) + kQ8PrefetchBytes);
      for (int l = 0; l < 17; ++l) _mm_prefetch(pf + l * 64, _MM_HINT_T0);
    }
    const uint8_t* qb = gp + q8_quants_at(b);
    __m512i h[NT], l[NT];
    for (int t = 0; t < NT; ++t) h[t] = l[t] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      const __m512i w = _mm512_load_si512(qb + j * 64);
      for (int t = 0; t < NT; ++t) {
        h[t] = _mm512_dpbusd_epi32(h[t], w, _mm512_set1_epi32(reinterpret_cast<const int32_t*>(xs[t].hi + b * 32)[j]));
        l[t] = _mm512_dpbusd_epi32(l[t], w, _mm512_set1_epi32(reinterpret_cast<const int32_t*>(xs[t].lo + b * 32)[j]));
      }
    }
    const __m512 sc = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(gp + q8_scales_at(b))));
    for (int t = 0; t < NT; ++t) {
      __m512i s = _mm512_add_epi32(_mm512_slli_epi32(h[t], 7), l[t]);
      s = _mm512_sub_epi32(s, _mm512_set1_epi32(xs[t].corr[b]));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(sc, _mm512_set1_ps(xs[t].d[b])), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y + t * ldy + g * kPackRows, acc[t]);
}

template <int NT>
void q4k_tokens(const PackedMatrix& m, int64_t g, const QuantizedX* xs, float* y, int64_t ldy) {
  constexpr size_t kSb = kQ4kRecordBytes;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < m.cols / 256; ++sb) {
    const uint8_t* p = m.group(g) + static_cast<size_t>(sb) * kSb;
    const __m512 dv = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
    const __m512 dmv = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32)));
    for (int s = 0; s < 8; ++s) {
      const int64_t b = sb * 8 + s;
      __m512i h[NT], l[NT];
      for (int t = 0; t < NT; ++t) h[t] = l[t] = _mm512_setzero_si512();
      for (int o = 0; o < 4; ++o) {
        const __m512i v = _mm512_load_si512(p + 320 + (s * 4 + o) * 64);
        const __m512i qa = _mm512_and_si512(v, low4);
        const __m512i qb = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
        for (int t = 0; t < NT; ++t) {
          const int32_t* xh = reinterpret_cast<const int32_t*>(xs[t].hi + b * 32);
          const int32_t* xl = reinterpret_cast<const int32_t*>(xs[t].lo + b * 32);
          h[t] = _mm512_dpbusd_epi32(h[t], qa, _mm512_set1_epi32(xh[2 * o]));
          l[t] = _mm512_dpbusd_epi32(l[t], qa, _mm512_set1_epi32(xl[2 * o]));
          h[t] = _mm512_dpbusd_epi32(h[t], qb, _mm512_set1_epi32(xh[2 * o + 1]));
          l[t] = _mm512_dpbusd_epi32(l[t], qb, _mm512_set1_epi32(xl[2 * o + 1]));
        }
      }
      const __m512 a = _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p + 64 + s * 16)))));
      const __m512 mb = _mm512_mul_ps(dmv, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p + 192 + s * 16)))));
      for (int t = 0; t < NT; ++t) {
        const __m512i sI = _mm512_add_epi32(_mm512_slli_epi32(h[t], 7), l[t]);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sI), _mm512_mul_ps(a, _mm512_set1_ps(xs[t].d[b])), acc[t]);
        acc[t] = _mm512_fnmadd_ps(mb, _mm512_set1_ps(xs[t].sum[b]), acc[t]);
      }
    }
  }
  for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y + t * ldy + g * kPackRows, acc[t]);
}

}  // namespace

bool packed_gemm_supported(DType type) { return type == DType::Q8_0 || type == DType::Q4_K; }

void packed_gemm_avx512vnni(const PackedMatrix& m, int64_t g_begin, int64_t g_end, const QuantizedX* xs, int64_t n_tok,
                            float* y, int64_t ldy) {
  for (int64_t g = g_begin; g < g_end; ++g) {
    // The last 1-3 tokens in one sweep too: a pass of 2 or 3 tokens (a short
    // draft being checked) reads the group once, not once per token.
    int64_t t = 0;
    if (m.type == DType::Q8_0) {
      for (; t + 4 <= n_tok; t += 4) q8_tokens<4>(m, g, xs + t, y + t * ldy, ldy);
      switch (n_tok - t) {
        case 3: q8_tokens<3>(m, g, xs + t, y + t * ldy, ldy); break;
        case 2: q8_tokens<2>(m, g, xs + t, y + t * ldy, ldy); break;
        case 1: q8_tokens<1>(m, g, xs + t, y + t * ldy, ldy); break;
        default: break;
      }
    } else {
      for (; t + 4 <= n_tok; t += 4) q4k_tokens<4>(m, g, xs + t, y + t * ldy, ldy);
      switch (n_tok - t) {
        case 3: q4k_tokens<3>(m, g, xs + t, y + t * ldy, ldy); break;
        case 2: q4k_tokens<2>(m, g, xs + t, y + t * ldy, ldy); break;
        case 1: q4k_tokens<1>(m, g, xs + t, y + t * ldy, ldy); break;
        default: break;
      }
    }
  }
}

}  // namespace laya::cpu
