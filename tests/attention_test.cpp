// The decode-attention kernels: the scalar one against a plain softmax
// attention written here on row-major K (so the blocked K layout is checked
// too), the SIMD ones of every ISA this CPU has (not only the active one)
// against the scalar ones, on random data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "backend/cpu/attention.h"
#include "core/fp16.h"

namespace laya::cpu {
namespace {

// out (group, hd) from row-major k, v (n_kv, hd), in double, over
// positions [first, n_kv), scores soft-capped when softcap > 0.
std::vector<float> plain_attention(const std::vector<float>& q, int group, int64_t hd, const std::vector<float>& k,
                                   const std::vector<float>& v, int64_t n_kv, float scale, int64_t first = 0,
                                   double softcap = 0) {
  std::vector<float> out(static_cast<size_t>(group * hd));
  for (int h = 0; h < group; ++h) {
    std::vector<double> s(static_cast<size_t>(n_kv), -INFINITY);
    double mx = -INFINITY, sum = 0;
    for (int64_t j = first; j < n_kv; ++j) {
      double d = 0;
      for (int64_t i = 0; i < hd; ++i) d += static_cast<double>(k[static_cast<size_t>(j * hd + i)]) * q[static_cast<size_t>(h * hd + i)];
      d *= scale;
      s[static_cast<size_t>(j)] = softcap > 0 ? softcap * std::tanh(d / softcap) : d;
      mx = std::max(mx, s[static_cast<size_t>(j)]);
    }
    for (auto& x : s) sum += (x = std::exp(x - mx));
    for (int64_t i = 0; i < hd; ++i) {
      double o = 0;
      for (int64_t j = first; j < n_kv; ++j) o += s[static_cast<size_t>(j)] / sum * v[static_cast<size_t>(j * hd + i)];
      out[static_cast<size_t>(h * hd + i)] = static_cast<float>(o);
    }
  }
  return out;
}

// The SIMD ISAs this CPU and build support: each one's kernels are checked,
// whichever LAYA_ISA picks.
std::vector<Isa> simd_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kNeon})
    if (isa_supported(isa)) isas.push_back(isa);
  return isas;
}

struct Case {
  std::vector<float> q, k_rows, v_rows, k_blocked;
  std::vector<uint16_t> k16_blocked, v16;
};

// Random q, K, V; K also in the blocked layout (garbage past n_kv in the last
// block, which the kernels must ignore), and both in fp16 (values rounded
// first, so the fp16 and float32 paths see the same numbers).
Case make_case(std::mt19937& rng, int group, int64_t hd, int64_t n_kv) {
  std::normal_distribution<float> nd(0.f, 1.f);
  Case c;
  c.q.resize(static_cast<size_t>(group * hd));
  for (auto& x : c.q) x = nd(rng);
  const size_t n = static_cast<size_t>(n_kv * hd);
  c.k_rows.resize(n);
  c.v_rows.resize(n);
  c.v16.resize(n);
  for (size_t i = 0; i < n; ++i) {
    c.k_rows[i] = fp16_to_f32(f32_to_fp16(nd(rng) * 2.f));
    c.v16[i] = f32_to_fp16(nd(rng));
    c.v_rows[i] = fp16_to_f32(c.v16[i]);
  }
  const size_t nb = static_cast<size_t>(scores_stride(n_kv) * hd);
  c.k_blocked.assign(nb, std::nanf(""));
  c.k16_blocked.assign(nb, 0x7E00);  // fp16 NaN
  for (int64_t j = 0; j < n_kv; ++j) {
    for (int64_t i = 0; i < hd; ++i) {
      const float x = c.k_rows[static_cast<size_t>(j * hd + i)];
      c.k_blocked[static_cast<size_t>(k_index(j, i, hd))] = x;
      c.k16_blocked[static_cast<size_t>(k_index(j, i, hd))] = f32_to_fp16(x);
    }
  }
  return c;
}

TEST(KernelAttention, ScalarMatchesPlainAttention) {
  std::mt19937 rng(10);
  for (int group : {1, 4, 7}) {
    for (int64_t hd : {16, 64}) {
      for (int64_t n_kv : {1, 15, 17, 100}) {
        Case c = make_case(rng, group, hd, n_kv);
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        const std::vector<float> want = plain_attention(c.q, group, hd, c.k_rows, c.v_rows, n_kv, scale);
        std::vector<float> scores(static_cast<size_t>(group * scores_stride(n_kv))), out(c.q.size()), out16(c.q.size());
        attend_group_scalar(c.q.data(), group, hd, KvHeadBlocks::contiguous(c.k_blocked.data(), c.v_rows.data()), n_kv, {scale}, scores.data(),
                            out.data());
        attend_group_f16_scalar(c.q.data(), group, hd, KvHeadBlocks::contiguous(c.k16_blocked.data(), c.v16.data()), n_kv, {scale},
                                scores.data(), out16.data());
        for (size_t i = 0; i < out.size(); ++i) {
          ASSERT_NEAR(out[i], want[i], 1e-5f * (1.f + std::fabs(want[i]))) << "group " << group << " hd " << hd << " n_kv " << n_kv;
          ASSERT_EQ(out16[i], out[i]) << "fp16 path vs float32 path on the same values";
        }
      }
    }
  }
}

