// KV memory for every sequence of an engine: fixed-size blocks of
// KvLayout::block_pos positions (all layers), carved out of one backend
// buffer that is allocated, zero-filled and locked when the pool is made —
// never per sequence, never per token. A sequence holds a KvBlockTable (its
// block ids in position order) and takes blocks as it grows, so a sequence
// with no tokens costs no KV memory.
//
// Blocks are shared by reference count: a sequence forked from another (the
// same document open twice, a common prefix) points at the same blocks, and
// a shared block is copied before it is written (copy on write). A block
// that is full carries a content key — a hash of the model identity and the
// token prefix up to the block's end — so an identical prefix can be found
// again (find_cached). A released block with a key stays cached, evictable:
// allocate() takes never-used or keyless free blocks first, then the least
// recently used cached one.
//
// Not thread-safe: the engine serialises calls (one forward at a time).
// Nothing here allocates after create().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"

namespace laya {

class KvBlockPool {
 public:
  // A pool of floor(budget_bytes / block_bytes) blocks (at least one block
  // must fit, else kInvalidArgument naming both sizes).
  // The pool keeps the backend alive (its memory is the backend's).
  static Result<std::unique_ptr<KvBlockPool>> create(std::shared_ptr<Backend> be, const KvLayout& layout,
                                                     size_t budget_bytes);
  // kInvalidArgument unless block_pos is a positive multiple of 16 (the CPU
  // kernels' K layout); create() checks it, callers sizing a budget first may too.
  static Status check_block_positions(int64_t block_pos);

  const KvLayout& layout() const { return layout_; }
  int64_t n_blocks() const { return n_blocks_; }
  int64_t n_in_use() const { return n_in_use_; }  // referenced by a sequence
  int64_t n_cached() const { return n_cached_; }  // unreferenced, keyed, evictable
  size_t bytes() const { return buf_.bytes(); }
  size_t budget_bytes() const { return budget_; }
  uint8_t* memory() const { return buf_.as<uint8_t>(); }

  // A block for a sequence to write (reference count 1, no key), or
  // kOutOfMemory naming the budget when every block is referenced.
  Result<int32_t> allocate();
  void retain(int32_t id);
  // Drops a reference; at zero the block is free (cached if it has a key).
  void release(int32_t id);
  int32_t refcount(int32_t id) const { return meta_[static_cast<size_t>(id)].refs; }

  // Content keys (0 = none).
  uint64_t key(int32_t id) const { return meta_[static_cast<size_t>(id)].key; }
  void set_key(int32_t id, uint64_t key);
  // A resident block (in use or cached) holding `key`, retained for the
  // caller, or -1. Linear in the pool's size (used when a sequence starts).
  int32_t find_cached(uint64_t key);

  // Copy on write: `id` itself when only the caller holds it, else a fresh
  // copy (the caller's reference moves to it). kOutOfMemory when no block is free.
  Result<int32_t> make_writable(int32_t id);

  // Forgets every cached (unreferenced, keyed) block: they become plain free
  // blocks, so nothing computed before is found again. For a measurement
  // that must start cold (bench-sessions' recompute figure) and for callers
  // that want the memory's contents gone. Blocks in use are untouched.
  void forget_cached();

 private:
  KvBlockPool(std::shared_ptr<Backend> be, const KvLayout& layout, size_t budget, Buffer buf, int64_t n_blocks);
  struct Meta {
    int32_t refs = 0;
    uint64_t key = 0;
    int32_t prev = -1, next = -1;  // free list, least recently released first
  };
  void unlink(int32_t id);
  void push_free_back(int32_t id);
  void push_free_front(int32_t id);

  std::shared_ptr<Backend> be_;  // first: destroyed after buf_
  KvLayout layout_;
  size_t budget_;
  Buffer buf_;
  int64_t n_blocks_;
  std::vector<Meta> meta_;
  // One free list: keyless blocks at the front (taken first), cached ones
  // appended when released (so the front of the cached part is the LRU).
  int32_t free_head_ = -1, free_tail_ = -1;
  int64_t n_in_use_ = 0, n_cached_ = 0;
};

// One sequence's blocks, in position order. Grows one block at a time from
// the pool; cutting it back releases the blocks past the cut.
class KvBlockTable {
 public:
  // Reserves the table for n_ctx positions (a few bytes per block), nothing from the pool.
  KvBlockTable(KvBlockPool& pool, int64_t n_ctx);
  ~KvBlockTable();
  KvBlockTable(const KvBlockTable&) = delete;
  KvBlockTable& operator=(const KvBlockTable&) = delete;

  std::span<const int32_t> ids() const { return ids_; }
  int64_t n_blocks() const { return static_cast<int64_t>(ids_.size()); }
  int64_t capacity() const { return n_blocks() * pool_.layout().block_pos; }  // positions held

  // Makes positions [pos, pos + n) writable: takes blocks up to pos + n and
  // copies any shared block in the range (copy on write). On failure
  // (kOutOfMemory) the table holds what it had, and the positions before pos
  // are unchanged.
  Status prepare_write(int64_t pos, int64_t n);
  // Keeps positions [0, n_pos): releases every block past them. A block cut
  // in the middle keeps its key until it is written: prepare_write's
  // make_writable drops the key (or copies a shared block) before that.
  void truncate(int64_t n_pos);
  // Shares `other`'s blocks covering [0, n_pos) (reference counts; no copy).
  void share_prefix(const KvBlockTable& other, int64_t n_pos);
  // Sets the content key of every full block in [first_pos, n_pos) from the
  // tokens [0, n_pos) (keys chain: block b's key covers tokens up to its end).
  void key_full_blocks(uint64_t seed, std::span<const int32_t> tokens, int64_t first_pos);
  // Adopts cached blocks that hold a prefix of `tokens`: returns the
  // positions now held (a multiple of block_pos), 0 when none. The table must be empty.
  int64_t adopt_cached_prefix(uint64_t seed, std::span<const int32_t> tokens);
  // Appends one block for the positions after the table's last one: the
  // resident block keyed `key` when there is one (shared, no copy: key 0
  // never matches), else a fresh block filled by `fill(block memory)` and
  // keyed `key`. Used to restore a saved sequence (session_store).
  // kOutOfMemory when no block is free; kOutOfRange past n_ctx.
  Status append_block(uint64_t key, const std::function<Status(uint8_t*)>& fill);

  // Content key of the block ending at `end` given the previous block's key.
  static uint64_t chain_key(uint64_t prev, std::span<const int32_t> block_tokens);

 private:
  KvBlockPool& pool_;
  std::vector<int32_t> ids_;
  int64_t max_blocks_;
};

}  // namespace laya
