// ISA detection and kernel table dispatch.
#include "backend/cpu/kernels.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(LAYA_HAVE_X86) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#endif

namespace laya::cpu {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kNeon: return "neon";
  }
  return "unknown";
}

bool parse_isa(std::string_view name, Isa* out) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    if (name == isa_name(isa)) {
      *out = isa;
      return true;
    }
  }
  return false;
}

#if defined(LAYA_HAVE_X86) && (defined(__x86_64__) || defined(__i386__))
namespace {
// F16C straight from CPUID (leaf 1, ECX bit 29): some clang versions do not know
// "f16c" in __builtin_cpu_supports. The AVX check there covers OS support.
bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  return (c & (1u << 29)) != 0;
}
}  // namespace
#endif

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
#if defined(LAYA_HAVE_X86) && (defined(__x86_64__) || defined(__i386__))
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
#else
      return false;
#endif
    case Isa::kAvx512:
#if defined(LAYA_HAVE_X86) && (defined(__x86_64__) || defined(__i386__))
      return isa_supported(Isa::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq");
#else
      return false;
#endif
    case Isa::kNeon:
#if defined(LAYA_HAVE_ARM) && defined(__aarch64__)
      return true;
#else
      return false;
#endif
  }
  return false;
}

namespace {

Isa best_isa() {
  if (isa_supported(Isa::kAvx512)) return Isa::kAvx512;
  if (isa_supported(Isa::kAvx2)) return Isa::kAvx2;
  if (isa_supported(Isa::kNeon)) return Isa::kNeon;
  return Isa::kScalar;
}

Isa compute_active_isa() {
  const Isa best = best_isa();
  const char* env = std::getenv("LAYA_ISA");
  if (env == nullptr || *env == '\0') return best;
  Isa want;
  if (!parse_isa(env, &want)) {
    std::fprintf(stderr, "laya: warning: unknown LAYA_ISA=%s, using %s\n", env, isa_name(best));
    return best;
  }
  if (!isa_supported(want)) {
    std::fprintf(stderr, "laya: warning: LAYA_ISA=%s is not supported here, using %s\n", env,
                 isa_name(best));
    return best;
  }
  // A supported ISA is never above the best one, so the variable can only lower the choice.
  return want;
}

KernelTable make_scalar() {
  KernelTable t;
  std::memset(&t, 0, sizeof(t));
  fill_scalar_table(t);
  t.isa = Isa::kScalar;
  return t;
}

const KernelTable& scalar_table() {
  static const KernelTable t = make_scalar();
  return t;
}

#if defined(LAYA_HAVE_X86)
const KernelTable& avx2_table() {
  static const KernelTable t = [] {
    KernelTable k = scalar_table();
    fill_avx2_table(k);
    k.isa = Isa::kAvx2;
    return k;
  }();
  return t;
}
const KernelTable& avx512_table() {
  static const KernelTable t = [] {
    KernelTable k = scalar_table();
    fill_avx512_table(k);
    k.isa = Isa::kAvx512;
    return k;
  }();
  return t;
}
#endif

#if defined(LAYA_HAVE_ARM)
const KernelTable& neon_table() {
  static const KernelTable t = [] {
    KernelTable k = scalar_table();
    fill_neon_table(k);
    k.isa = Isa::kNeon;
    return k;
  }();
  return t;
}
#endif

}  // namespace

Isa active_isa() {
  static const Isa isa = compute_active_isa();
  return isa;
}

const KernelTable* kernels_for(Isa isa) {
  if (!isa_supported(isa)) return nullptr;
  switch (isa) {
    case Isa::kScalar: return &scalar_table();
#if defined(LAYA_HAVE_X86)
    case Isa::kAvx2: return &avx2_table();
    case Isa::kAvx512: return &avx512_table();
#endif
#if defined(LAYA_HAVE_ARM)
    case Isa::kNeon: return &neon_table();
#endif
    default: return nullptr;
  }
}

const KernelTable& kernels() {
  static const KernelTable* t = [] {
    const KernelTable* k = kernels_for(active_isa());
    return k != nullptr ? k : &scalar_table();
  }();
  return *t;
}

}  // namespace laya::cpu
