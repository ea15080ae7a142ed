#!/usr/bin/env bash
# The test command (README, CI): build, run every test with ctest, then the
# ASan+UBSan build of the parser, tokenizer, session and C API tests, the CUDA
# sources compiled with nvcc (where installed), then a short fuzz run.
#   FUZZ_SECONDS=15 (per target, 7 targets: the CI budget is 30 min on 2 cores)
#   SKIP_SANITIZE=1 SKIP_CUDA=1 SKIP_FUZZ=1 to shorten.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/build.sh"
echo "== build done after ${SECONDS}s"
# The tests that run the engine on 2 threads for minutes run alone: next to
# another test, 3+ busy threads on 2 cores make every barrier of the forward
# pass wait for a descheduled worker (measured on the CI machine: the session
# allocation test took 495 s in parallel, 20 s alone).
SERIAL='^(SessionIncremental|SessionAlloc|isa_[a-z0-9]+\.engine_correctness)'
ctest --test-dir "$ROOT/build" --output-on-failure -j "${JOBS:-$(nproc)}" -E "$SERIAL"
ctest --test-dir "$ROOT/build" --output-on-failure -j 1 -R "$SERIAL"
echo "== ctest done after ${SECONDS}s"
if [ -z "${SKIP_SANITIZE:-}" ]; then
  echo "== ASan+UBSan: parser and tokenizer tests"
  "$ROOT/tools/ci/sanitize.sh"
  echo "== sanitizer tests done after ${SECONDS}s"
fi
if [ -z "${SKIP_CUDA:-}" ]; then
  echo "== CUDA backend sources compiled with nvcc (where installed; no GPU needed)"
  "$ROOT/tools/ci/cuda_compile.sh"
  echo "== CUDA compile done after ${SECONDS}s"
fi
if [ -z "${SKIP_FUZZ:-}" ]; then
  echo "== libFuzzer: GGUF and safetensors readers, tokenizer.json loading, CLI numbers, traces"
  FUZZ_SECONDS="${FUZZ_SECONDS:-15}" "$ROOT/tools/ci/fuzz.sh"
fi
echo "all tests passed (${SECONDS}s)"
