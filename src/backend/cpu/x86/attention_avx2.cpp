// AVX2 (+FMA, F16C) decode attention for one GQA group (see attention.h): the
// path of x86 CPUs without AVX-512 (AMD Zen 2/3, Intel before Ice Lake),
// which otherwise run the scalar reference.
//
// The same three steps as attention_avx512.cpp, on 8-lane vectors:
//  - scores: a K block of 16 positions, (hd, 16) in memory, is two vectors per
//    dimension (positions 0-7 and 8-15), so q·K is a broadcast of q[i] times
//    K's row i, accumulated lane-wise, with no horizontal sums. Each block is
//    loaded once for every head of the group (heads in at most two chunks of
//    ≤ 4, so accumulators fit in the 16 ymm registers);
//  - softmax per head, with a polynomial exp (2^n put into the float's exponent);
//  - out = Σ_j p_j · V_j over V's rows, in tiles of rows small enough to stay in
//    L1 while every (heads × dims) chunk of accumulators passes over them.
#include <immintrin.h>

#include <cmath>
#include <type_traits>

#include "backend/cpu/attention.h"
#include "backend/cpu/x86/vec_avx2.h"  // exp_avx2, Avx2Vec
#include "backend/cpu/vec_ops.h"       // after the vector type: softcap

namespace laya::cpu {

namespace {

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256 load8_i8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// The group's heads in at most two chunks of ≤ 4 (5 → 3 + 2, ..., 8 → 4 + 4):
// 4 heads × 2 vectors of 8 positions = 8 score accumulators.
template <int G>
struct HeadChunks {
  static constexpr int kFirst = G <= 4 ? G : (G + 1) / 2;
  static constexpr int kSecond = G - kFirst;
};

// Independent FMA chains per head and vector half when a chunk has few heads:
// 8 chains in flight cover the FMA latency.
template <int HC>
constexpr int kDimSplit = HC == 1 ? 4 : HC == 2 ? 2 : 1;

// Scores of HC heads (q: their rows, hd apart) for the 16 positions of one
// float32 / fp16 K block, times scale, into sc[h * ss + 0..15].
template <typename T, int HC>
inline void score_block(const float* q, int64_t hd, const T* kb, __m256 scale, float* sc, int64_t ss) {
  constexpr int S = kDimSplit<HC>;
  __m256 lo[S][HC], hi[S][HC];
  for (int s = 0; s < S; ++s)
    for (int h = 0; h < HC; ++h) lo[s][h] = hi[s][h] = _mm256_setzero_ps();
  for (int64_t i = 0; i < hd; i += S) {
    for (int s = 0; s < S; ++s) {
      const T* row = kb + (i + s) * kKvBlock;
      const __m256 k_lo = load8(row), k_hi = load8(row + 8);
      for (int h = 0; h < HC; ++h) {
        const __m256 qi = _mm256_broadcast_ss(q + h * hd + i + s);
        lo[s][h] = _mm256_fmadd_ps(qi, k_lo, lo[s][h]);
        hi[s][h] = _mm256_fmadd_ps(qi, k_hi, hi[s][h]);
      }
    }
  }
  for (int h = 0; h < HC; ++h) {
    for (int s = 1; s < S; ++s) {
      lo[0][h] = _mm256_add_ps(lo[0][h], lo[s][h]);
      hi[0][h] = _mm256_add_ps(hi[0][h], hi[s][h]);
    }
    _mm256_storeu_ps(sc + h * ss, _mm256_mul_ps(lo[0][h], scale));
    _mm256_storeu_ps(sc + h * ss + 8, _mm256_mul_ps(hi[0][h], scale));
  }
}

// Q8_0 K block (int8 [hd][16], then float32 scales [hd/32][16]): the dot of
// each 32-dimension group, times the group's 16 position scales (with the
// softmax scale folded in), summed over groups in sc itself.
template <int HC>
inline void score_block_q8(const float* q, int64_t hd, const uint8_t* kb, __m256 scale, float* sc, int64_t ss) {
  constexpr int S = kDimSplit<HC>;
  const float* k_scales = reinterpret_cast<const float*>(kb + hd * kKvBlock);
  for (int64_t g = 0; g < hd / 32; ++g) {
    __m256 lo[S][HC], hi[S][HC];
    for (int s = 0; s < S; ++s)
      for (int h = 0; h < HC; ++h) lo[s][h] = hi[s][h] = _mm256_setzero_ps();
    for (int64_t i = g * 32; i < g * 32 + 32; i += S) {
      for (int s = 0; s < S; ++s) {
        const uint8_t* row = kb + (i + s) * kKvBlock;
        const __m256 k_lo = load8_i8(row), k_hi = load8_i8(row + 8);
        for (int h = 0; h < HC; ++h) {
          const __m256 qi = _mm256_broadcast_ss(q + h * hd + i + s);
          lo[s][h] = _mm256_fmadd_ps(qi, k_lo, lo[s][h]);
          hi[s][h] = _mm256_fmadd_ps(qi, k_hi, hi[s][h]);
        }
      }
    }
    const __m256 d_lo = _mm256_mul_ps(_mm256_loadu_ps(k_scales + g * kKvBlock), scale);
    const __m256 d_hi = _mm256_mul_ps(_mm256_loadu_ps(k_scales + g * kKvBlock + 8), scale);
    for (int h = 0; h < HC; ++h) {
      for (int s = 1; s < S; ++s) {
        lo[0][h] = _mm256_add_ps(lo[0][h], lo[s][h]);
        hi[0][h] = _mm256_add_ps(hi[0][h], hi[s][h]);
      }
      float* out = sc + h * ss;
      if (g == 0) {
        _mm256_storeu_ps(out, _mm256_mul_ps(lo[0][h], d_lo));
        _mm256_storeu_ps(out + 8, _mm256_mul_ps(hi[0][h], d_hi));
      } else {
        _mm256_storeu_ps(out, _mm256_fmadd_ps(lo[0][h], d_lo, _mm256_loadu_ps(out)));
        _mm256_storeu_ps(out + 8, _mm256_fmadd_ps(hi[0][h], d_hi, _mm256_loadu_ps(out + 8)));
      }
    }
  }
}

template <typename T, int HC>
inline void score_block_any(const float* q, int64_t hd, const T* kb, __m256 scale, float* sc, int64_t ss) {
  if constexpr (std::is_same_v<T, uint8_t>) {
    score_block_q8<HC>(q, hd, kb, scale, sc, ss);
  } else {
    score_block<T, HC>(q, hd, kb, scale, sc, ss);
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

// Scores of all G heads over positions [js, n_kv) (js a multiple of 16),
// block by block, each K block read once for both head chunks (it stays in L1
// between them). The lanes past n_kv in the last block are written but never read.
template <typename T, int G>
void score_all(const float* q, int64_t hd, const KvHeadBlocks& kv, int64_t js, int64_t n_kv, float scale,
               float* scores, int64_t ss) {
  using Chunks = HeadChunks<G>;
  const __m256 sv = _mm256_set1_ps(scale);
  const int64_t bp = kv.block_pos;
  for (int64_t b = js / bp, j0 = b * bp; j0 < n_kv; ++b, j0 += bp) {
    const int64_t nblk = ((n_kv - j0 < bp ? n_kv - j0 : bp) + kKvBlock - 1) / kKvBlock;
    const uint8_t* k_slice = kv.k(b);
    for (int64_t blk = j0 < js ? (js - j0) / kKvBlock : 0; blk < nblk; ++blk) {
      const T* kb = k_block<T>(k_slice, blk, hd);
      float* sc = scores + j0 + blk * kKvBlock;
      score_block_any<T, Chunks::kFirst>(q, hd, kb, sv, sc, ss);
      if constexpr (Chunks::kSecond > 0)
        score_block_any<T, Chunks::kSecond>(q + Chunks::kFirst * hd, hd, kb, sv, sc + Chunks::kFirst * ss, ss);
    }
  }
}

// Softmax of one head's n_kv scores in place. The tail (n_kv % 8 lanes) is
// read and written through a mask: the lanes past n_kv hold whatever the
// scores of the last block's unused positions came to (NaN included).
void softmax(float* sc, int64_t n_kv) {
  const int64_t n_full = n_kv / 8 * 8;
  const int tail = static_cast<int>(n_kv - n_full);
  const __m256i tail_mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(tail), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256 tail_lanes = _mm256_castsi256_ps(tail_mask);
  const __m256 minus_inf = _mm256_set1_ps(-INFINITY);
  __m256 mx = minus_inf;
  for (int64_t j = 0; j < n_full; j += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(sc + j));
  if (tail) mx = _mm256_max_ps(mx, _mm256_blendv_ps(minus_inf, _mm256_maskload_ps(sc + n_full, tail_mask), tail_lanes));
  const __m256 max_v = _mm256_set1_ps(hmax(mx));
  __m256 sum = _mm256_setzero_ps();
  for (int64_t j = 0; j < n_full; j += 8) {
    const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(sc + j), max_v));
    _mm256_storeu_ps(sc + j, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (tail) {
    const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_maskload_ps(sc + n_full, tail_mask), max_v));
    _mm256_maskstore_ps(sc + n_full, tail_mask, e);
    sum = _mm256_add_ps(sum, _mm256_and_ps(e, tail_lanes));
  }
  const __m256 inv = _mm256_set1_ps(1.0f / hsum(sum));
  for (int64_t j = 0; j < n_full; j += 8) _mm256_storeu_ps(sc + j, _mm256_mul_ps(_mm256_loadu_ps(sc + j), inv));
  if (tail) _mm256_maskstore_ps(sc + n_full, tail_mask, _mm256_mul_ps(_mm256_maskload_ps(sc + n_full, tail_mask), inv));
}

// The weights of one head over [js, n_kv): soft-capped scores, softmax over
// [first, n_kv), and 0 for the positions [js, first) its K block brought in.
void weights(float* sc, int64_t js, int64_t n_kv, const AttendParams& p) {
  // The logit soft-capping op's own code (vec_ops.h), so scores and logits
  // are capped by one tanh with one bound (tanh_rational.h).
  if (p.softcap > 0) vec::softcap<Avx2Vec>(sc + p.first, n_kv - p.first, p.softcap);
  softmax(sc + p.first, n_kv - p.first);
  for (int64_t j = js; j < p.first; ++j) sc[j] = 0.0f;
}

// Row r of a pool block's V rows.
template <typename T>
inline const T* v_row(const uint8_t* v_slice, int64_t r, int64_t hd) {
  if constexpr (std::is_same_v<T, uint8_t>) {
    return v_slice + static_cast<size_t>(r) * q8_v_row_bytes(hd);
  } else {
    return reinterpret_cast<const T*>(v_slice) + r * hd;
  }
}

// Vector c of dims [d0 + 8c, d0 + 8c + 8) of a V row, as float32.
template <typename T>
inline __m256 v_vector(const T* row, int64_t hd, int64_t d) {
  if constexpr (std::is_same_v<T, uint8_t>) {  // int8 [hd], then float32 scales [hd / 32]
    const float* v_scales = reinterpret_cast<const float*>(row + hd);
    return _mm256_mul_ps(load8_i8(row + d), _mm256_broadcast_ss(v_scales + d / 32));
  } else {
    return load8(row + d);
  }
}

// out (HC heads, hd) += Σ_r p[h * ss + r] · V row r, for `rows` rows from
// `first`: for each chunk of NC × 8 dims, HC × NC accumulators (≤ 8) pass
// over the rows, each vector of V loaded once for the HC heads.
template <typename T, int HC, int NC>
void weighted_v_tile(const float* p, int64_t ss, const uint8_t* v_slice, int64_t first, int64_t rows, int64_t hd,
                     float* out) {
  static_assert(HC * NC <= 8);
  for (int64_t d0 = 0; d0 < hd; d0 += NC * 8) {
    __m256 o[HC][NC];
    for (int h = 0; h < HC; ++h)
      for (int c = 0; c < NC; ++c) o[h][c] = _mm256_loadu_ps(out + h * hd + d0 + c * 8);
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = v_row<T>(v_slice, first + r, hd);
      __m256 pr[HC];
      for (int h = 0; h < HC; ++h) pr[h] = _mm256_broadcast_ss(p + h * ss + r);
      for (int c = 0; c < NC; ++c) {
        const __m256 vv = v_vector(row, hd, d0 + c * 8);
        for (int h = 0; h < HC; ++h) o[h][c] = _mm256_fmadd_ps(pr[h], vv, o[h][c]);
      }
    }
    for (int h = 0; h < HC; ++h)
      for (int c = 0; c < NC; ++c) _mm256_storeu_ps(out + h * hd + d0 + c * 8, o[h][c]);
  }
}

// NC as large as 8 accumulators and hd allow (hd / 8 vectors per row).
template <typename T, int HC>
void weighted_v_tile_any(const float* p, int64_t ss, const uint8_t* v_slice, int64_t first, int64_t rows, int64_t hd,
                         float* out) {
  constexpr int kMaxNc = HC == 1 ? 8 : HC == 2 ? 4 : 2;
  const int64_t vectors = hd / 8;
  if constexpr (kMaxNc >= 8) {
    if (vectors >= 8) return weighted_v_tile<T, HC, 8>(p, ss, v_slice, first, rows, hd, out);
  }
  if constexpr (kMaxNc >= 4) {
    if (vectors >= 4) return weighted_v_tile<T, HC, 4>(p, ss, v_slice, first, rows, hd, out);
  }
  weighted_v_tile<T, HC, 2>(p, ss, v_slice, first, rows, hd, out);
}

// Rows of V per tile: 32 rows are 8 KiB of float32 V at hd 64, 32 KiB at hd 256.
constexpr int64_t kVTileRows = 32;

template <typename T, int G>
void weighted_v_all(const float* scores, int64_t ss, const KvHeadBlocks& kv, int64_t js, int64_t n_kv, int64_t hd,
                    float* out) {
  using Chunks = HeadChunks<G>;
  for (int64_t i = 0; i < G * hd; i += 8) _mm256_storeu_ps(out + i, _mm256_setzero_ps());
  const int64_t bp = kv.block_pos;
  for (int64_t b = js / bp, j0 = b * bp; j0 < n_kv; ++b, j0 += bp) {
    const int64_t rows = n_kv - j0 < bp ? n_kv - j0 : bp;
    const uint8_t* v_slice = kv.v(b);
    for (int64_t r0 = j0 < js ? js - j0 : 0; r0 < rows; r0 += kVTileRows) {
      const int64_t n = rows - r0 < kVTileRows ? rows - r0 : kVTileRows;
      const float* p = scores + j0 + r0;
      weighted_v_tile_any<T, Chunks::kFirst>(p, ss, v_slice, r0, n, hd, out);
      if constexpr (Chunks::kSecond > 0)
        weighted_v_tile_any<T, Chunks::kSecond>(p + Chunks::kFirst * ss, ss, v_slice, r0, n, hd, out + Chunks::kFirst * hd);
    }
  }
}

// Positions [js, n_kv) are read, js = first rounded down to a K block.
template <typename T, int G>
void attend(const float* q, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv, const AttendParams& p, float* scores,
            float* out) {
  const int64_t ss = scores_stride(n_kv), js = p.first / kKvBlock * kKvBlock;
  score_all<T, G>(q, hd, kv, js, n_kv, p.scale, scores, ss);
  for (int h = 0; h < G; ++h) weights(scores + h * ss, js, n_kv, p);
  weighted_v_all<T, G>(scores, ss, kv, js, n_kv, hd, out);
}

template <typename T>
void attend_group(const float* q, int group, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv, const AttendParams& p,
                  float* scores, float* out) {
  switch (group) {
    case 1: return attend<T, 1>(q, hd, kv, n_kv, p, scores, out);
    case 2: return attend<T, 2>(q, hd, kv, n_kv, p, scores, out);
    case 3: return attend<T, 3>(q, hd, kv, n_kv, p, scores, out);
    case 4: return attend<T, 4>(q, hd, kv, n_kv, p, scores, out);
    case 5: return attend<T, 5>(q, hd, kv, n_kv, p, scores, out);
    case 6: return attend<T, 6>(q, hd, kv, n_kv, p, scores, out);
    case 7: return attend<T, 7>(q, hd, kv, n_kv, p, scores, out);
    default: return attend<T, 8>(q, hd, kv, n_kv, p, scores, out);
  }
}

}  // namespace

void attend_group_avx2(const float* q, int group, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv,
                       const AttendParams& p, float* scores, float* out) {
  attend_group<float>(q, group, hd, kv, n_kv, p, scores, out);
}

void attend_group_f16_avx2(const float* q, int group, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv,
                           const AttendParams& p, float* scores, float* out) {
  attend_group<uint16_t>(q, group, hd, kv, n_kv, p, scores, out);
}

void attend_group_q8_avx2(const float* q, int group, int64_t hd, const KvHeadBlocks& kv, int64_t n_kv,
                          const AttendParams& p, float* scores, float* out) {
  attend_group<uint8_t>(q, group, hd, kv, n_kv, p, scores, out);
}

}  // namespace laya::cpu
