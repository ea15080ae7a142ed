// AVX-512 (F/BW/VL/DQ) kernels. Called only after a runtime CPU check (see
// kernels.cpp). Same structure as the AVX2 file with 16 lanes: weights are
// dequantized in registers to the reference's float values and multiplied with
// float32 activations, accumulated with several FMA chains; tails of plain-float
// rows use masked loads.
#include <immintrin.h>

// GCC 12's AVX-512 headers trip -Wuninitialized (their _mm512_undefined_*).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <cstring>

#include "backend/cpu/kernels.h"
#include "backend/cpu/x86/vec_avx512.h"
#include "backend/cpu/vec_ops.h"  // after the vector type: scale, mul, gelu, softcap, layer_norm
#include "core/dtype.h"

namespace laya::cpu {
namespace {

// Local scalar helpers (no header inline functions: an out-of-line copy compiled
// with AVX-512 flags could be picked by the linker for other translation units).
inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

inline __m512i load16_u8(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m512i load16_i8(const int8_t* p) {
  return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m512 cvt(__m512i v) { return _mm512_cvtepi32_ps(v); }
// Broadcast from memory (a load-port operation; keeps the compiler from turning
// per-sub-block scale broadcasts into shuffle-port permutes).
inline __m512 bcast(const float* p) {
  __m512 r;
  __asm__("vbroadcastss %1, %0" : "=v"(r) : "m"(*p));
  return r;
}
inline __mmask16 tail_mask(int64_t r) { return static_cast<__mmask16>((1u << r) - 1u); }

// ---- plain floats ------------------------------------------------------------------

float dot_f32(const float* a, const float* b, int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
    acc2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32), acc2);
    acc3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48), acc3);
  }
  for (; i + 16 <= n; i += 16) acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

void axpy_f32(float a, const float* x, float* y, int64_t n) {
  const __m512 va = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
    _mm512_storeu_ps(y + i + 16,
                     _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16)));
  }
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 r = _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i));
    _mm512_mask_storeu_ps(y + i, m, r);
  }
}

float dot_row_f32(const void* w, const float* x, int64_t n) {
  return dot_f32(static_cast<const float*>(w), x, n);
}

void deq_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

inline __m512 cvt_f16(__m256i v) { return _mm512_cvtph_ps(v); }
inline __m512 cvt_bf16(__m256i v) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

template <__m512 (*kCvt)(__m256i)>
inline __m512 load_half(const uint16_t* p) {
  return kCvt(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
template <__m512 (*kCvt)(__m256i)>
inline __m512 load_half_tail(const uint16_t* p, __mmask16 m) {
  return kCvt(_mm256_maskz_loadu_epi16(m, p));
}

template <__m512 (*kCvt)(__m256i)>
float dot_row_half(const void* w, const float* x, int64_t n) {
  const uint16_t* p = static_cast<const uint16_t*>(w);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    acc0 = _mm512_fmadd_ps(load_half<kCvt>(p + i), _mm512_loadu_ps(x + i), acc0);
    acc1 = _mm512_fmadd_ps(load_half<kCvt>(p + i + 16), _mm512_loadu_ps(x + i + 16), acc1);
    acc2 = _mm512_fmadd_ps(load_half<kCvt>(p + i + 32), _mm512_loadu_ps(x + i + 32), acc2);
    acc3 = _mm512_fmadd_ps(load_half<kCvt>(p + i + 48), _mm512_loadu_ps(x + i + 48), acc3);
  }
  for (; i + 16 <= n; i += 16) acc0 = _mm512_fmadd_ps(load_half<kCvt>(p + i), _mm512_loadu_ps(x + i), acc0);
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    acc1 = _mm512_fmadd_ps(load_half_tail<kCvt>(p + i, m), _mm512_maskz_loadu_ps(m, x + i), acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

template <__m512 (*kCvt)(__m256i)>
void deq_half(const void* src, float* dst, int64_t n) {
  const uint16_t* p = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, load_half<kCvt>(p + i));
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(dst + i, m, load_half_tail<kCvt>(p + i, m));
  }
}

// ---- 32-element blocks -------------------------------------------------------------
// Each unpacker yields the integer quants of elements 0-15 and 16-31.

struct Q8_0U {
  using Block = BlockQ8_0;
  static constexpr bool kHasMin = false;
  static void unpack(const Block& b, __m512i q[2]) {
    q[0] = load16_i8(b.qs);
    q[1] = load16_i8(b.qs + 16);
  }
  static float min(const Block&) { return 0.0f; }
};

inline void unpack_nibbles(const uint8_t* qs, __m512i q[2]) {
  const __m512i v = load16_u8(qs);
  q[0] = _mm512_and_si512(v, _mm512_set1_epi32(0x0F));
  q[1] = _mm512_srli_epi32(v, 4);
}

// Adds the 5th bit (bit e of qh for element e) as 16.
inline void add_high_bits(const uint8_t* qh_bytes, __m512i q[2]) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof(qh));
  const __m512i b16 = _mm512_set1_epi32(16);
  q[0] = _mm512_mask_or_epi32(q[0], static_cast<__mmask16>(qh & 0xFFFFu), q[0], b16);
  q[1] = _mm512_mask_or_epi32(q[1], static_cast<__mmask16>(qh >> 16), q[1], b16);
}