TEST(KernelAttention, SimdMatchesScalar) {
  std::mt19937 rng(11);
  int checked = 0;
  for (Isa isa : simd_isas()) {
    int isa_checked = 0;
    for (int group : {1, 2, 3, 4, 5, 6, 7, 8}) {
      for (int64_t hd : {16, 32, 64, 128, 256}) {
        AttendGroupFn f = attend_group_for(DType::F32, group, hd, isa);
        AttendGroupFn f16 = attend_group_for(DType::F16, group, hd, isa);
        if (f == attend_group_scalar) continue;
        for (int64_t n_kv : {1, 7, 8, 15, 16, 17, 33, 300}) {
          Case c = make_case(rng, group, hd, n_kv);
          const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
          std::vector<float> s1(static_cast<size_t>(group * scores_stride(n_kv))), s2(s1.size());
          std::vector<float> o1(c.q.size()), o2(c.q.size()), o3(c.q.size());
          const KvHeadBlocks kv32 = KvHeadBlocks::contiguous(c.k_blocked.data(), c.v_rows.data());
          const KvHeadBlocks kv16 = KvHeadBlocks::contiguous(c.k16_blocked.data(), c.v16.data());
          attend_group_scalar(c.q.data(), group, hd, kv32, n_kv, {scale}, s1.data(), o1.data());
          f(c.q.data(), group, hd, kv32, n_kv, {scale}, s2.data(), o2.data());
          f16(c.q.data(), group, hd, kv16, n_kv, {scale}, s2.data(), o3.data());
          for (size_t i = 0; i < o1.size(); ++i) {
            ASSERT_NEAR(o2[i], o1[i], 2e-5f * (1.f + std::fabs(o1[i])))
                << isa_name(isa) << ", group " << group << " hd " << hd << " n_kv " << n_kv;
            ASSERT_NEAR(o3[i], o1[i], 2e-5f * (1.f + std::fabs(o1[i])))
                << isa_name(isa) << ", fp16, group " << group << " hd " << hd << " n_kv " << n_kv;
          }
          ++isa_checked;
        }
      }
    }
    std::printf("[ measure  ] %s attention: %d cases checked against the scalar kernel\n", isa_name(isa), isa_checked);
    checked += isa_checked;
  }
  if (checked == 0) GTEST_SKIP() << "no SIMD attention kernel for this CPU: only the scalar one exists here";
}

// A sliding window (positions [first, n_kv) only) and soft-capped scores:
// the scalar kernels against the plain attention, every SIMD kernel against
// the scalar one of its cache type, first at and around a K block's edge.
TEST(KernelAttention, WindowAndSoftcap) {
  std::mt19937 rng(19);
  int simd_checked = 0;
  for (int group : {1, 3, 8}) {
    for (int64_t hd : {32, 64, 256}) {
      for (int64_t n_kv : {17, 40, 300}) {
        Case c = make_case(rng, group, hd, n_kv);
        const int64_t slots = scores_stride(n_kv);
        std::vector<uint8_t> ks(static_cast<size_t>(slots / kKvBlock) * q8_k_block_bytes(hd), 0xAB);
        std::vector<uint8_t> vs(static_cast<size_t>(slots) * q8_v_row_bytes(hd), 0xCD);
        for (int64_t j = 0; j < n_kv; ++j) {
          q8_store_k(ks.data(), j, c.k_rows.data() + j * hd, hd);
          q8_store_v(vs.data(), j, c.v_rows.data() + j * hd, hd);
        }
        const KvHeadBlocks kv[3] = {KvHeadBlocks::contiguous(c.k_blocked.data(), c.v_rows.data()),
                                    KvHeadBlocks::contiguous(c.k16_blocked.data(), c.v16.data()),
                                    KvHeadBlocks::contiguous(ks.data(), vs.data())};
        const DType types[3] = {DType::F32, DType::F16, DType::Q8_0};
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        for (int64_t first : {int64_t{1}, int64_t{15}, int64_t{16}, n_kv / 2, n_kv - 1}) {
          for (float cap : {0.0f, 2.5f}) {
            const AttendParams ap{scale, cap, first};
            const std::string where = "group " + std::to_string(group) + " hd " + std::to_string(hd) + " n_kv " +
                                      std::to_string(n_kv) + " first " + std::to_string(first) + " cap " +
                                      std::to_string(cap);
            const std::vector<float> want = plain_attention(c.q, group, hd, c.k_rows, c.v_rows, n_kv, scale, first, cap);
            std::vector<float> scores(static_cast<size_t>(group * slots)), ref(c.q.size()), got(c.q.size());
            attend_group_scalar(c.q.data(), group, hd, kv[0], n_kv, ap, scores.data(), ref.data());
            for (size_t i = 0; i < ref.size(); ++i)
              ASSERT_NEAR(ref[i], want[i], 1e-5f * (1.f + std::fabs(want[i]))) << where;
            for (int t = 0; t < 3; ++t) {
              if (types[t] == DType::Q8_0 && hd % 32 != 0) continue;
              attend_group_scalar_for(types[t])(c.q.data(), group, hd, kv[t], n_kv, ap, scores.data(), ref.data());
              for (Isa isa : simd_isas()) {
                const AttendGroupFn f = attend_group_for(types[t], group, hd, isa);
                if (f == attend_group_scalar_for(types[t])) continue;
                f(c.q.data(), group, hd, kv[t], n_kv, ap, scores.data(), got.data());
                for (size_t i = 0; i < ref.size(); ++i)
                  ASSERT_NEAR(got[i], ref[i], 2e-5f * (1.f + std::fabs(ref[i])))
                      << isa_name(isa) << " " << dtype_name(types[t]) << " " << where;
                ++simd_checked;
              }
            }
          }
        }
      }
    }
  }
  std::printf("[ measure  ] windowed / soft-capped attention: %d SIMD cases checked against the scalar kernel\n",
              simd_checked);
}

