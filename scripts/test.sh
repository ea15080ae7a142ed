#!/usr/bin/env bash
# The test command (README, CI): build, run every test with ctest, then the
# ASan+UBSan build of the parser and tokenizer tests, then a short fuzz run.
#   FUZZ_SECONDS=15 (per target, 6 targets: the CI budget is 30 min on 2 cores) SKIP_SANITIZE=1 SKIP_FUZZ=1 to shorten.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/build.sh"
ctest --test-dir "$ROOT/build" --output-on-failure -j "${JOBS:-$(nproc)}"
if [ -z "${SKIP_SANITIZE:-}" ]; then
  echo "== ASan+UBSan: parser and tokenizer tests"
  "$ROOT/tools/ci/sanitize.sh"
fi
if [ -z "${SKIP_FUZZ:-}" ]; then
  echo "== libFuzzer: GGUF and safetensors readers, tokenizer.json loading, CLI numbers, traces"
  FUZZ_SECONDS="${FUZZ_SECONDS:-15}" "$ROOT/tools/ci/fuzz.sh"
fi
echo "all tests passed"
