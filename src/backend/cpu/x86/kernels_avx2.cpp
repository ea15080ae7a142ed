// AVX2 + FMA + F16C kernels. Compiled with -mavx2 -mfma -mf16c; called only
// after a runtime CPU check (see kernels.cpp).
//
// dot_row dequantizes the weights in registers (the same float values as the
// scalar reference: every product that feeds the reference's rounding is exact,
// so fused multiply-subtract gives the same bits) and accumulates w*x in float32
// with several FMA chains. Activations are never rounded to 8 bits.
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/kernels.h"
#include "backend/cpu/x86/vec_avx2.h"
#include "backend/cpu/vec_ops.h"  // after the vector type: scale, mul, gelu, softcap, layer_norm
#include "core/dtype.h"

namespace laya::cpu {
namespace {

// Local scalar helpers (no header inline functions: an out-of-line copy compiled
// with AVX flags could be picked by the linker for other translation units).
inline float h2f(uint16_t h) { return _cvtsh_ss(h); }
float f16_scalar(uint16_t h) { return _cvtsh_ss(h); }
float bf16_scalar(uint16_t h) {
  const uint32_t b = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}

inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  __m128 sh = _mm_movehdup_ps(lo);
  __m128 s = _mm_add_ps(lo, sh);
  sh = _mm_movehl_ps(sh, s);
  s = _mm_add_ss(s, sh);
  return _mm_cvtss_f32(s);
}

// Broadcast from memory (a load-port operation; keeps the compiler from turning
// per-sub-block scale broadcasts into shuffle-port permutes).
inline __m256 bcast(const float* p) {
  __m256 r;
  __asm__("vbroadcastss %1, %0" : "=x"(r) : "m"(*p));
  return r;
}

inline __m256i load8_u8(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
inline __m256i load8_i8(const int8_t* p) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 cvt(__m256i v) { return _mm256_cvtepi32_ps(v); }

// ---- plain floats ------------------------------------------------------------------

float dot_f32(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  float s = hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

void axpy_f32(float a, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    _mm256_storeu_ps(y + i + 8,
                     _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8)));
  }
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}

float dot_row_f32(const void* w, const float* x, int64_t n) {
  return dot_f32(static_cast<const float*>(w), x, n);
}

inline __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load_bf16(const uint16_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

template <__m256 (*kLoad)(const uint16_t*), float (*kScalar)(uint16_t)>
float dot_row_half(const void* w, const float* x, int64_t n) {
  const uint16_t* p = static_cast<const uint16_t*>(w);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(kLoad(p + i), _mm256_loadu_ps(x + i), acc0);
    acc1 = _mm256_fmadd_ps(kLoad(p + i + 8), _mm256_loadu_ps(x + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(kLoad(p + i + 16), _mm256_loadu_ps(x + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(kLoad(p + i + 24), _mm256_loadu_ps(x + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(kLoad(p + i), _mm256_loadu_ps(x + i), acc0);
  float s = hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
  for (; i < n; ++i) s += kScalar(p[i]) * x[i];
  return s;
}

// dot_row_f32 / dot_row_half for NT tokens at once: each token's four chains
// and tail exactly as the one-token functions, each weight vector loaded once.
template <class Load, int NT>
void dot_rows_chains(Load load, float (*scalar)(const void*, int64_t), const void* w, const float* x, int64_t ldx,
                     int64_t n, float* y, int64_t ldy) {
  __m256 acc[NT][4];
  for (int t = 0; t < NT; ++t)
    for (int c = 0; c < 4; ++c) acc[t][c] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256 w0 = load(w, i), w1 = load(w, i + 8), w2 = load(w, i + 16), w3 = load(w, i + 24);
    for (int t = 0; t < NT; ++t) {
      const float* xt = x + t * ldx + i;
      acc[t][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xt), acc[t][0]);
      acc[t][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xt + 8), acc[t][1]);
      acc[t][2] = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xt + 16), acc[t][2]);
      acc[t][3] = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xt + 24), acc[t][3]);
    }
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 w0 = load(w, i);
    for (int t = 0; t < NT; ++t) acc[t][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + t * ldx + i), acc[t][0]);
  }
  for (int t = 0; t < NT; ++t) {
    float s = hsum(_mm256_add_ps(_mm256_add_ps(acc[t][0], acc[t][1]), _mm256_add_ps(acc[t][2], acc[t][3])));
    for (int64_t j = i; j < n; ++j) s += scalar(w, j) * x[t * ldx + j];
    y[t * ldy] = s;
  }
}

