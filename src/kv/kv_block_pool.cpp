#include "kv/kv_block_pool.h"

#include <algorithm>
#include <fmt/format.h>
#include <limits>

#include <xxhash.h>

namespace laya {

Result<std::unique_ptr<KvBlockPool>> KvBlockPool::create(std::shared_ptr<Backend> be, const KvLayout& layout,
                                                        size_t budget_bytes) {
  LAYA_TRY(check_block_positions(layout.block_pos));
  const size_t bb = layout.block_bytes();
  if (bb == 0 || budget_bytes < bb) {
    return Status(
        StatusCode::kInvalidArgument,
        fmt::format("KV budget of {:.1f} MB holds no block (one block of {} positions is {:.1f} MB); raise the budget",
                    static_cast<double>(budget_bytes) / 1e6, layout.block_pos, static_cast<double>(bb) / 1e6));
  }
  const int64_t n = std::min<int64_t>(static_cast<int64_t>(budget_bytes / bb), std::numeric_limits<int32_t>::max());
  LAYA_ASSIGN_OR_RETURN(Buffer buf, be->alloc(static_cast<size_t>(n) * bb, "the KV block pool"));
  return std::unique_ptr<KvBlockPool>(new KvBlockPool(std::move(be), layout, budget_bytes, std::move(buf), n));
}

Status KvBlockPool::check_block_positions(int64_t block_pos) {
  if (block_pos <= 0 || block_pos % 16 != 0) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("KV block of {} positions: must be a positive multiple of 16", block_pos));
  }
  return Status::Ok();
}

KvBlockPool::KvBlockPool(std::shared_ptr<Backend> be, const KvLayout& layout, size_t budget, Buffer buf,
                         int64_t n_blocks)
    : be_(std::move(be)),
      layout_(layout),
      budget_(budget),
      buf_(std::move(buf)),
      n_blocks_(n_blocks),
      meta_(static_cast<size_t>(n_blocks)) {
  for (int32_t i = 0; i < n_blocks; ++i) push_free_back(i);
}

void KvBlockPool::unlink(int32_t id) {
  Meta& m = meta_[static_cast<size_t>(id)];
  if (m.prev >= 0) meta_[static_cast<size_t>(m.prev)].next = m.next; else free_head_ = m.next;
  if (m.next >= 0) meta_[static_cast<size_t>(m.next)].prev = m.prev; else free_tail_ = m.prev;
  m.prev = m.next = -1;
}

void KvBlockPool::push_free_back(int32_t id) {
  Meta& m = meta_[static_cast<size_t>(id)];
  m.prev = free_tail_;
  m.next = -1;
  if (free_tail_ >= 0) meta_[static_cast<size_t>(free_tail_)].next = id; else free_head_ = id;
  free_tail_ = id;
}

void KvBlockPool::push_free_front(int32_t id) {
  Meta& m = meta_[static_cast<size_t>(id)];
  m.prev = -1;
  m.next = free_head_;
  if (free_head_ >= 0) meta_[static_cast<size_t>(free_head_)].prev = id; else free_tail_ = id;
  free_head_ = id;
}

Result<int32_t> KvBlockPool::allocate() {
  if (free_head_ < 0) {
    return Status(StatusCode::kOutOfMemory,
                  fmt::format("KV block pool full: all {} blocks ({:.1f} MB of a {:.1f} MB budget) are in use; raise "
                              "the KV budget (--kv-budget MB) or close sequences",
                              n_blocks_, static_cast<double>(buf_.bytes()) / 1e6, static_cast<double>(budget_) / 1e6));
  }
  const int32_t id = free_head_;
  unlink(id);
  Meta& m = meta_[static_cast<size_t>(id)];
  if (m.key != 0) --n_cached_;  // evict the least recently released cached block
  m.key = 0;
  m.refs = 1;
  ++n_in_use_;
  return id;
}

void KvBlockPool::retain(int32_t id) { ++meta_[static_cast<size_t>(id)].refs; }

void KvBlockPool::release(int32_t id) {
  Meta& m = meta_[static_cast<size_t>(id)];
  if (--m.refs > 0) return;
  --n_in_use_;
  if (m.key != 0) {
    ++n_cached_;
    push_free_back(id);
  } else {
    push_free_front(id);
  }
}

void KvBlockPool::set_key(int32_t id, uint64_t key) { meta_[static_cast<size_t>(id)].key = key; }

int32_t KvBlockPool::find_cached(uint64_t key) {
  if (key == 0) return -1;
  for (int32_t id = 0; id < n_blocks_; ++id) {
    Meta& m = meta_[static_cast<size_t>(id)];
    if (m.key != key) continue;
    if (m.refs == 0) {
      unlink(id);
      --n_cached_;
      ++n_in_use_;
    }
    ++m.refs;
    return id;
  }
  return -1;
}

Result<int32_t> KvBlockPool::make_writable(int32_t id) {
  if (meta_[static_cast<size_t>(id)].refs == 1) {
    meta_[static_cast<size_t>(id)].key = 0;  // about to change: no longer the content its key named
    return id;
  }
  LAYA_ASSIGN_OR_RETURN(int32_t fresh, allocate());
  const size_t bb = layout_.block_bytes();
  LAYA_TRY(be_->copy(memory() + static_cast<size_t>(fresh) * bb, memory() + static_cast<size_t>(id) * bb, bb));
  release(id);
  return fresh;
}