// Q8_0 cache: the test's own Q8_0 rounding (d = max|x| / 127, q = round(x / d)
// per 32 values) gives the values a plain attention is run on; the scalar
// kernel over q8_store_k/v's slices must match it, the SIMD one the scalar.
TEST(KernelAttention, Q8CacheMatchesPlainAttentionOnItsValues) {
  std::mt19937 rng(13);
  std::normal_distribution<float> nd(0.f, 1.f);
  int simd_checked = 0;
  for (int group : {1, 2, 3, 4, 5, 7, 8}) {
    for (int64_t hd : {32, 64, 128, 256}) {
      for (int64_t n_kv : {1, 7, 15, 16, 17, 33, 100}) {
        std::vector<float> q(static_cast<size_t>(group * hd)), k(static_cast<size_t>(n_kv * hd)), v(k.size());
        for (auto& x : q) x = nd(rng);
        for (auto& x : k) x = nd(rng) * 2.f;
        for (auto& x : v) x = nd(rng);
        const int64_t slots = scores_stride(n_kv);
        std::vector<uint8_t> ks(static_cast<size_t>(slots / kKvBlock) * q8_k_block_bytes(hd), 0xAB);
        std::vector<uint8_t> vs(static_cast<size_t>(slots) * q8_v_row_bytes(hd), 0xCD);
        for (int64_t j = 0; j < n_kv; ++j) {
          q8_store_k(ks.data(), j, k.data() + j * hd, hd);
          q8_store_v(vs.data(), j, v.data() + j * hd, hd);
        }
        std::vector<float> kd(k.size()), vd(v.size());
        for (size_t b = 0; b < k.size(); b += 32) {
          for (const auto& pair : {std::make_pair(&k, &kd), std::make_pair(&v, &vd)}) {
            float amax = 0;
            for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs((*pair.first)[i]));
            const float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
            for (size_t i = b; i < b + 32; ++i) (*pair.second)[i] = std::roundf((*pair.first)[i] * id) * d;
          }
        }
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        const std::vector<float> want = plain_attention(q, group, hd, kd, vd, n_kv, scale);
        std::vector<float> scores(static_cast<size_t>(group * slots)), o1(q.size()), o2(q.size());
        attend_group_q8_scalar(q.data(), group, hd, KvHeadBlocks::contiguous(ks.data(), vs.data()), n_kv, {scale}, scores.data(), o1.data());
        for (size_t i = 0; i < o1.size(); ++i)
          ASSERT_NEAR(o1[i], want[i], 1e-5f * (1.f + std::fabs(want[i]))) << "group " << group << " hd " << hd << " n_kv " << n_kv;
        for (Isa isa : simd_isas()) {
          AttendGroupFn f = attend_group_for(DType::Q8_0, group, hd, isa);
          if (f == attend_group_q8_scalar) continue;
          f(q.data(), group, hd, KvHeadBlocks::contiguous(ks.data(), vs.data()), n_kv, {scale}, scores.data(), o2.data());
          for (size_t i = 0; i < o1.size(); ++i)
            ASSERT_NEAR(o2[i], o1[i], 2e-5f * (1.f + std::fabs(o1[i])))
                << isa_name(isa) << ", group " << group << " hd " << hd << " n_kv " << n_kv;
          ++simd_checked;
        }
      }
    }
  }
  std::printf("[ measure  ] Q8_0 attention: %d SIMD cases checked against the scalar kernel\n", simd_checked);
}

