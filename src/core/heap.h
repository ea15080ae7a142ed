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

}  // namespace laya
