// Keeping the pages a decode step touches in RAM (mlock), so no keystroke
// waits for a page to come back from disk or swap.
#pragma once

#include <cstddef>

#include "core/status.h"

namespace laya {

// Locks the pages spanning [p, p + n). `what` names the memory in the error,
// which says what the OS refused and how to allow it (RLIMIT_MEMLOCK).
Status lock_pages(const void* p, size_t n, const char* what);

// Unlocks the pages lying wholly inside [p, p + n), before that memory is
// freed: free() does not unlock, and a locked page the allocator keeps in its
// heap can never be given back to the OS (madvise refuses locked pages), so
// every freed engine (a hot-swapped model, a failed swap) would stay resident.
// Pages shared with a neighbouring allocation stay locked.
void unlock_pages(const void* p, size_t n);

// Bytes of this process locked now (VmLck), -1 where unknown.
long long locked_bytes();

}  // namespace laya