// dot_f32 multiplies a*b with a the weights: the same operand order here.
inline __m256 load_w_f32(const void* w, int64_t i) { return _mm256_loadu_ps(static_cast<const float*>(w) + i); }
inline float scalar_w_f32(const void* w, int64_t i) { return static_cast<const float*>(w)[i]; }
template <__m256 (*kLoad)(const uint16_t*)>
inline __m256 load_w_half(const void* w, int64_t i) { return kLoad(static_cast<const uint16_t*>(w) + i); }
template <float (*kScalar)(uint16_t)>
inline float scalar_w_half(const void* w, int64_t i) { return kScalar(static_cast<const uint16_t*>(w)[i]); }

template <class Load>
void dot_rows_by_chains(Load load, float (*scalar)(const void*, int64_t), const void* w, const float* x, int64_t ldx,
                        int64_t m, int64_t n, float* y, int64_t ldy) {
  int64_t t = 0;
  for (; t + 2 <= m; t += 2) dot_rows_chains<Load, 2>(load, scalar, w, x + t * ldx, ldx, n, y + t * ldy, ldy);
  if (t < m) dot_rows_chains<Load, 1>(load, scalar, w, x + t * ldx, ldx, n, y + t * ldy, ldy);
}

void dot_rows_f32(const void* w, const float* x, int64_t ldx, int64_t m, int64_t n, float* y, int64_t ldy) {
  dot_rows_by_chains(load_w_f32, scalar_w_f32, w, x, ldx, m, n, y, ldy);
}

template <__m256 (*kLoad)(const uint16_t*), float (*kScalar)(uint16_t)>
void dot_rows_half(const void* w, const float* x, int64_t ldx, int64_t m, int64_t n, float* y, int64_t ldy) {
  dot_rows_by_chains(load_w_half<kLoad>, scalar_w_half<kScalar>, w, x, ldx, m, n, y, ldy);
}

template <__m256 (*kLoad)(const uint16_t*), float (*kScalar)(uint16_t)>
void deq_half(const void* src, float* dst, int64_t n) {
  const uint16_t* p = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, kLoad(p + i));
  for (; i < n; ++i) dst[i] = kScalar(p[i]);
}

void deq_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

// ---- 32-element blocks -------------------------------------------------------------
// Each unpacker yields the integer quants of elements 0-7, 8-15, 16-23, 24-31.

struct Q8_0U {
  using Block = BlockQ8_0;
  static constexpr bool kHasMin = false;
  static void unpack(const Block& b, __m256i q[4]) {
    for (int k = 0; k < 4; ++k) q[k] = load8_i8(b.qs + 8 * k);
  }
  static float min(const Block&) { return 0.0f; }
};

inline void unpack_nibbles(const uint8_t* qs, __m256i q[4]) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i a = _mm256_cvtepu8_epi32(v);
  const __m256i b = _mm256_cvtepu8_epi32(_mm_srli_si128(v, 8));
  const __m256i m4 = _mm256_set1_epi32(0x0F);
  q[0] = _mm256_and_si256(a, m4);
  q[1] = _mm256_and_si256(b, m4);
  q[2] = _mm256_srli_epi32(a, 4);
  q[3] = _mm256_srli_epi32(b, 4);
}

// Adds the 5th bit (bit e of qh for element e) as 16.
inline void add_high_bits(const uint8_t* qh_bytes, __m256i q[4]) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof(qh));
  const __m256i h = _mm256_set1_epi32(static_cast<int>(qh));
  const __m256i one = _mm256_set1_epi32(1);
  __m256i shift = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i eight = _mm256_set1_epi32(8);
  for (int k = 0; k < 4; ++k) {
    const __m256i bit = _mm256_and_si256(_mm256_srlv_epi32(h, shift), one);
    q[k] = _mm256_or_si256(q[k], _mm256_slli_epi32(bit, 4));
    shift = _mm256_add_epi32(shift, eight);
  }
}

inline void sub_all(__m256i q[4], int v) {
  const __m256i s = _mm256_set1_epi32(v);
  for (int k = 0; k < 4; ++k) q[k] = _mm256_sub_epi32(q[k], s);
}

