#!/usr/bin/env bash
# Build laya_tests with AddressSanitizer + UndefinedBehaviorSanitizer
# (-DLAYA_SANITIZE=ON, clang where installed, else the default compiler) in a separate build
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
# clang (scripts/deps.sh installs it for the fuzzers): its ASan+UBSan objects
# cost ~30 % fewer CPU-seconds than gcc 12's (tokenizer/load_hf.cpp 18.8 ->
# 13.3 s). SAN_CXX=g++ SAN_CC=gcc builds with gcc as before.
SAN_CXX="${SAN_CXX:-$(command -v clang++ || echo c++)}"
SAN_CC="${SAN_CC:-$(command -v clang || echo cc)}"
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g1" -DCMAKE_C_FLAGS="-O1 -g1" \
  -DCMAKE_CXX_COMPILER="$SAN_CXX" -DCMAKE_C_COMPILER="$SAN_CC" \
  -DLAYA_SANITIZE=ON -DLAYA_BUILD_TESTS=ON -DLAYA_BUILD_BENCH=OFF >/dev/null
ninja -C "$BUILD_DIR" -j "$JOBS" laya_tests
# The build's share of this script's time (scripts/test.sh prints the phase's).
times_file="$(mktemp)"
times >"$times_file"
echo "sanitizer build done after ${SECONDS}s, $(awk 'NR == 2 { split($1, u, "m"); split($2, s, "m");
  printf "%.0f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$times_file") CPU-s"
rm -f "$times_file"

# Any sanitizer report aborts the test binary (non-zero exit).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# Two processes, one a core, split by what their tests load: the engine-bound
# tests (the default model, sessions, KV) and the text-bound ones (tokenizer
# files, parsers). Each keeps its loaded tokenizers for all its tests: with
# GoogleTest's round-robin shards every shard loaded them again (8 shards:
# ~430 CPU-s, the two groups ~300), and two round-robin shards took 293 and
# 182 s. EngineKv (~40 s) goes with the text tests to even the two out (190 and
# 112 s with it on the engine side). The engine side is two processes (the
# sessions; the scheduler, C API, session parts, kernels and pools), so the
# three run as 2 cores allow and the last to end is not one 190 s process
# beside an idle core. SAN_GROUPS=0 runs the whole filter in one process.
ENGINE_TESTS_A="Session*"
ENGINE_TESTS_B="SuggestScheduler*:CApi*:Reuse*:Generator*:KernelAttention*:KvBlockPool*:ThreadPool*:ThreadLimits*"
ENGINE_TESTS="$ENGINE_TESTS_A:$ENGINE_TESTS_B"
positive="${FILTER%%-*}"
negative=""
if [[ "$FILTER" == *-* ]]; then negative="${FILTER#*-}"; fi
if [ "${SAN_GROUPS:-1}" = 0 ]; then
  filters=("$FILTER")
else
  filters=("$ENGINE_TESTS_A-$negative" "$ENGINE_TESTS_B-$negative" "$positive-$negative${negative:+:}$ENGINE_TESTS")
fi
status=0
pids=()
for i in "${!filters[@]}"; do
  "$BUILD_DIR/tests/laya_tests" --gtest_filter="${filters[$i]}" --gtest_brief=1 >"$BUILD_DIR/group_$i.log" 2>&1 &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  rc=0
  wait "${pids[$i]}" || rc=$?
  echo "group $i: exit $rc, $(grep -E '^\[  (PASSED|FAILED)  \]|tests? from .* ran' "$BUILD_DIR/group_$i.log" | tr '\n' ' ')"
  if [ $rc -ne 0 ]; then
    status=1
    grep -E "FAILED|ERROR|Sanitizer|runtime error" -A20 "$BUILD_DIR/group_$i.log" | head -80
  fi
done
exit $status
