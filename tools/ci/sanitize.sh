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
# Three processes on the 2 cores, split by what their tests load (each keeps
# the tokenizers it loaded for all its tests: GoogleTest's round-robin shards
# loaded them again in every shard, 8 shards ~430 CPU-s). Measured with clang,
# CPU-s: the engine-bound tests (the default model, sessions, KV) 21, EngineKv
# 7; the special-text tokenizer suites 33 (HfVectorsWithoutSpecialParsing was
# 41 % of the text side); the other text tests (tokenizer files, parsers) 50.
# Engine and text alone (21+7 and 77 CPU-s) left the text process running
# ~50 s beside an idle core; three end within ~55 s of 2 cores (the special
# suites load ~13 CPU-s of tokenizers a second time, the price of the split).
# SAN_GROUPS=0 runs the whole filter in one process.
ENGINE_TESTS="Session*:SuggestScheduler*:CApi*:Reuse*:Generator*:KernelAttention*:KvBlockPool*:ThreadPool*:ThreadLimits*:EngineKv*"
SPECIAL_TESTS="*TokenizerSpecialText*"
positive="${FILTER%%-*}"
negative=""
if [[ "$FILTER" == *-* ]]; then negative="${FILTER#*-}"; fi
if [ "${SAN_GROUPS:-1}" = 0 ]; then
  filters=("$FILTER")
else
  filters=("$ENGINE_TESTS-$negative" "$positive-$negative${negative:+:}$ENGINE_TESTS:$SPECIAL_TESTS"
    "$SPECIAL_TESTS-$negative${negative:+:}$ENGINE_TESTS")
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
