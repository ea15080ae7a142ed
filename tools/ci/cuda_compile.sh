#!/usr/bin/env bash
# Compiles the CUDA backend's sources (src/backend/cuda, and the backend
# factory that names it) with nvcc where it is installed: CI's machine has
# nvcc but no GPU, so the objects are built and nothing runs
# (bench/cuda/run_on_device.sh builds and runs the CUDA tests on a GPU). Only
# those objects: a whole CUDA build would compile the CPU layers a second time.
# Without nvcc: says so and succeeds.
#
#   tools/ci/cuda_compile.sh
#   NVCC=/usr/local/cuda-13.0/bin/nvcc BUILD_DIR=/tmp/bc tools/ci/cuda_compile.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-cuda}"
JOBS="${JOBS:-$(nproc)}"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
if [ ! -x "$NVCC" ]; then
  echo "cuda_compile.sh: no nvcc ($NVCC): the CUDA sources were not compiled"
  exit 0
fi
# One architecture (the H200's) and ptxas at -O0: the check is that the
# sources compile (front end, PTX, machine code); the product build's second,
# PTX-only target (80-virtual) doubled nvcc's time, and ptxas optimising
# matmul.cu's kernels took most of the rest (~7 min of CI's 2 cores in all).
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAYA_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90a-real}" -DCMAKE_CUDA_FLAGS="${CUDA_CHECK_FLAGS:--Xcicc -O0 -Xptxas -O0}" \
  -DLAYA_BUILD_TESTS=OFF -DLAYA_BUILD_BENCH=OFF >/dev/null
mapfile -t objects < <(ninja -C "$BUILD_DIR" -t targets all |
  grep -oE '^CMakeFiles/laya_backend\.dir/src/backend/(cuda/[A-Za-z0-9_]+\.(cu|cpp)|backend_factory\.cpp)\.o' | sort -u)
if [ "${#objects[@]}" -lt 2 ]; then
  echo "cuda_compile.sh: no CUDA objects among the build's targets (is src/backend/cuda there?)" >&2
  exit 1
fi
ninja -C "$BUILD_DIR" -j "$JOBS" "${objects[@]}"
echo "cuda_compile.sh: ${#objects[@]} objects compiled with $("$NVCC" --version | tail -1)"