struct Q4_0U {
  using Block = BlockQ4_0;
  static constexpr bool kHasMin = false;
  static void unpack(const Block& b, __m512i q[2]) {
    unpack_nibbles(b.qs, q);
    const __m512i k = _mm512_set1_epi32(8);
    q[0] = _mm512_sub_epi32(q[0], k);
    q[1] = _mm512_sub_epi32(q[1], k);
  }
  static float min(const Block&) { return 0.0f; }
};

struct Q4_1U {
  using Block = BlockQ4_1;
  static constexpr bool kHasMin = true;
  static void unpack(const Block& b, __m512i q[2]) { unpack_nibbles(b.qs, q); }
  static float min(const Block& b) { return h2f(b.m); }
};

struct Q5_0U {
  using Block = BlockQ5_0;
  static constexpr bool kHasMin = false;
  static void unpack(const Block& b, __m512i q[2]) {
    unpack_nibbles(b.qs, q);
    add_high_bits(b.qh, q);
    const __m512i k = _mm512_set1_epi32(16);
    q[0] = _mm512_sub_epi32(q[0], k);
    q[1] = _mm512_sub_epi32(q[1], k);
  }
  static float min(const Block&) { return 0.0f; }
};

struct Q5_1U {
  using Block = BlockQ5_1;
  static constexpr bool kHasMin = true;
  static void unpack(const Block& b, __m512i q[2]) {
    unpack_nibbles(b.qs, q);
    add_high_bits(b.qh, q);
  }
  static float min(const Block& b) { return h2f(b.m); }
};

template <class U>
inline __m512 block_partial(const typename U::Block& b, const float* x, __m512* acc) {
  __m512i q[2];
  U::unpack(b, q);
  const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
  const __m512 s = _mm512_fmadd_ps(cvt(q[1]), x1, _mm512_mul_ps(cvt(q[0]), x0));
  *acc = _mm512_fmadd_ps(s, _mm512_set1_ps(h2f(b.d)), *acc);
  if constexpr (U::kHasMin) {
    return _mm512_mul_ps(_mm512_add_ps(x0, x1), _mm512_set1_ps(U::min(b)));
  } else {
    return _mm512_setzero_ps();
  }
}

template <class U>
float dot_row_b32(const void* w, const float* x, int64_t n) {
  const typename U::Block* b = static_cast<const typename U::Block*>(w);
  const int64_t nb = n / 32;
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m512 mins0 = _mm512_setzero_ps(), mins1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const __m512 m0 = block_partial<U>(b[i], x + i * 32, &acc0);
    const __m512 m1 = block_partial<U>(b[i + 1], x + i * 32 + 32, &acc1);
    if constexpr (U::kHasMin) {
      mins0 = _mm512_add_ps(mins0, m0);
      mins1 = _mm512_add_ps(mins1, m1);
    }
  }
  if (i < nb) {
    const __m512 m0 = block_partial<U>(b[i], x + i * 32, &acc0);
    if constexpr (U::kHasMin) mins0 = _mm512_add_ps(mins0, m0);
  }
  __m512 acc = _mm512_add_ps(acc0, acc1);
  if constexpr (U::kHasMin) acc = _mm512_add_ps(acc, _mm512_add_ps(mins0, mins1));
  return _mm512_reduce_add_ps(acc);
}