struct Q4_0U {
  using Block = BlockQ4_0;
  static constexpr bool kHasMin = false;
  static void unpack(const Block& b, __m256i q[4]) {
    unpack_nibbles(b.qs, q);
    sub_all(q, 8);
  }
  static float min(const Block&) { return 0.0f; }
};

struct Q4_1U {
  using Block = BlockQ4_1;
  static constexpr bool kHasMin = true;
  static void unpack(const Block& b, __m256i q[4]) { unpack_nibbles(b.qs, q); }
  static float min(const Block& b) { return h2f(b.m); }
};

struct Q5_0U {
  using Block = BlockQ5_0;
  static constexpr bool kHasMin = false;
  static void unpack(const Block& b, __m256i q[4]) {
    unpack_nibbles(b.qs, q);
    add_high_bits(b.qh, q);
    sub_all(q, 16);
  }
  static float min(const Block&) { return 0.0f; }
};

struct Q5_1U {
  using Block = BlockQ5_1;
  static constexpr bool kHasMin = true;
  static void unpack(const Block& b, __m256i q[4]) {
    unpack_nibbles(b.qs, q);
    add_high_bits(b.qh, q);
  }
  static float min(const Block& b) { return h2f(b.m); }
};

// A block's 32 weights as floats (the quants; the scale and min apart).
template <class U>
struct BlockFloats {
  __m256 q[4];
  __m256 d, mn;
  explicit BlockFloats(const typename U::Block& b) {
    __m256i qi[4];
    U::unpack(b, qi);
    for (int k = 0; k < 4; ++k) q[k] = cvt(qi[k]);
    d = _mm256_set1_ps(h2f(b.d));
    mn = U::kHasMin ? _mm256_set1_ps(U::min(b)) : _mm256_setzero_ps();
  }
};

// One block of one token: sum q*x into *acc (times d); returns the min term.
template <class U>
inline __m256 block_partial(const BlockFloats<U>& w, const float* x, __m256* acc) {
  const __m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8);
  const __m256 x2 = _mm256_loadu_ps(x + 16), x3 = _mm256_loadu_ps(x + 24);
  __m256 s0 = _mm256_mul_ps(w.q[0], x0);
  __m256 s1 = _mm256_mul_ps(w.q[1], x1);
  s0 = _mm256_fmadd_ps(w.q[2], x2, s0);
  s1 = _mm256_fmadd_ps(w.q[3], x3, s1);
  const __m256 s = _mm256_add_ps(s0, s1);
  *acc = _mm256_fmadd_ps(s, w.d, *acc);
  if constexpr (U::kHasMin) {
    const __m256 sx = _mm256_add_ps(_mm256_add_ps(x0, x1), _mm256_add_ps(x2, x3));
    return _mm256_mul_ps(sx, w.mn);
  } else {
    return _mm256_setzero_ps();
  }
}

template <class U>
inline __m256 block_partial(const typename U::Block& b, const float* x, __m256* acc) {
  return block_partial<U>(BlockFloats<U>(b), x, acc);
}

template <class U>
float dot_row_b32(const void* w, const float* x, int64_t n) {
  const typename U::Block* b = static_cast<const typename U::Block*>(w);
  const int64_t nb = n / 32;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 mins0 = _mm256_setzero_ps(), mins1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const __m256 m0 = block_partial<U>(b[i], x + i * 32, &acc0);
    const __m256 m1 = block_partial<U>(b[i + 1], x + i * 32 + 32, &acc1);
    if constexpr (U::kHasMin) {
      mins0 = _mm256_add_ps(mins0, m0);
      mins1 = _mm256_add_ps(mins1, m1);
    }
  }
  if (i < nb) {
    const __m256 m0 = block_partial<U>(b[i], x + i * 32, &acc0);
    if constexpr (U::kHasMin) mins0 = _mm256_add_ps(mins0, m0);
  }
  __m256 acc = _mm256_add_ps(acc0, acc1);
  if constexpr (U::kHasMin) acc = _mm256_add_ps(acc, _mm256_add_ps(mins0, mins1));
  return hsum(acc);
}

