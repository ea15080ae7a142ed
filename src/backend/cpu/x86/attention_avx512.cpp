// AVX-512 decode attention for one GQA group (see attention.h).
#include <immintrin.h>

// GCC 12 reports the intrinsics' own "undefined" pass-through operands as
// maybe-uninitialized once they are inlined into a template (as in
// packed_avx512vnni.cpp), and as uninitialized in a plain function
// (_mm512_reduce_add_ps in head_weights).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <cmath>
#include <type_traits>

#include "backend/cpu/attention.h"
#include "backend/cpu/x86/vec_avx512.h"  // exp_avx512, Avx512Vec
#include "backend/cpu/vec_ops.h"         // after the vector type: softcap

namespace laya::cpu {

namespace {

inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }

// Scores of G heads against every K block: lane l of a block's vector is
// position 16b + l (the blocked K layout), so there are no horizontal sums.
// Two accumulators per head keep enough FMAs in flight for small groups.
// The lanes past n_kv in the last block are written but never read.
template <typename T, int G>
void score_blocks(const float* q, int64_t hd, const T* k, int64_t nblk, float scale, float* scores, int64_t ss) {
  for (int64_t b = 0; b < nblk; ++b) {
    const T* kb = k + b * hd * kKvBlock;
    __m512 s0[G], s1[G];
    for (int h = 0; h < G; ++h) s0[h] = s1[h] = _mm512_setzero_ps();
    for (int64_t i = 0; i < hd; i += 2) {
      const __m512 k0 = load16(kb + i * kKvBlock), k1 = load16(kb + (i + 1) * kKvBlock);
      for (int h = 0; h < G; ++h) {
        s0[h] = _mm512_fmadd_ps(_mm512_set1_ps(q[h * hd + i]), k0, s0[h]);
        s1[h] = _mm512_fmadd_ps(_mm512_set1_ps(q[h * hd + i + 1]), k1, s1[h]);
      }
    }
    const __m512 sc = _mm512_set1_ps(scale);
    for (int h = 0; h < G; ++h) _mm512_storeu_ps(scores + h * ss + b * kKvBlock, _mm512_mul_ps(_mm512_add_ps(s0[h], s1[h]), sc));
  }
}

inline __m512 load16_i8(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

// Q8_0 cache: the same per 32-dimension group, then times the group's 16
// position scales.
template <int G>
void score_blocks_q8(const float* q, int64_t hd, const uint8_t* k, int64_t nblk, float scale, float* scores, int64_t ss) {
  for (int64_t b = 0; b < nblk; ++b) {
    const uint8_t* kb = k + static_cast<size_t>(b) * q8_k_block_bytes(hd);
    const float* ks = reinterpret_cast<const float*>(kb + hd * kKvBlock);
    __m512 s[G];
    for (int h = 0; h < G; ++h) s[h] = _mm512_setzero_ps();
    for (int64_t g = 0; g < hd / 32; ++g) {
      __m512 a0[G], a1[G];
      for (int h = 0; h < G; ++h) a0[h] = a1[h] = _mm512_setzero_ps();
      for (int64_t i = g * 32; i < g * 32 + 32; i += 2) {
        const __m512 k0 = load16_i8(kb + i * kKvBlock), k1 = load16_i8(kb + (i + 1) * kKvBlock);
        for (int h = 0; h < G; ++h) {
          a0[h] = _mm512_fmadd_ps(_mm512_set1_ps(q[h * hd + i]), k0, a0[h]);
          a1[h] = _mm512_fmadd_ps(_mm512_set1_ps(q[h * hd + i + 1]), k1, a1[h]);
        }
      }
      const __m512 d = _mm512_loadu_ps(ks + g * kKvBlock);
      for (int h = 0; h < G; ++h) s[h] = _mm512_fmadd_ps(_mm512_add_ps(a0[h], a1[h]), d, s[h]);
    }
    const __m512 sc = _mm512_set1_ps(scale);
    for (int h = 0; h < G; ++h) _mm512_storeu_ps(scores + h * ss + b * kKvBlock, _mm512_mul_ps(s[h], sc));
  }
}
// out (HC heads, NC * 16) = Σ_j p[h][j] · V[j]: each V row loaded once for
// the HC heads, the HC × NC accumulators in registers.
template <typename T, int NC, int HC>
void weighted_v(const float* p, int64_t ss, const KvHeadBlocks& kv, int64_t js, int64_t n_kv, float* out) {
  __m512 o[HC * NC];
  for (int i = 0; i < HC * NC; ++i) o[i] = _mm512_setzero_ps();
  const int64_t bp = kv.block_pos;
  for (int64_t b = js / bp, j0 = b * bp; j0 < n_kv; ++b, j0 += bp) {
    const T* v = reinterpret_cast<const T*>(kv.v(b));
    const int64_t rows = n_kv - j0 < bp ? n_kv - j0 : bp;
    for (int64_t r = j0 < js ? js - j0 : 0; r < rows; ++r) {
      const int64_t j = j0 + r;
      if constexpr (std::is_same_v<T, uint8_t>) {  // Q8_0 row: int8 [hd], float32 scales [hd / 32]
        const uint8_t* vr = v + static_cast<size_t>(r) * q8_v_row_bytes(NC * 16);
        const float* vs = reinterpret_cast<const float*>(vr + NC * 16);
        for (int c = 0; c < NC; ++c) {
          const __m512 vv = _mm512_mul_ps(load16_i8(vr + c * 16), _mm512_set1_ps(vs[c / 2]));
          for (int h = 0; h < HC; ++h) o[h * NC + c] = _mm512_fmadd_ps(_mm512_set1_ps(p[h * ss + j]), vv, o[h * NC + c]);
        }
      } else {
        const T* vr = v + r * NC * 16;
        for (int c = 0; c < NC; ++c) {
          const __m512 vv = load16(vr + c * 16);
          for (int h = 0; h < HC; ++h) o[h * NC + c] = _mm512_fmadd_ps(_mm512_set1_ps(p[h * ss + j]), vv, o[h * NC + c]);
        }
      }
    }
  }
  for (int h = 0; h < HC; ++h)
    for (int c = 0; c < NC; ++c) _mm512_storeu_ps(out + (h * NC + c) * 16, o[h * NC + c]);
}

template <typename T, int G>
void score_blocks_any(const float* q, int64_t hd, const T* k, int64_t nblk, float scale, float* scores, int64_t ss) {
  if constexpr (std::is_same_v<T, uint8_t>) {
    score_blocks_q8<G>(q, hd, k, nblk, scale, scores, ss);
  } else {
    score_blocks<T, G>(q, hd, k, nblk, scale, scores, ss);
  }
}

// K block number `blk` of a pool block's K slice.
template <typename T>
inline const T* k_block(const uint8_t* k_slice, int64_t blk, int64_t hd) {
  if constexpr (std::is_same_v<T, uint8_t>) {
    return k_slice + static_cast<size_t>(blk) * q8_k_block_bytes(hd);
  } else {
    return reinterpret_cast<const T*>(k_slice) + blk * hd * kKvBlock;
  }
}

// Scores over positions [js, n_kv), js a multiple of 16.
template <typename T, int G>
void score_pool_blocks(const float* q, int64_t hd, const KvHeadBlocks& kv, int64_t js, int64_t n_kv, float scale,
                       float* scores, int64_t ss) {
  const int64_t bp = kv.block_pos;
  for (int64_t b = js / bp, j0 = b * bp; j0 < n_kv; ++b, j0 += bp) {
    const int64_t nblk = ((n_kv - j0 < bp ? n_kv - j0 : bp) + kKvBlock - 1) / kKvBlock;
    const int64_t blk0 = j0 < js ? (js - j0) / kKvBlock : 0;
    score_blocks_any<T, G>(q, hd, k_block<T>(kv.k(b), blk0, hd), nblk - blk0, scale, scores + j0 + blk0 * kKvBlock, ss);
  }
}

template <typename T>
void scores_for(int group, const float* q, int64_t hd, const KvHeadBlocks& kv, int64_t js, int64_t n_kv, float scale,
                float* scores, int64_t ss) {
  switch (group) {
    case 1: return score_pool_blocks<T, 1>(q, hd, kv, js, n_kv, scale, scores, ss);
    case 2: return score_pool_blocks<T, 2>(q, hd, kv, js, n_kv, scale, scores, ss);
    case 3: return score_pool_blocks<T, 3>(q, hd, kv, js, n_kv, scale, scores, ss);
    case 4: return score_pool_blocks<T, 4>(q, hd, kv, js, n_kv, scale, scores, ss);
    case 5: return score_pool_blocks<T, 5>(q, hd, kv, js, n_kv, scale, scores, ss);
    case 6: return score_pool_blocks<T, 6>(q, hd, kv, js, n_kv, scale, scores, ss);
    case 7: return score_pool_blocks<T, 7>(q, hd, kv, js, n_kv, scale, scores, ss);
    default: return score_pool_blocks<T, 8>(q, hd, kv, js, n_kv, scale, scores, ss);
  }
}

template <typename T, int NC>
void weighted_v_nc(int hc, const float* p, int64_t ss, const KvHeadBlocks& v, int64_t js, int64_t n_kv, float* out) {
  constexpr int kMax = 24 / NC < 8 ? 24 / NC : 8;  // accumulators kept ≤ 24 registers
  static_assert(kMax >= 1);
  switch (hc) {
    case 1: return weighted_v<T, NC, 1>(p, ss, v, js, n_kv, out);
    case 2: if constexpr (kMax >= 2) return weighted_v<T, NC, 2>(p, ss, v, js, n_kv, out); break;
    case 3: if constexpr (kMax >= 3) return weighted_v<T, NC, 3>(p, ss, v, js, n_kv, out); break;
    case 4: if constexpr (kMax >= 4) return weighted_v<T, NC, 4>(p, ss, v, js, n_kv, out); break;
    case 5: if constexpr (kMax >= 5) return weighted_v<T, NC, 5>(p, ss, v, js, n_kv, out); break;
    case 6: if constexpr (kMax >= 6) return weighted_v<T, NC, 6>(p, ss, v, js, n_kv, out); break;
    case 7: if constexpr (kMax >= 7) return weighted_v<T, NC, 7>(p, ss, v, js, n_kv, out); break;
    case 8: if constexpr (kMax >= 8) return weighted_v<T, NC, 8>(p, ss, v, js, n_kv, out); break;
    default: break;
  }
}

// Soft-capped scores (cap · tanh(s / cap)), then the softmax, of one head's
// scores over [first, n_kv); the positions [js, first) its K block brought in
// weigh 0.
void head_weights(float* sc, int64_t js, int64_t n_kv, const AttendParams& p) {
  float* s = sc + p.first;
  const int64_t n = n_kv - p.first;
  int64_t j = 0;
  const __mmask16 tail = static_cast<__mmask16>((1u << (n % 16)) - 1);
  // The logit soft-capping op's own code (vec_ops.h), so scores and logits
  // are capped by one tanh with one bound (tanh_rational.h).
  if (p.softcap > 0) vec::softcap<Avx512Vec>(s, n, p.softcap);
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (j = 0; j + 16 <= n; j += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(s + j));
  if (j < n) mx = _mm512_mask_max_ps(mx, tail, mx, _mm512_maskz_loadu_ps(tail, s + j));
  const __m512 mv = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 sv = _mm512_setzero_ps();
  for (j = 0; j + 16 <= n; j += 16) {
    const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(s + j), mv));
    _mm512_storeu_ps(s + j, e);
    sv = _mm512_add_ps(sv, e);
  }
  if (j < n) {
    const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, s + j), mv));
    _mm512_mask_storeu_ps(s + j, tail, e);
    sv = _mm512_add_ps(sv, _mm512_maskz_mov_ps(tail, e));
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sv));
  for (j = 0; j + 16 <= n; j += 16) _mm512_storeu_ps(s + j, _mm512_mul_ps(_mm512_loadu_ps(s + j), inv));
  if (j < n) _mm512_mask_storeu_ps(s + j, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, s + j), inv));
  for (int64_t k = js; k < p.first; ++k) sc[k] = 0.0f;
}

