#include "core/heap.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace laya {

void heap_give_back() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

void heap_return_large_blocks() {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  mallopt(M_TRIM_THRESHOLD, 4 << 20);
#endif
}

}  // namespace laya
