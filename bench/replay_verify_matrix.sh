#!/usr/bin/env bash
# Issue 10's correctness matrix: `laya replay --fast --verify` (every suggestion compared
# with a fresh session's, computed from scratch) over every public typing trace, with
# healing on and off and fill-in-the-middle on (PSM) and off, on the default model and the
# fixture reference models (Hugging Face folders and GGUF files). Prints one line per run
# and a total; exit 1 when any run has a mismatch or fails.
#
#   bench/replay_verify_matrix.sh [--quick]      (--quick: the default model only)
#   env: LAYA=build/laya  FIXTURES=../shared/fixtures  THREADS=2  OUT=dir (keeps the JSON)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LAYA="${LAYA:-$ROOT/build/laya}"
FIX="${FIXTURES:-$ROOT/../shared/fixtures}"
THREADS="${THREADS:-2}"
OUT="${OUT:-$(mktemp -d)}"
[ -d "$FIX/traces" ] || { echo "replay_verify_matrix: no fixtures at $FIX (set FIXTURES)" >&2; exit 2; }
mkdir -p "$OUT"
TRACES=("$FIX"/traces/*.jsonl "$FIX"/traces/long/*.jsonl)
MODELS=("$ROOT/models/laya-default-q8_0.gguf")
if [ "${1:-}" != "--quick" ]; then
  MODELS+=("$FIX/ref-models/llama-tiny/gguf/llama-tiny-q8_0.gguf" "$FIX/ref-models/qwen2-tiny/hf"
           "$FIX/ref-models/qwen3-tiny/gguf/qwen3-tiny-Q4_K_M.gguf" "$FIX/ref-models/qwen3-tiny/hf")
fi
total=0; bad=0
for m in "${MODELS[@]}"; do
  for heal in on off; do
    for fim in psm off; do
      args=(replay --fast --verify -t "$THREADS" -m "$m" --fim "$fim")
      [ "$heal" = off ] && args+=(--no-heal)
      name="$(basename "$(dirname "$m")")_$(basename "$m")_heal-${heal}_fim-${fim}"
      json="$OUT/$name.json"
      start=$(date +%s)
      if "$LAYA" "${args[@]}" --json "$json" "${TRACES[@]}" > "$OUT/$name.log" 2>&1; then
        read -r ev mm < <(python3 -c 'import json,sys; o=json.load(open(sys.argv[1]))["overall"]; print(o["events"], o["mismatches"])' "$json")
      else
        ev="?"; mm="failed (see $OUT/$name.log)"
      fi
      printf '%-60s events %6s  mismatches %s  (%d s)\n' "$name" "$ev" "$mm" $(( $(date +%s) - start ))
      total=$((total + 1)); [ "$mm" = 0 ] || bad=$((bad + 1))
    done
  done
done
echo "replay_verify_matrix: $total runs, $bad with mismatches or errors (results in $OUT)"
[ "$bad" = 0 ]
