// Giving freed heap memory back to the OS.
#pragma once

#include <cstddef>

namespace laya {

// A request or frame at least this large is followed by heap_give_back():
// parsing it allocated (and freed) a multiple of its size.
constexpr size_t kGiveBackAfterBytes = size_t{1} << 20;

// glibc keeps what a thread frees in that thread's arena for reuse, so a
// large parse on each of 128 HTTP threads left 128 arenas full (issue 29:
// 12 nested 8 MB bodies took RSS from 439 MB to 6.66 GB). malloc_trim(0)
// returns the free pages of every arena to the OS; it costs a walk over the
// free lists (measured 0.1-1 ms after an 8 MB body), so it runs after large
// inputs only. No-op where the C library is not glibc.
void heap_give_back();

// Blocks of at least 1 MiB are mapped on their own and unmapped when freed
// (glibc's M_MMAP_THRESHOLD, fixed). glibc's default threshold grows to the
// size of the largest block freed (up to 32 MiB) and its trim threshold to
// twice that, and malloc_trim does not shrink the top of a thread's arena:
// after an 8 MiB request body each HTTP thread kept ~8 MB (measured: RSS 61
// -> 229 MB over 20 large requests, heap_give_back after each). A server's
// requests and frames allocate blocks that large only for large inputs, where
// the mapping's cost (~0.1 ms per MiB of page faults) is small beside reading
// and parsing them. Called once by `laya serve` and `laya lsp`.
void heap_return_large_blocks();

}  // namespace laya