template <class U>
void deq_b32(const void* src, float* dst, int64_t n) {
  const typename U::Block* b = static_cast<const typename U::Block*>(src);
  const int64_t nb = n / 32;
  for (int64_t i = 0; i < nb; ++i) {
    __m512i q[2];
    U::unpack(b[i], q);
    const __m512 d = _mm512_set1_ps(h2f(b[i].d));
    float* y = dst + i * 32;
    if constexpr (U::kHasMin) {
      // q*d is exact (<= 5 bits times an fp16), so the fused add rounds like q*d + m.
      const __m512 m = _mm512_set1_ps(U::min(b[i]));
      _mm512_storeu_ps(y, _mm512_fmadd_ps(cvt(q[0]), d, m));
      _mm512_storeu_ps(y + 16, _mm512_fmadd_ps(cvt(q[1]), d, m));
    } else {
      _mm512_storeu_ps(y, _mm512_mul_ps(cvt(q[0]), d));
      _mm512_storeu_ps(y + 16, _mm512_mul_ps(cvt(q[1]), d));
    }
  }
}

// ---- K-quants ----------------------------------------------------------------------

// The 8 six-bit scales and 8 mins of a Q4_K/Q5_K block times d / dmin:
// [d*sc0 .. d*sc7, dmin*m0 .. dmin*m7], the same float products as the
// reference's. Unpacked in registers (ggml's 32-bit mask formulas, one lane per
// output word): going through memory here stalls on store forwarding.
// dm points at the block's d (dmin follows it); 16 bytes are read at scales
// (12 used, the rest is the block's qs).
inline __m512 k4_scales(const uint16_t* dm, const uint8_t* scales) {
  const __m128i u = _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales));
  const __m128i p = _mm_shuffle_epi32(u, _MM_SHUFFLE(2, 1, 2, 0));  // u0 u2 u1 u2
  const __m128i q = _mm_shuffle_epi32(u, _MM_SHUFFLE(1, 1, 0, 0));  // u0 u0 u1 u1
  const __m128i lo = _mm_and_si128(_mm_srlv_epi32(p, _mm_setr_epi32(0, 0, 0, 4)),
                                   _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
  const __m128i hi = _mm_and_si128(_mm_srli_epi32(q, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
  const __m128i o = _mm_or_si128(lo, hi);  // sc0..7, m0..7 as bytes
  uint32_t bits;
  std::memcpy(&bits, dm, sizeof(bits));
  const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(bits)));  // d, dmin, 0, 0
  const __m512 dd = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                                          _mm512_castps128_ps512(f));
  return _mm512_mul_ps(cvt(_mm512_cvtepu8_epi32(o)), dd);
}

