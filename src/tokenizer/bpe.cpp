// BPE merge engine: a doubly linked list of symbols and a binary heap of
// candidate pairs (lazy invalidation). Two orders:
//  - kRank: the pair with the lowest merge rank first, leftmost on ties
//    (Hugging Face tokenizers, llama.cpp's BPE);
//  - kScore: the pair whose concatenation is the token with the highest score,
//    leftmost on ties (SentencePiece BPE as llama.cpp implements it).
#include <algorithm>
#include <atomic>

#include "tokenizer/internal.h"

namespace laya::tok {

size_t StrHash::operator()(std::string_view s) const noexcept {
  // FNV-1a, 64-bit: short keys, good enough spread, no allocation.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return size_t(h ^ (h >> 29));
}

namespace {
struct Sym {
  uint32_t b, len;
  int32_t id;
  int32_t prev, next;
};
struct Cand {
  float pri;  // lower first
  int32_t left, right;
  int32_t lid, rid;   // kRank: ids at push time
  int32_t new_id;
  uint32_t size;      // kScore: bytes of the pair at push time
};
struct CandGreater {
  bool operator()(const Cand& a, const Cand& b) const {
    if (a.pri != b.pri) return a.pri > b.pri;
    return a.left > b.left;
  }
};
thread_local std::vector<Sym> t_syms;
thread_local std::vector<Cand> t_heap;
}  // namespace

BpeModel::BpeModel() {
  static std::atomic<uint64_t> next{1};
  uid = next.fetch_add(1);
  for (int i = 0; i < 256; ++i) byte_ids[i] = -1;
}

namespace {
// Per-thread cache of short pieces → ids (words repeat: most pieces of running
// text hit). One model at a time per thread; cleared when it grows too large.
struct PieceCache {
  uint64_t owner = 0;
  std::unordered_map<std::string, std::vector<int32_t>, StrHash, StrEq> map;
};
thread_local PieceCache t_cache;
constexpr size_t kCacheMaxPiece = 48;
constexpr size_t kCacheMaxEntries = 1 << 16;
}  // namespace

void BpeModel::encode(std::string_view piece, std::vector<int32_t>* out) const {
  if (piece.empty()) return;
  if (piece.size() <= kCacheMaxPiece) {
    PieceCache& c = t_cache;
    if (c.owner != uid) {
      c.map.clear();
      c.owner = uid;
    }
    auto it = c.map.find(piece);
    if (it != c.map.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
    size_t before = out->size();
    encode_uncached(piece, out);
    if (c.map.size() >= kCacheMaxEntries) c.map.clear();
    c.map.emplace(std::string(piece), std::vector<int32_t>(out->begin() + before, out->end()));
    return;
  }
  encode_uncached(piece, out);
}

namespace {
inline int small_index(uint32_t cp) { return cp < 128 ? int(cp) : cp == 0x2581 ? 128 : -1; }
}  // namespace

void BpeModel::build_inner_pairs() {
  small_pairs.assign((129 * 129 + 63) / 64, 0);
  big_pairs.clear();
  for (const auto& [key, id] : vocab) {
    uint32_t prev = 0xFFFFFFFFu;
    for (size_t i = 0; i < key.size();) {
      size_t n;
      uint32_t cp = utf8_decode(key, i, &n);
      if (prev != 0xFFFFFFFFu) {
        int a = small_index(prev), b = small_index(cp);
        if (a >= 0 && b >= 0) small_pairs[size_t(a * 129 + b) / 64] |= 1ull << (size_t(a * 129 + b) % 64);
        else big_pairs.insert((uint64_t(prev) << 32) | cp);
      }
      prev = cp;
      i += n;
    }
  }
  has_inner_pairs = true;
}

bool BpeModel::pair_inside_token(uint32_t a, uint32_t b) const {
  int x = small_index(a), y = small_index(b);
  if (x >= 0 && y >= 0) return (small_pairs[size_t(x * 129 + y) / 64] >> (size_t(x * 129 + y) % 64)) & 1;
  return big_pairs.count((uint64_t(a) << 32) | b) != 0;
}

void BpeModel::encode_chunked(std::string_view piece, std::vector<int32_t>* out) const {
  if (!has_inner_pairs) {
    encode(piece, out);
    return;
  }
  size_t start = 0, i = 0, n;
  uint32_t prev = 0xFFFFFFFFu;
  while (i < piece.size()) {
    uint32_t cp = utf8_decode(piece, i, &n);
    if (prev != 0xFFFFFFFFu && !pair_inside_token(prev, cp)) {
      encode(piece.substr(start, i - start), out);
      start = i;
    }
    prev = cp;
    i += n;
  }
  encode(piece.substr(start), out);
}

void BpeModel::encode_uncached(std::string_view piece, std::vector<int32_t>* out) const {
  if (ignore_merges) {
    int32_t id = find(piece);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }
  if (mode == MergeMode::kRank) encode_rank(piece, out);
  else encode_score(piece, out);
}

void BpeModel::emit_unknown(std::string_view chr, std::vector<int32_t>* out, bool* last_unk) const {
  if (byte_fallback) {
    bool all = true;
    for (unsigned char c : chr) all &= byte_ids[c] >= 0;
    if (all) {
      for (unsigned char c : chr) out->push_back(byte_ids[c]);
      *last_unk = false;
      return;
    }
  }
  if (unk_id >= 0) {
    if (!(fuse_unk && *last_unk)) out->push_back(unk_id);
    *last_unk = true;
  }
}

void BpeModel::encode_rank(std::string_view piece, std::vector<int32_t>* out) const {
  auto& syms = t_syms;
  auto& heap = t_heap;
  syms.clear();
  heap.clear();
  // Initial symbols.
  bool last_unk = false;
  for (size_t i = 0; i < piece.size();) {
    size_t n = byte_level ? 1 : utf8_len_at(piece, i);
    std::string_view c = piece.substr(i, n);
    int32_t id = find(c);
    if (id >= 0) {
      syms.push_back({uint32_t(i), uint32_t(n), id, int32_t(syms.size()) - 1, int32_t(syms.size()) + 1});
      last_unk = false;
    } else {
      // Unknown character: byte fallback pieces, or <unk> (fused when asked).
      if (byte_fallback) {
        bool all = true;
        for (unsigned char ch : c) all &= byte_ids[ch] >= 0;
        if (all) {
          for (size_t k = 0; k < n; ++k)
            syms.push_back({uint32_t(i + k), 1, byte_ids[uint8_t(c[k])], int32_t(syms.size()) - 1,
                            int32_t(syms.size()) + 1});
          last_unk = false;
          i += n;
          continue;
        }
      }
      if (unk_id >= 0) {
        if (fuse_unk && last_unk && !syms.empty()) {
          syms.back().len += uint32_t(n);
        } else {
          syms.push_back({uint32_t(i), uint32_t(n), unk_id, int32_t(syms.size()) - 1, int32_t(syms.size()) + 1});
        }
        last_unk = true;
      }
    }
    i += n;
  }
  if (syms.empty()) return;
  syms.back().next = -1;
  auto try_push = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    uint64_t key = (uint64_t(uint32_t(syms[l].id)) << 32) | uint32_t(syms[r].id);
    auto it = merges.find(key);
    if (it == merges.end()) return;
    heap.push_back({float(it->second.rank), l, r, syms[l].id, syms[r].id, it->second.id, 0});
    std::push_heap(heap.begin(), heap.end(), CandGreater());
  };
  for (int32_t i = 0; i + 1 < int32_t(syms.size()); ++i) try_push(i, i + 1);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), CandGreater());
    Cand c = heap.back();
    heap.pop_back();
    Sym& L = syms[c.left];
    if (L.len == 0 || L.next != c.right || L.id != c.lid) continue;
    Sym& R = syms[c.right];
    if (R.len == 0 || R.id != c.rid) continue;
    L.len += R.len;
    L.id = c.new_id;
    L.next = R.next;
    if (R.next >= 0) syms[R.next].prev = c.left;
    R.len = 0;
    try_push(L.prev, c.left);
    try_push(c.left, L.next);
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next) out->push_back(syms[i].id);
}

