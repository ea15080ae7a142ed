#!/usr/bin/env bash
# The test command (README, CI): build, run every test with ctest, then the
# ASan+UBSan build of the parser, tokenizer, session and C API tests, then a
# short fuzz run; the CUDA sources compiled with nvcc (where installed) and the
# fuzz targets' build run in the background from the tests on.
#   FUZZ_SECONDS=15 (per target, 7 targets: the CI budget is 30 min on 2 cores)
#   SKIP_SANITIZE=1 SKIP_CUDA=1 SKIP_FUZZ=1 to shorten.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Each phase's end: the wall time, and the CPU-seconds (user+sys) of all the
# script has run so far. On CI's 2 cores a parallel phase takes about half its
# CPU-seconds in wall time, a serial one about all of them; wall times alone
# swing with the machine's load.
TIMES_FILE="$(mktemp)"
# Background jobs (below) run in process groups of their own: a failure ends
# them with their compilers.
background=()
cleanup() {
  rm -f "$TIMES_FILE"
  for pid in "${background[@]}"; do kill -- -"$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
phase_done() {
  times >"$TIMES_FILE"  # this shell's children (called here, not in a subshell)
  echo "== $1 done after ${SECONDS}s, $(awk 'NR == 2 { split($1, u, "m"); split($2, s, "m");
    printf "%.0f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$TIMES_FILE") CPU-s"
}
"$ROOT/scripts/build.sh"
phase_done build
# The CUDA compile check (nvcc) and the fuzzers' build start now, at nice 19,
# and take the cores the tests leave idle: ctest's parallel run used ~270 of
# the ~450 core-seconds of its ~224 s on CI's 2 cores (servers, browsers,
# terminals and clients waiting on each other). Both were ~160 s of CI's wall
# time after the sanitizer tests; now the fuzzers only run there.
cuda_pid=""
if [ -z "${SKIP_CUDA:-}" ]; then
  echo "== CUDA backend sources compiled with nvcc (where installed; no GPU needed), in the background"
  setsid nice -n 19 "$ROOT/tools/ci/cuda_compile.sh" >"$ROOT/build/cuda_compile.log" 2>&1 &
  cuda_pid=$!
  background+=("$cuda_pid")
fi
fuzz_build_pid=""
if [ -z "${SKIP_FUZZ:-}" ]; then
  echo "== libFuzzer targets built in the background"
  FUZZ_BUILD_ONLY=1 setsid nice -n 19 "$ROOT/tools/ci/fuzz.sh" >"$ROOT/build/fuzz_build.log" 2>&1 &
  fuzz_build_pid=$!
  background+=("$fuzz_build_pid")
fi
# The tests that run the engine on 2 threads for minutes run alone: next to
# another test, 3+ busy threads on 2 cores make every barrier of the forward
# pass wait for a descheduled worker (measured on the CI machine: the session
# allocation test took 495 s in parallel, 20 s alone).
SERIAL='^(SessionIncremental|SessionAlloc|isa_[a-z0-9]+\.engine_correctness)'
ctest --test-dir "$ROOT/build" --output-on-failure -j "${JOBS:-$(nproc)}" -E "$SERIAL"
ctest --test-dir "$ROOT/build" --output-on-failure -j 1 -R "$SERIAL"
phase_done ctest
if [ -z "${SKIP_SANITIZE:-}" ]; then
  echo "== ASan+UBSan: parser and tokenizer tests"
  "$ROOT/tools/ci/sanitize.sh"
  phase_done "sanitizer tests"
fi
if [ -z "${SKIP_FUZZ:-}" ]; then
  if ! wait "$fuzz_build_pid"; then
    cat "$ROOT/build/fuzz_build.log" >&2
    echo "fuzz targets' build FAILED" >&2
    exit 1
  fi
  echo "== libFuzzer: GGUF and safetensors readers, tokenizer.json loading, CLI numbers, traces"
  FUZZ_SECONDS="${FUZZ_SECONDS:-15}" "$ROOT/tools/ci/fuzz.sh"
  phase_done fuzzers
fi
if [ -n "$cuda_pid" ]; then
  if ! wait "$cuda_pid"; then
    cat "$ROOT/build/cuda_compile.log" >&2
    echo "CUDA compile FAILED" >&2
    exit 1
  fi
  tail -n 1 "$ROOT/build/cuda_compile.log"
  phase_done "CUDA compile"
fi
echo "all tests passed (${SECONDS}s)"
phase_done all
