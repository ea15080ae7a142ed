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

}  // namespace laya
