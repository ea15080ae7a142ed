#!/usr/bin/env bash
# The NEON kernels (src/backend/cpu/arm) tested on an x86 machine: the kernel
# tables and their tests (tests/kernels_test.cpp, tests/softcap_kernel_test.cpp:
# every table against the scalar reference), and attention as AArch64
# dispatches it (tests/attention_test.cpp: there is no NEON attention kernel,
# so the scalar reference, soft-capping included), cross-compiled for AArch64 with GoogleTest's sources and
# run under qemu-user. Not part of CI (a cross toolchain, ~1 min of 2 cores);
# run it after changing a NEON kernel:
#   apt-get install g++-aarch64-linux-gnu qemu-user   # once (libgtest-dev brings /usr/src/googletest)
#   tools/ci/neon_qemu.sh [gtest arguments]
# Exits 77 (skipped) where the toolchain or qemu is missing. Objects go to
# $BUILD_DIR (build-neon); GoogleTest is compiled once there.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${BUILD_DIR:-$ROOT/build-neon}"
CXX="${CXX_AARCH64:-aarch64-linux-gnu-g++}"
GTEST=/usr/src/googletest/googletest
for tool in "$CXX" qemu-aarch64; do
  command -v "$tool" >/dev/null || { echo "SKIP: no $tool (apt-get install g++-aarch64-linux-gnu qemu-user)"; exit 77; }
done
[ -d "$GTEST/src" ] || { echo "SKIP: no GoogleTest sources at $GTEST (libgtest-dev)"; exit 77; }
cd "$ROOT"
mkdir -p "$OUT"
# What the tests link: the kernel tables (scalar reference and NEON), the
# attention kernels and the type table, built as CMake builds the backend for
# AArch64; and GoogleTest. A ninja file, so a second run compiles only what changed.
SOURCES=(src/core/dtype.cpp src/backend/cpu/kernels.cpp src/backend/cpu/ref/*.cpp src/backend/cpu/arm/*.cpp
         src/backend/cpu/attention.cpp
         tests/kernels_test.cpp tests/softcap_kernel_test.cpp tests/attention_test.cpp)
{
  echo "cxx = $CXX"
  echo "flags = -std=c++20 -O2 -Wall -Wextra -Werror -DLAYA_HAVE_ARM=1 -I$ROOT/src -I$GTEST/include"
  echo "rule cc"
  echo "  command = \$cxx \$flags -MMD -MF \$out.d -c \$in -o \$out"
  echo "  depfile = \$out.d"
  echo "  deps = gcc"
  echo "rule gtest"
  echo "  command = \$cxx -std=c++20 -O1 -I$GTEST/include -I$GTEST -c \$in -o \$out"
  echo "rule link"
  echo "  command = \$cxx -static -o \$out \$in -lpthread"
  objs=""
  for s in "${SOURCES[@]}"; do
    o="obj/${s//\//_}.o"
    echo "build $o: cc $ROOT/$s"
    objs="$objs $o"
  done
  echo "build obj/gtest-all.o: gtest $GTEST/src/gtest-all.cc"
  echo "build obj/gtest_main.o: gtest $GTEST/src/gtest_main.cc"
  echo "build neon_kernel_tests: link$objs obj/gtest-all.o obj/gtest_main.o"
} > "$OUT/build.ninja"
# Two jobs: CI's and the developers' machines have 2 cores.
ninja -C "$OUT" -j 2
qemu-aarch64 "$OUT/neon_kernel_tests" "$@"