// dot_row_b32 for NT tokens: even blocks into each token's acc0, odd ones
// into acc1, as there; each block unpacked once for all NT.
template <class U, int NT>
void dot_rows_b32_nt(const typename U::Block* b, int64_t nb, const float* x, int64_t ldx, float* y, int64_t ldy) {
  __m256 acc[2][NT], mins[2][NT];
  for (int t = 0; t < NT; ++t) acc[0][t] = acc[1][t] = mins[0][t] = mins[1][t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const BlockFloats<U> w(b[i]);
    const int c = static_cast<int>(i & 1);
    for (int t = 0; t < NT; ++t) {
      const __m256 mt = block_partial<U>(w, x + t * ldx + i * 32, &acc[c][t]);
      if constexpr (U::kHasMin) mins[c][t] = _mm256_add_ps(mins[c][t], mt);
    }
  }
  for (int t = 0; t < NT; ++t) {
    __m256 a = _mm256_add_ps(acc[0][t], acc[1][t]);
    if constexpr (U::kHasMin) a = _mm256_add_ps(a, _mm256_add_ps(mins[0][t], mins[1][t]));
    y[t * ldy] = hsum(a);
  }
}

template <class U>
void dot_rows_b32(const void* w, const float* x, int64_t ldx, int64_t m, int64_t n, float* y, int64_t ldy) {
  const typename U::Block* b = static_cast<const typename U::Block*>(w);
  const int64_t nb = n / 32;
  int64_t t = 0;
  for (; t + 4 <= m; t += 4) dot_rows_b32_nt<U, 4>(b, nb, x + t * ldx, ldx, y + t * ldy, ldy);
  switch (m - t) {
    case 3: dot_rows_b32_nt<U, 3>(b, nb, x + t * ldx, ldx, y + t * ldy, ldy); break;
    case 2: dot_rows_b32_nt<U, 2>(b, nb, x + t * ldx, ldx, y + t * ldy, ldy); break;
    case 1: dot_rows_b32_nt<U, 1>(b, nb, x + t * ldx, ldx, y + t * ldy, ldy); break;
    default: break;
  }
}

template <class U>
void deq_b32(const void* src, float* dst, int64_t n) {
  const typename U::Block* b = static_cast<const typename U::Block*>(src);
  const int64_t nb = n / 32;
  for (int64_t i = 0; i < nb; ++i) {
    __m256i q[4];
    U::unpack(b[i], q);
    const __m256 d = _mm256_set1_ps(h2f(b[i].d));
    float* y = dst + i * 32;
    if constexpr (U::kHasMin) {
      // q*d is exact (<= 5 bits times an fp16), so the fused add rounds like q*d + m.
      const __m256 m = _mm256_set1_ps(U::min(b[i]));
      for (int k = 0; k < 4; ++k) _mm256_storeu_ps(y + 8 * k, _mm256_fmadd_ps(cvt(q[k]), d, m));
    } else {
      for (int k = 0; k < 4; ++k) _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(cvt(q[k]), d));
    }
  }
}

// ---- K-quants ----------------------------------------------------------------------

// The 8 six-bit scales and 8 mins of a Q4_K/Q5_K block times d / dmin (the
// same float products as the reference's d * sc), written to sc[8] / mn[8].
// Unpacked in registers with ggml's 32-bit mask formulas, one lane per output
// word. dm points at the block's d (dmin follows it); 16 bytes are read at
// scales (12 used, the rest is the block's qs).
inline void scales_mins_k4(const uint16_t* dm, const uint8_t* scales, float* sc, float* mn) {
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
  const __m256 d = _mm256_broadcastss_ps(f);
  const __m256 dmin = _mm256_broadcastss_ps(_mm_movehdup_ps(f));
  _mm256_store_ps(sc, _mm256_mul_ps(cvt(_mm256_cvtepu8_epi32(o)), d));
  _mm256_store_ps(mn, _mm256_mul_ps(cvt(_mm256_cvtepu8_epi32(_mm_srli_si128(o, 8))), dmin));
}