void KvBlockPool::forget_cached() {
  for (int32_t id = free_head_; id >= 0; id = meta_[static_cast<size_t>(id)].next) {
    Meta& m = meta_[static_cast<size_t>(id)];
    if (m.key != 0) m.key = 0;
  }
  // The list order (keyless first) no longer matters: every free block is keyless.
  n_cached_ = 0;
}

// ---- KvBlockTable ------------------------------------------------------------------------

KvBlockTable::KvBlockTable(KvBlockPool& pool, int64_t n_ctx)
    : pool_(pool), max_blocks_((n_ctx + pool.layout().block_pos - 1) / pool.layout().block_pos) {
  ids_.reserve(static_cast<size_t>(max_blocks_));
}

KvBlockTable::~KvBlockTable() { truncate(0); }

Status KvBlockTable::prepare_write(int64_t pos, int64_t n) {
  const int64_t bp = pool_.layout().block_pos;
  const int64_t need = (pos + n + bp - 1) / bp;
  if (need > max_blocks_) {
    return Status(StatusCode::kOutOfRange,
                  fmt::format("KV positions up to {} exceed the sequence's {} blocks", pos + n, max_blocks_));
  }
  // Copy the shared blocks the write lands in, then take new ones. A failure
  // part way leaves valid, owned blocks: nothing before pos is touched.
  for (int64_t b = pos / bp; b < std::min<int64_t>(need, n_blocks()); ++b) {
    LAYA_ASSIGN_OR_RETURN(ids_[static_cast<size_t>(b)], pool_.make_writable(ids_[static_cast<size_t>(b)]));
  }
  while (n_blocks() < need) {
    LAYA_ASSIGN_OR_RETURN(int32_t id, pool_.allocate());
    ids_.push_back(id);  // within the reserved capacity: no allocation
  }
  return Status::Ok();
}

void KvBlockTable::truncate(int64_t n_pos) {
  const int64_t bp = pool_.layout().block_pos;
  const int64_t keep = (n_pos + bp - 1) / bp;
  while (n_blocks() > keep) {
    pool_.release(ids_.back());
    ids_.pop_back();
  }
}

void KvBlockTable::share_prefix(const KvBlockTable& other, int64_t n_pos) {
  truncate(0);
  const int64_t bp = pool_.layout().block_pos;
  const int64_t nb = std::min<int64_t>((n_pos + bp - 1) / bp, other.n_blocks());
  for (int64_t b = 0; b < nb; ++b) {
    const int32_t id = other.ids_[static_cast<size_t>(b)];
    pool_.retain(id);
    ids_.push_back(id);
  }
}

uint64_t KvBlockTable::chain_key(uint64_t prev, std::span<const int32_t> block_tokens) {
  const uint64_t k = XXH64(block_tokens.data(), block_tokens.size_bytes(), prev);
  return k == 0 ? 1 : k;  // 0 means "no key"
}

void KvBlockTable::key_full_blocks(uint64_t seed, std::span<const int32_t> tokens, int64_t first_pos) {
  const int64_t bp = pool_.layout().block_pos;
  const int64_t n_full = std::min<int64_t>(static_cast<int64_t>(tokens.size()) / bp, n_blocks());
  uint64_t key = seed;
  for (int64_t b = 0; b < n_full; ++b) {
    const int32_t id = ids_[static_cast<size_t>(b)];
    if ((b + 1) * bp <= first_pos && pool_.key(id) != 0) {  // unchanged since it was keyed
      key = pool_.key(id);
      continue;
    }
    key = chain_key(key, tokens.subspan(static_cast<size_t>(b * bp), static_cast<size_t>(bp)));
    if (pool_.refcount(id) == 1) pool_.set_key(id, key);
  }
}

int64_t KvBlockTable::adopt_cached_prefix(uint64_t seed, std::span<const int32_t> tokens) {
  if (!ids_.empty()) return n_blocks() * pool_.layout().block_pos;
  const int64_t bp = pool_.layout().block_pos;
  const int64_t n_full = std::min<int64_t>(static_cast<int64_t>(tokens.size()) / bp, max_blocks_);
  uint64_t key = seed;
  for (int64_t b = 0; b < n_full; ++b) {
    key = chain_key(key, tokens.subspan(static_cast<size_t>(b * bp), static_cast<size_t>(bp)));
    const int32_t id = pool_.find_cached(key);
    if (id < 0) break;
    ids_.push_back(id);
  }
  return n_blocks() * bp;
}

Status KvBlockTable::append_block(uint64_t key, const std::function<Status(uint8_t*)>& fill) {
  if (n_blocks() >= max_blocks_) {
    return Status(StatusCode::kOutOfRange,
                  fmt::format("KV block {} is past the sequence's {} blocks", n_blocks(), max_blocks_));
  }
  if (const int32_t hit = pool_.find_cached(key); hit >= 0) {
    ids_.push_back(hit);
    return Status::Ok();
  }
  LAYA_ASSIGN_OR_RETURN(int32_t id, pool_.allocate());
  Status st = fill(pool_.memory() + static_cast<size_t>(id) * pool_.layout().block_bytes());
  if (!st.ok()) {
    pool_.release(id);  // keyless: back to the front of the free list
    return st;
  }
  pool_.set_key(id, key);
  ids_.push_back(id);
  return Status::Ok();
}

}  // namespace laya