void BpeModel::encode_score(std::string_view piece, std::vector<int32_t>* out) const {
  auto& syms = t_syms;
  auto& heap = t_heap;
  syms.clear();
  heap.clear();
  for (size_t i = 0; i < piece.size();) {
    size_t n = utf8_len_at(piece, i);
    syms.push_back({uint32_t(i), uint32_t(n), -1, int32_t(syms.size()) - 1, int32_t(syms.size()) + 1});
    i += n;
  }
  if (syms.empty()) return;
  syms.back().next = -1;
  auto try_push = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    std::string_view text = piece.substr(syms[l].b, syms[l].len + syms[r].len);
    int32_t id = find(text);
    if (id < 0) return;
    heap.push_back({-scores[size_t(id)], l, r, 0, 0, id, uint32_t(text.size())});
    std::push_heap(heap.begin(), heap.end(), CandGreater());
  };
  for (int32_t i = 0; i + 1 < int32_t(syms.size()); ++i) try_push(i, i + 1);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), CandGreater());
    Cand c = heap.back();
    heap.pop_back();
    Sym& L = syms[c.left];
    if (L.len == 0 || L.next != c.right) continue;
    Sym& R = syms[c.right];
    if (R.len == 0 || L.len + R.len != c.size) continue;
    L.len += R.len;
    L.id = c.new_id;
    L.next = R.next;
    if (R.next >= 0) syms[R.next].prev = c.left;
    R.len = 0;
    try_push(L.prev, c.left);
    try_push(c.left, L.next);
  }
  bool last_unk = false;
  for (int32_t i = 0; i >= 0; i = syms[i].next) {
    std::string_view text = piece.substr(syms[i].b, syms[i].len);
    int32_t id = syms[i].id >= 0 ? syms[i].id : find(text);
    if (id >= 0) {
      out->push_back(id);
      last_unk = false;
    } else {
      emit_unknown(text, out, &last_unk);
    }
  }
}

}  // namespace laya::tok