// Q4_K / Q5_K: element 64*jj + l (l < 32) is the low nibble of qs[32*jj + l] with
// scale 2*jj, element 64*jj + 32 + l the high nibble with scale 2*jj + 1.
// The 5th bit of Q5_K is bit 2*jj (low) / 2*jj + 1 (high) of qh[l].
template <bool kQ5, bool kStore>
inline void kquant45_block(const float* sm, const uint8_t* qs, const uint8_t* qh, const float* x, float* y,
                           __m256 acc[4]) {
  const float* sc = sm;
  const float* mn = sm + 8;
  const __m256i m4 = _mm256_set1_epi32(0x0F);
  const __m256i b16 = _mm256_set1_epi32(0x10);
  __m256i h[4];
  if constexpr (kQ5) {
    for (int c = 0; c < 4; ++c) h[c] = load8_u8(qh + 8 * c);
  }
  for (int jj = 0; jj < 4; ++jj) {
    const __m256 d1 = bcast(sc + 2 * jj), m1 = bcast(mn + 2 * jj);
    const __m256 d2 = bcast(sc + 2 * jj + 1), m2 = bcast(mn + 2 * jj + 1);
    const uint8_t* q = qs + 32 * jj;
    for (int c = 0; c < 4; ++c) {
      const __m256i v = load8_u8(q + 8 * c);
      __m256i lo = _mm256_and_si256(v, m4);
      __m256i hi = _mm256_srli_epi32(v, 4);
      if constexpr (kQ5) {
        lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi32(h[c], 4), b16));
        hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi32(h[c], 3), b16));
        h[c] = _mm256_srli_epi32(h[c], 2);
      }
      // d*sc*q is exact, so fmsub rounds exactly like the reference's d*q - m.
      const __m256 wlo = _mm256_fmsub_ps(cvt(lo), d1, m1);
      const __m256 whi = _mm256_fmsub_ps(cvt(hi), d2, m2);
      const int e = 64 * jj + 8 * c;
      if constexpr (kStore) {
        _mm256_storeu_ps(y + e, wlo);
        _mm256_storeu_ps(y + e + 32, whi);
      } else {
        acc[c & 1] = _mm256_fmadd_ps(wlo, _mm256_loadu_ps(x + e), acc[c & 1]);
        acc[2 + (c & 1)] = _mm256_fmadd_ps(whi, _mm256_loadu_ps(x + e + 32), acc[2 + (c & 1)]);
      }
    }
  }
}

// Row drivers: the scales of block i+1 are unpacked and stored while block i is
// processed, so its broadcasts load from L1 instead of waiting on store forwarding.
template <class Block, bool kQ5, bool kStore>
inline void kquant45_row(const void* w, const float* x, float* y, int64_t n, __m256 acc[4]) {
  const Block* b = static_cast<const Block*>(w);
  const int64_t nb = n / kQK_K;
  if (nb == 0) return;
  alignas(32) float sm[2][16];
  scales_mins_k4(&b[0].d, b[0].scales, sm[0], sm[0] + 8);
  for (int64_t i = 0; i < nb; ++i) {
    if (i + 1 < nb) scales_mins_k4(&b[i + 1].d, b[i + 1].scales, sm[(i + 1) & 1], sm[(i + 1) & 1] + 8);
    const uint8_t* qh = nullptr;
    if constexpr (kQ5) qh = b[i].qh;
    kquant45_block<kQ5, kStore>(sm[i & 1], b[i].qs, qh, kStore ? nullptr : x + i * kQK_K,
                                kStore ? y + i * kQK_K : nullptr, acc);
  }
}