// Positions [js, n_kv) are read, js = first rounded down to a K block.
template <typename T>
void attend_group(const float* q, int group, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv, const AttendParams& p,
                  float* scores, float* out) {
  const int64_t ss = scores_stride(n_kv), js = p.first / kKvBlock * kKvBlock;
  scores_for<T>(group, q, hd, kv, js, n_kv, p.scale, scores, ss);
  for (int h = 0; h < group; ++h) head_weights(scores + h * ss, js, n_kv, p);
  // Weighted sum of V rows in chunks of heads whose accumulators fit in
  // registers (qwen2.5's 7 heads × 4 vectors: two passes of 4 and 3).
  const int nc = static_cast<int>(hd / 16);
  const int max_hc = 24 / nc < 8 ? 24 / nc : 8;
  const int n_chunks = (group + max_hc - 1) / max_hc;
  const int hc = (group + n_chunks - 1) / n_chunks;
  for (int h0 = 0; h0 < group; h0 += hc) {
    const int n = group - h0 < hc ? group - h0 : hc;
    const float* w = scores + h0 * ss;
    float* o = out + h0 * hd;
    switch (nc) {
      case 1: weighted_v_nc<T, 1>(n, w, ss, kv, js, n_kv, o); break;
      case 2: weighted_v_nc<T, 2>(n, w, ss, kv, js, n_kv, o); break;
      case 4: weighted_v_nc<T, 4>(n, w, ss, kv, js, n_kv, o); break;
      case 8: weighted_v_nc<T, 8>(n, w, ss, kv, js, n_kv, o); break;
      default: weighted_v_nc<T, 16>(n, w, ss, kv, js, n_kv, o); break;
    }
  }
}

}  // namespace

void attend_group_avx512(const float* q, int group, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv,
                         const AttendParams& p, float* scores, float* out) {
  attend_group<float>(q, group, hd, kv, n_kv, p, scores, out);
}

void attend_group_f16_avx512(const float* q, int group, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv,
                             const AttendParams& p, float* scores, float* out) {
  attend_group<uint16_t>(q, group, hd, kv, n_kv, p, scores, out);
}

void attend_group_q8_avx512(const float* q, int group, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv,
                            const AttendParams& p, float* scores, float* out) {
  attend_group<uint8_t>(q, group, hd, kv, n_kv, p, scores, out);
}

}  // namespace laya::cpu
