#!/usr/bin/env bash
# Build laya_tests with AddressSanitizer + UndefinedBehaviorSanitizer
# (-DLAYA_SANITIZE=ON, the default compiler: gcc is fine) in a separate build
# directory and run the file-format, tokenizer, KV pool, attention, session, scheduler and
# C API (misuse), CLI number / trace parser tests under it (not the fixture-trace replay: ~8 min under ASan
# on 2 cores).
#
#   tools/ci/sanitize.sh
#   BUILD_DIR=/tmp/asan FILTER='Gguf*' tools/ci/sanitize.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-asan}"
FILTER="${FILTER:-Gguf*:Safetensors*:Tokenizer*:ModelMetadata*:HfMetadata*:KvBlockPool*:EngineKv*:KernelAttention*:Session*:SuggestScheduler*:CApi*:ThreadLimits*:ThreadPool*:Document*:PromptPlan*:Reuse*:Generator*:StopStream*:CliParse*:JsonAccessor*:TraceParse*:-SessionIncremental.FixtureTracesEqualFromScratch:SessionIncremental.SyntheticTypingEqualsFromScratchWithEveryOption}"
JOBS="${JOBS:-$(nproc)}"

# -O1 -g1: line tables are all a sanitizer report needs, and this build's
# compile time is CI's largest cost (RelWithDebInfo's -O2 -g: ~3x the
# Release build's CPU time); the test files are built at -O0 (tests/CMakeLists.txt).
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g1" -DCMAKE_C_FLAGS="-O1 -g1" \
  -DLAYA_SANITIZE=ON -DLAYA_BUILD_TESTS=ON -DLAYA_BUILD_BENCH=OFF >/dev/null
ninja -C "$BUILD_DIR" -j "$JOBS" laya_tests

# Any sanitizer report aborts the test binary (non-zero exit).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# GoogleTest's shards (each test runs in exactly one), SHARDS of them run
# JOBS at a time: with one shard a core the two took 293 and 182 s (a few
# model-bound tests of 15-45 s each land where they land); smaller shards
# taken from a queue finish together.
SHARDS="${SHARDS:-8}"
run_shard() {
  GTEST_TOTAL_SHARDS="$SHARDS" GTEST_SHARD_INDEX="$1" \
    "$BUILD_DIR/tests/laya_tests" --gtest_filter="$FILTER" --gtest_brief=1 >"$BUILD_DIR/shard_$1.log" 2>&1
  local rc=$?
  echo "shard $1/$SHARDS: exit $rc, $(grep -E '^\[  (PASSED|FAILED)  \]' "$BUILD_DIR/shard_$1.log" | tr '\n' ' ')"
  if [ $rc -ne 0 ]; then grep -E "FAILED|ERROR|Sanitizer|runtime error" -A20 "$BUILD_DIR/shard_$1.log" | head -80; fi
  return $rc
}
export -f run_shard
export BUILD_DIR FILTER SHARDS
seq 0 $((SHARDS - 1)) | xargs -P "$JOBS" -I{} bash -c 'run_shard {}'
