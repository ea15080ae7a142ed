#!/usr/bin/env bash
# Are two laya builds' outputs identical, bit for bit? For every reference
# model of the fixtures (GGUF files and HF folders) and the shipped default
# model: the logits of a 300-token sequence at every position (one prefill of
# two batch chunks), 40 tokens fed one by one (decode), the same in --precise
# mode, and a 48-token greedy completion.
# Used to show a refactor changed no number (issue 9).
#
#   bench/ab_outputs.sh OLD_LAYA NEW_LAYA [FIXTURES_DIR]
#
# Exits non-zero on the first difference, naming the model and the mode.
set -euo pipefail
if [ $# -lt 2 ]; then sed -n '2,10p' "$0" >&2; exit 2; fi
OLD="$1"; NEW="$2"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FX="${3:-$ROOT/../shared/fixtures}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

models=("$ROOT/models/laya-default-q8_0.gguf")
if [ -d "$FX/ref-models" ]; then
  for f in "$FX"/ref-models/*/gguf/*.gguf "$FX"/ref-models/*/hf; do models+=("$f"); done
else
  echo "ab_outputs: $FX/ref-models not found: checking the default model only" >&2
fi
# 300 ids below every model's vocabulary (the tiny models have 512).
ids=$(python3 -c "print(','.join(str((i * 37 + 11) % 509) for i in range(300)))")
ids_short=$(python3 -c "print(','.join(str((i * 37 + 11) % 509) for i in range(40)))")

n=0
for m in "${models[@]}"; do
  for mode in "--all-positions" "--all-positions --incremental" "--all-positions --precise"; do
    toks="$ids"
    [[ "$mode" == *incremental* ]] && toks="$ids_short"
    for side in old new; do
      bin="$OLD"; [ "$side" = new ] && bin="$NEW"
      # shellcheck disable=SC2086
      "$bin" logits -m "$m" --tokens "$toks" $mode -t 2 --no-mlock -o "$TMP/$side.npy" >/dev/null 2>"$TMP/$side.err" || {
        echo "ab_outputs: $side failed on $m ($mode): $(cat "$TMP/$side.err")" >&2; exit 1; }
    done
    if ! cmp -s "$TMP/old.npy" "$TMP/new.npy"; then
      echo "DIFFERENT: $m logits $mode" >&2; exit 1
    fi
    n=$((n + 1))
  done
  for side in old new; do
    bin="$OLD"; [ "$side" = new ] && bin="$NEW"
    "$bin" complete -m "$m" -p "def fibonacci(n):" -n 48 -t 2 --no-mlock >"$TMP/$side.txt" 2>/dev/null || true
  done
  if ! cmp -s "$TMP/old.txt" "$TMP/new.txt"; then echo "DIFFERENT: $m greedy completion" >&2; exit 1; fi
  n=$((n + 1))
done
echo "ab_outputs: ${#models[@]} models, $n comparisons, all identical bit for bit"