// The KV block pool: a head's positions spread over blocks in any order give
// bit-identical results to one contiguous slice, for every cache type and
// kernel (same arithmetic, same order), whatever the block size.
TEST(KernelAttention, BlocksInAnyOrderEqualOneContiguousSlice) {
  std::mt19937 rng(17);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int group = 4;
  const int64_t hd = 64;
  const std::vector<Isa> isas = simd_isas();
  int checked = 0;
  for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
    for (int64_t bp : {16, 32, 64}) {
      for (int64_t n_kv : {1, 16, 17, 63, 64, 65, 200}) {
        const int64_t n_blocks = (n_kv + bp - 1) / bp;
        // A pool of 2 * n_blocks blocks; the sequence's blocks at shuffled ids.
        std::vector<int32_t> ids(static_cast<size_t>(2 * n_blocks));
        for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
        std::shuffle(ids.begin(), ids.end(), rng);
        ids.resize(static_cast<size_t>(n_blocks));
        const size_t head = type == DType::Q8_0 ? static_cast<size_t>(bp / kKvBlock) * q8_k_block_bytes(hd)
                                                : static_cast<size_t>(bp * hd) * (type == DType::F16 ? 2 : 4);
        const size_t block_bytes = 2 * head;  // K then V of this one head
        std::vector<uint8_t> pool(static_cast<size_t>(2 * n_blocks) * block_bytes, 0x7E);
        const int64_t slots = n_blocks * bp;
        std::vector<uint8_t> kc(head * static_cast<size_t>(n_blocks)), vc(kc.size());  // contiguous copy
        std::vector<float> q(static_cast<size_t>(group * hd)), x(static_cast<size_t>(hd));
        for (auto& e : q) e = nd(rng);
        for (int64_t p = 0; p < n_kv; ++p) {
          uint8_t* kb = pool.data() + static_cast<size_t>(ids[static_cast<size_t>(p / bp)]) * block_bytes;
          uint8_t* vb = kb + head;
          for (int side = 0; side < 2; ++side) {
            for (auto& e : x) e = nd(rng);
            uint8_t* dst[2] = {side ? vb : kb, side ? vc.data() : kc.data()};
            const int64_t slot[2] = {p % bp, p};
            for (int w = 0; w < 2; ++w) {
              if (type == DType::Q8_0) {
                side ? q8_store_v(dst[w], slot[w], x.data(), hd) : q8_store_k(dst[w], slot[w], x.data(), hd);
              } else {
                for (int64_t i = 0; i < hd; ++i) {
                  const int64_t at = side ? slot[w] * hd + i : k_index(slot[w], i, hd);
                  if (type == DType::F16) reinterpret_cast<uint16_t*>(dst[w])[at] = f32_to_fp16(x[static_cast<size_t>(i)]);
                  else reinterpret_cast<float*>(dst[w])[at] = x[static_cast<size_t>(i)];
                }
              }
            }
          }
        }
        const KvHeadBlocks blocks{pool.data(), pool.data() + head, ids.data(), block_bytes, bp};
        const KvHeadBlocks flat = KvHeadBlocks::contiguous(kc.data(), vc.data());
        std::vector<AttendGroupFn> fns = {attend_group_scalar_for(type)};
        for (Isa isa : isas) fns.push_back(attend_group_for(type, group, hd, isa));
        for (AttendGroupFn f : fns) {
          // The whole cache, and a sliding window that starts mid-block.
          for (const int64_t first : {int64_t{0}, n_kv / 2}) {
            std::vector<float> s1(static_cast<size_t>(group * scores_stride(slots))), s2(s1.size());
            std::vector<float> o1(q.size()), o2(q.size());
            const AttendParams ap{0.125f, first ? 3.0f : 0.0f, first};
            f(q.data(), group, hd, flat, n_kv, ap, s1.data(), o1.data());
            f(q.data(), group, hd, blocks, n_kv, ap, s2.data(), o2.data());
            for (size_t i = 0; i < o1.size(); ++i)
              ASSERT_EQ(o2[i], o1[i]) << dtype_name(type) << " block " << bp << " n_kv " << n_kv << " first " << first
                                      << " element " << i;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 2 * 3 * 3 * 7 * static_cast<int>(1 + isas.size()));
}

}  // namespace
}  // namespace laya::cpu
