#!/usr/bin/env bash
# Build the libFuzzer targets with clang (ASan + UBSan) and run each for
# $FUZZ_SECONDS seconds (default 60) from the seed corpus in fuzz/corpus/.
# Exits non-zero when a fuzzer finds a crash, leak, timeout or sanitizer
# report; the reproducer is left in $BUILD_DIR/fuzz-artifacts/.
#
#   tools/ci/fuzz.sh                      # 60 s per target
#   FUZZ_SECONDS=600 tools/ci/fuzz.sh     # longer run
#   BUILD_DIR=/tmp/bf tools/ci/fuzz.sh    # other build directory
#   FUZZ_TARGETS="trace cli_numbers" tools/ci/fuzz.sh   # some targets only
#   FUZZ_BUILD_ONLY=1 tools/ci/fuzz.sh    # build the targets, run none
# Reproduce a crash: $BUILD_DIR/fuzz/gguf_fuzz $BUILD_DIR/fuzz-artifacts/crash-...
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-fuzz}"
FUZZ_SECONDS="${FUZZ_SECONDS:-60}"
CXX_FUZZ="${CXX_FUZZ:-clang++}"
CC_FUZZ="${CC_FUZZ:-clang}"
JOBS="${JOBS:-$(nproc)}"

# -O1 with line tables, as libFuzzer's docs build: the Release build's -O3
# made the instrumented parsers CI's slowest objects (load_hf.cpp 62 s,
# 525 CPU-s for 7 targets on 2 cores), and a 15 s run does not need its speed.
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=None \
  -DCMAKE_CXX_FLAGS="-O1 -gline-tables-only" -DCMAKE_C_FLAGS="-O1 -gline-tables-only" \
  -DCMAKE_CXX_COMPILER="$CXX_FUZZ" -DCMAKE_C_COMPILER="$CC_FUZZ" \
  -DLAYA_FUZZ=ON -DLAYA_BUILD_TESTS=OFF -DLAYA_BUILD_BENCH=OFF >/dev/null
ninja -C "$BUILD_DIR" -j "$JOBS" gguf_fuzz safetensors_fuzz tokenizer_json_fuzz cli_numbers_fuzz trace_fuzz server_request_fuzz lsp_frame_fuzz
# FUZZ_BUILD_ONLY=1: the targets only (scripts/test.sh builds them beside the tests).
if [ -n "${FUZZ_BUILD_ONLY:-}" ]; then exit 0; fi

ART="$BUILD_DIR/fuzz-artifacts"
mkdir -p "$ART"
# One target a core at a time: each is single-threaded (CI's 2 cores run two).
run_one() {
  local target="$1"
  # New inputs go to a scratch corpus; the committed seeds are read only.
  local work="$BUILD_DIR/fuzz-corpus/$target"
  mkdir -p "$work"
  # A dictionary where the target has one (fuzz/<target>.dict): the JSON
  # depth and size shapes and the framing's lengths (issue 29).
  local dict=()
  [ -f "$ROOT/fuzz/${target}.dict" ] && dict=(-dict="$ROOT/fuzz/${target}.dict")
  if ! "$BUILD_DIR/fuzz/${target}_fuzz" "${dict[@]}" \
      -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
      -print_final_stats=1 -artifact_prefix="$ART/${target}-" \
      "$work" "$ROOT/fuzz/corpus/$target" 2>"$BUILD_DIR/${target}_fuzz.log"; then
    echo "!! ${target}_fuzz FAILED; log: $BUILD_DIR/${target}_fuzz.log; artifacts:" >&2
    ls -l "$ART" | grep "${target}-" >&2 || true
    tail -40 "$BUILD_DIR/${target}_fuzz.log" >&2
    return 1
  fi
  echo "== ${target}_fuzz, ${FUZZ_SECONDS}s:" $(grep -E '^(stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb)' \
    "$BUILD_DIR/${target}_fuzz.log" | tr '\n' ' ')
}
status=0
pids=()
for target in ${FUZZ_TARGETS:-gguf safetensors tokenizer_json cli_numbers trace server_request lsp_frame}; do
  run_one "$target" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$JOBS" ]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