float dot_row_q4_k(const void* w, const float* x, int64_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  kquant45_row<BlockQ4_K, false, false>(w, x, nullptr, n, acc);
  return hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

void deq_q4_k(const void* src, float* dst, int64_t n) {
  __m256 unused[4];
  kquant45_row<BlockQ4_K, false, true>(src, nullptr, dst, n, unused);
}

float dot_row_q5_k(const void* w, const float* x, int64_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  kquant45_row<BlockQ5_K, true, false>(w, x, nullptr, n, acc);
  return hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

void deq_q5_k(const void* src, float* dst, int64_t n) {
  __m256 unused[4];
  kquant45_row<BlockQ5_K, true, true>(src, nullptr, dst, n, unused);
}

// Q6_K: per 128 elements, l < 32: q1 = ql[l] low | qh[l] bits 0-1, q2 = ql[l+32] low |
// bits 2-3, q3 = ql[l] high | bits 4-5, q4 = ql[l+32] high | bits 6-7; minus 32;
// elements l, l+32, l+64, l+96 with scales sc[l/16 + 0, 2, 4, 6].
// Unpacked on bytes, 32 at a time (16-bit shifts; stray bits are masked off).
template <bool kStore>
inline void q6k_block(const BlockQ6_K& b, const float* x, float* y, __m256 acc[4]) {
  const float d = h2f(b.d);
  alignas(32) float ds[16];
  const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
  _mm256_store_ps(ds, _mm256_mul_ps(cvt(_mm256_cvtepi8_epi32(sc8)), _mm256_set1_ps(d)));
  _mm256_store_ps(ds + 8, _mm256_mul_ps(cvt(_mm256_cvtepi8_epi32(_mm_srli_si128(sc8, 8))), _mm256_set1_ps(d)));
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  const __m256i k32 = _mm256_set1_epi8(32);
  for (int nn = 0; nn < 2; ++nn) {
    const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * nn));
    const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * nn + 32));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * nn));
    __m256i q[4];
    q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
    q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
    const float* s = ds + 8 * nn;
    for (int g = 0; g < 4; ++g) {
      const __m256i v = _mm256_sub_epi8(q[g], k32);
      const __m128i lo = _mm256_castsi256_si128(v);
      const __m128i hi = _mm256_extracti128_si256(v, 1);
      const __m256i c[4] = {_mm256_cvtepi8_epi32(lo), _mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)),
                            _mm256_cvtepi8_epi32(hi), _mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))};
      for (int k = 0; k < 4; ++k) {
        const __m256 w = _mm256_mul_ps(cvt(c[k]), bcast(s + 2 * g + (k >> 1)));
        const int e = 128 * nn + 32 * g + 8 * k;
        if constexpr (kStore) {
          _mm256_storeu_ps(y + e, w);
        } else {
          acc[k] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + e), acc[k]);
        }
      }
    }
  }
}

float dot_row_q6_k(const void* w, const float* x, int64_t n) {
  const BlockQ6_K* b = static_cast<const BlockQ6_K*>(w);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t i = 0; i < n / kQK_K; ++i) q6k_block<false>(b[i], x + i * kQK_K, nullptr, acc);
  return hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

void deq_q6_k(const void* src, float* dst, int64_t n) {
  __m256 unused[4];  // not touched when dequantizing
  const BlockQ6_K* b = static_cast<const BlockQ6_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) q6k_block<true>(b[i], nullptr, dst + i * kQK_K, unused);
}

inline void set(KernelTable& t, DType type, DequantizeRowFn deq, DotRowFn dot, DotRowsFn dots = nullptr) {
  t.dequantize_row[static_cast<uint32_t>(type)] = deq;
  t.dot_row[static_cast<uint32_t>(type)] = dot;
  t.dot_rows[static_cast<uint32_t>(type)] = dots;
}

}  // namespace

void fill_avx2_table(KernelTable& t) {
  t.isa = Isa::kAvx2;
  set(t, DType::F32, &deq_f32, &dot_row_f32, &dot_rows_f32);
  set(t, DType::F16, &deq_half<load_f16, f16_scalar>, &dot_row_half<load_f16, f16_scalar>,
      &dot_rows_half<load_f16, f16_scalar>);
  set(t, DType::BF16, &deq_half<load_bf16, bf16_scalar>, &dot_row_half<load_bf16, bf16_scalar>,
      &dot_rows_half<load_bf16, bf16_scalar>);
  set(t, DType::Q8_0, &deq_b32<Q8_0U>, &dot_row_b32<Q8_0U>, &dot_rows_b32<Q8_0U>);
  set(t, DType::Q4_0, &deq_b32<Q4_0U>, &dot_row_b32<Q4_0U>, &dot_rows_b32<Q4_0U>);
  set(t, DType::Q4_1, &deq_b32<Q4_1U>, &dot_row_b32<Q4_1U>, &dot_rows_b32<Q4_1U>);
  set(t, DType::Q5_0, &deq_b32<Q5_0U>, &dot_row_b32<Q5_0U>, &dot_rows_b32<Q5_0U>);
  set(t, DType::Q5_1, &deq_b32<Q5_1U>, &dot_row_b32<Q5_1U>, &dot_rows_b32<Q5_1U>);
  set(t, DType::Q4_K, &deq_q4_k, &dot_row_q4_k);
  set(t, DType::Q5_K, &deq_q5_k, &dot_row_q5_k);
  set(t, DType::Q6_K, &deq_q6_k, &dot_row_q6_k);
  fill_affine_avx2(t);
  t.dot_f32 = &dot_f32;
  t.axpy_f32 = &axpy_f32;
  vec::fill_ops<Avx2Vec>(t);
}

}  // namespace laya::cpu