// Q4_K / Q5_K: element 64*jj + l (l < 32) is the low nibble of qs[32*jj + l] with
// scale 2*jj, element 64*jj + 32 + l the high nibble with scale 2*jj + 1.
// The 5th bit of Q5_K is bit 2*jj (low) / 2*jj + 1 (high) of qh[l].
template <bool kQ5, bool kStore>
inline void kquant45_block(const float* sm, const uint8_t* qs, const uint8_t* qh, const float* x, float* y,
                           __m512 acc[4]) {
  const __m512i m4 = _mm512_set1_epi32(0x0F);
  const __m512i b16 = _mm512_set1_epi32(0x10);
  __m128i h[2];
  if constexpr (kQ5) {
    h[0] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qh));
    h[1] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qh + 16));
  }
  for (int jj = 0; jj < 4; ++jj) {
    const __m512 d1 = bcast(sm + 2 * jj), m1 = bcast(sm + 8 + 2 * jj);
    const __m512 d2 = bcast(sm + 2 * jj + 1), m2 = bcast(sm + 9 + 2 * jj);
    const uint8_t* q = qs + 32 * jj;
    for (int c = 0; c < 2; ++c) {
      const __m512i v = load16_u8(q + 16 * c);
      __m512i lo = _mm512_and_si512(v, m4);
      __m512i hi = _mm512_srli_epi32(v, 4);
      if constexpr (kQ5) {
        const __mmask16 klo = _mm_test_epi8_mask(h[c], _mm_set1_epi8(static_cast<char>(1 << (2 * jj))));
        const __mmask16 khi = _mm_test_epi8_mask(h[c], _mm_set1_epi8(static_cast<char>(2 << (2 * jj))));
        lo = _mm512_mask_or_epi32(lo, klo, lo, b16);
        hi = _mm512_mask_or_epi32(hi, khi, hi, b16);
      }
      // d*sc*q is exact, so fmsub rounds exactly like the reference's d*q - m.
      const __m512 wlo = _mm512_fmsub_ps(cvt(lo), d1, m1);
      const __m512 whi = _mm512_fmsub_ps(cvt(hi), d2, m2);
      const int e = 64 * jj + 16 * c;
      if constexpr (kStore) {
        _mm512_storeu_ps(y + e, wlo);
        _mm512_storeu_ps(y + e + 32, whi);
      } else {
        acc[c] = _mm512_fmadd_ps(wlo, _mm512_loadu_ps(x + e), acc[c]);
        acc[2 + c] = _mm512_fmadd_ps(whi, _mm512_loadu_ps(x + e + 32), acc[2 + c]);
      }
    }
  }
}

inline float reduce4(const __m512 acc[4]) {
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

// Q4_K by table lookup: the 16 possible values d1*q - m1 of a sub-block are
// computed once (the reference's exact float values), and vpermps picks them
// with the low 4 bits of each index lane, replacing mask + convert + fmsub.
// Q4_K by table lookup: the 16 possible values d1*q - m1 of a sub-block are
// computed once (the reference's exact float values), and vpermps picks them
// with the low 4 bits of each index lane, replacing mask + convert + fmsub.
// The scales of block i+1 are stored while block i is processed, so the
// broadcasts load from L1 instead of waiting on store forwarding (and keep the
// shuffle port, the bottleneck here, free).
template <bool kStore>
inline void q4k_lut_block(const BlockQ4_K& b, const float* sm, const float* x, float* y, __m512 acc[4]) {
  const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int jj = 0; jj < 4; ++jj) {
    const __m512 ta = _mm512_fmsub_ps(iota, bcast(sm + 2 * jj), bcast(sm + 8 + 2 * jj));
    const __m512 tb = _mm512_fmsub_ps(iota, bcast(sm + 2 * jj + 1), bcast(sm + 9 + 2 * jj));
    const uint8_t* q = b.qs + 32 * jj;
    for (int c = 0; c < 2; ++c) {
      const __m512i v = load16_u8(q + 16 * c);
      const __m512 wlo = _mm512_permutexvar_ps(v, ta);
      const __m512 whi = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), tb);
      const int e = 64 * jj + 16 * c;
      if constexpr (kStore) {
        _mm512_storeu_ps(y + e, wlo);
        _mm512_storeu_ps(y + e + 32, whi);
      } else {
        acc[c] = _mm512_fmadd_ps(wlo, _mm512_loadu_ps(x + e), acc[c]);
        acc[2 + c] = _mm512_fmadd_ps(whi, _mm512_loadu_ps(x + e + 32), acc[2 + c]);
      }
    }
  }
}

template <bool kStore>
inline void q4k_lut_row(const void* w, const float* x, float* y, int64_t n, __m512 acc[4]) {
  const BlockQ4_K* b = static_cast<const BlockQ4_K*>(w);
  const int64_t nb = n / kQK_K;
  if (nb == 0) return;
  alignas(64) float sm[2][16];
  _mm512_store_ps(sm[0], k4_scales(&b[0].d, b[0].scales));
  for (int64_t i = 0; i < nb; ++i) {
    if (i + 1 < nb) _mm512_store_ps(sm[(i + 1) & 1], k4_scales(&b[i + 1].d, b[i + 1].scales));
    q4k_lut_block<kStore>(b[i], sm[i & 1], kStore ? nullptr : x + i * kQK_K, kStore ? y + i * kQK_K : nullptr, acc);
  }
}

