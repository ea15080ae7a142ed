// Keeping the pages a decode step touches in RAM (mlock), so no keystroke
// waits for a page to come back from disk or swap.
#pragma once

#include <cstddef>

#include "core/status.h"

namespace laya {

// Locks the pages spanning [p, p + n). `what` names the memory in the error,
// which says what the OS refused and how to allow it (RLIMIT_MEMLOCK).
Status lock_pages(const void* p, size_t n, const char* what);

// Bytes of this process locked now (VmLck), -1 where unknown.
long long locked_bytes();

}  // namespace laya
