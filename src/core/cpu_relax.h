// One iteration of a spin-wait: tells the core this thread is waiting (x86
// `pause`, Arm `yield`), so a spinning thread leaves the pipeline and power
// to its sibling and leaves the loop without a memory-order mis-speculation.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace laya {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

}  // namespace laya