float dot_row_q4_k(const void* w, const float* x, int64_t n) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  q4k_lut_row<false>(w, x, nullptr, n, acc);
  return reduce4(acc);
}

void deq_q4_k(const void* src, float* dst, int64_t n) {
  __m512 unused[4];
  q4k_lut_row<true>(src, nullptr, dst, n, unused);
}

template <bool kStore>
inline void q5k_row(const void* w, const float* x, float* y, int64_t n, __m512 acc[4]) {
  const BlockQ5_K* b = static_cast<const BlockQ5_K*>(w);
  const int64_t nb = n / kQK_K;
  if (nb == 0) return;
  alignas(64) float sm[2][16];  // scales of this block and the next (see q4k_lut_row)
  _mm512_store_ps(sm[0], k4_scales(&b[0].d, b[0].scales));
  for (int64_t i = 0; i < nb; ++i) {
    if (i + 1 < nb) _mm512_store_ps(sm[(i + 1) & 1], k4_scales(&b[i + 1].d, b[i + 1].scales));
    kquant45_block<true, kStore>(sm[i & 1], b[i].qs, b[i].qh, kStore ? nullptr : x + i * kQK_K,
                                 kStore ? y + i * kQK_K : nullptr, acc);
  }
}

float dot_row_q5_k(const void* w, const float* x, int64_t n) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  q5k_row<false>(w, x, nullptr, n, acc);
  return reduce4(acc);
}

void deq_q5_k(const void* src, float* dst, int64_t n) {
  __m512 unused[4];
  q5k_row<true>(src, nullptr, dst, n, unused);
}

// Q6_K: per 128 elements, l < 32: q1 = ql[l] low | qh[l] bits 0-1, q2 = ql[l+32] low |
// bits 2-3, q3 = ql[l] high | bits 4-5, q4 = ql[l+32] high | bits 6-7; minus 32;
// elements l, l+32, l+64, l+96 with scales sc[l/16 + 0, 2, 4, 6].
// Unpacked on bytes: with Q = [qh | qh >> 2] (64 bytes), lo = (ql & 15) | ((Q << 4) & 0x30)
// holds elements 0..63 of the half in order, hi = (ql >> 4 & 15) | (Q & 0x30) elements
// 64..127; 16 bytes = 16 elements with one scale.
// d * scales[k] for the 16 sub-blocks of a Q6_K block.
inline __m512 q6k_scales(const BlockQ6_K& b) {
  return _mm512_mul_ps(cvt(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)))),
                       _mm512_set1_ps(h2f(b.d)));
}

template <bool kStore>
inline void q6k_block(const BlockQ6_K& b, const float* ds, const float* x, float* y, __m512 acc[4]) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i m30 = _mm512_set1_epi8(0x30);
  const __m512i k32 = _mm512_set1_epi8(32);
  for (int nn = 0; nn < 2; ++nn) {
    const __m512i ql = _mm512_loadu_si512(b.ql + 64 * nn);
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * nn));
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
    // m4 ? a : b per bit (ternary logic 0xCA): low nibble from a, bits 4-5 from b.
    const __m512i lo = _mm512_sub_epi8(
        _mm512_ternarylogic_epi32(m4, ql, _mm512_and_si512(_mm512_slli_epi16(q, 4), m30), 0xCA), k32);
    const __m512i hi = _mm512_sub_epi8(
        _mm512_ternarylogic_epi32(m4, _mm512_srli_epi16(ql, 4), _mm512_and_si512(q, m30), 0xCA), k32);
    const float* s = ds + 8 * nn;
    const __m128i l4[4] = {_mm512_castsi512_si128(lo), _mm512_extracti32x4_epi32(lo, 1),
                     _mm512_extracti32x4_epi32(lo, 2), _mm512_extracti32x4_epi32(lo, 3)};
    const __m128i h4[4] = {_mm512_castsi512_si128(hi), _mm512_extracti32x4_epi32(hi, 1),
                     _mm512_extracti32x4_epi32(hi, 2), _mm512_extracti32x4_epi32(hi, 3)};
    for (int k = 0; k < 4; ++k) {
      const __m512 wl = _mm512_mul_ps(cvt(_mm512_cvtepi8_epi32(l4[k])), bcast(s + k));
      const __m512 wh = _mm512_mul_ps(cvt(_mm512_cvtepi8_epi32(h4[k])), bcast(s + 4 + k));
      const int e = 128 * nn + 16 * k;
      if constexpr (kStore) {
        _mm512_storeu_ps(y + e, wl);
        _mm512_storeu_ps(y + e + 64, wh);
      } else {
        acc[k & 1] = _mm512_fmadd_ps(wl, _mm512_loadu_ps(x + e), acc[k & 1]);
        acc[2 + (k & 1)] = _mm512_fmadd_ps(wh, _mm512_loadu_ps(x + e + 64), acc[2 + (k & 1)]);
      }
    }
  }
}

