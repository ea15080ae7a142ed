// Giving freed heap memory back to the OS.
#pragma once

#include <cstddef>

namespace laya {

// An LSP frame at least this large is followed by heap_give_back().
constexpr size_t kGiveBackAfterBytes = size_t{1} << 20;

// malloc_trim(0): the free pages of every arena back to the OS. It locks
// each arena while it walks its free lists, so a thread that allocates
// meanwhile waits: called after each large HTTP request, it made /health
// take 88 ms in the server while twelve 8 MB bodies were read at once. The
// server relies on heap_return_large_blocks instead; `laya lsp` (one reader
// thread, nothing waiting on its arena) calls this after large frames too.
// No-op where the C library is not glibc.
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