template <bool kStore>
inline void q6k_row(const void* w, const float* x, float* y, int64_t n, __m512 acc[4]) {
  const BlockQ6_K* b = static_cast<const BlockQ6_K*>(w);
  const int64_t nb = n / kQK_K;
  if (nb == 0) return;
  alignas(64) float ds[2][16];  // scales of this block and the next (see q4k_lut_row)
  _mm512_store_ps(ds[0], q6k_scales(b[0]));
  for (int64_t i = 0; i < nb; ++i) {
    if (i + 1 < nb) _mm512_store_ps(ds[(i + 1) & 1], q6k_scales(b[i + 1]));
    q6k_block<kStore>(b[i], ds[i & 1], kStore ? nullptr : x + i * kQK_K, kStore ? y + i * kQK_K : nullptr, acc);
  }
}

float dot_row_q6_k(const void* w, const float* x, int64_t n) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  q6k_row<false>(w, x, nullptr, n, acc);
  return reduce4(acc);
}

void deq_q6_k(const void* src, float* dst, int64_t n) {
  __m512 unused[4];
  q6k_row<true>(src, nullptr, dst, n, unused);
}

inline void set(KernelTable& t, DType type, DequantizeRowFn deq, DotRowFn dot) {
  t.dequantize_row[static_cast<uint32_t>(type)] = deq;
  t.dot_row[static_cast<uint32_t>(type)] = dot;
}

}  // namespace

void fill_avx512_table(KernelTable& t) {
  t.isa = Isa::kAvx512;
  set(t, DType::F32, &deq_f32, &dot_row_f32);
  set(t, DType::F16, &deq_half<cvt_f16>, &dot_row_half<cvt_f16>);
  set(t, DType::BF16, &deq_half<cvt_bf16>, &dot_row_half<cvt_bf16>);
  set(t, DType::Q8_0, &deq_b32<Q8_0U>, &dot_row_b32<Q8_0U>);
  set(t, DType::Q4_0, &deq_b32<Q4_0U>, &dot_row_b32<Q4_0U>);
  set(t, DType::Q4_1, &deq_b32<Q4_1U>, &dot_row_b32<Q4_1U>);
  set(t, DType::Q5_0, &deq_b32<Q5_0U>, &dot_row_b32<Q5_0U>);
  set(t, DType::Q5_1, &deq_b32<Q5_1U>, &dot_row_b32<Q5_1U>);
  set(t, DType::Q4_K, &deq_q4_k, &dot_row_q4_k);
  set(t, DType::Q5_K, &deq_q5_k, &dot_row_q5_k);
  set(t, DType::Q6_K, &deq_q6_k, &dot_row_q6_k);
  fill_affine_avx2(t);  // the MLX types: AVX2's kernels (AVX-512 CPUs have AVX2)
  t.dot_f32 = &dot_f32;
  t.axpy_f32 = &axpy_f32;
  vec::fill_ops<Avx512Vec>(t);
}

}  // namespace laya::cpu
