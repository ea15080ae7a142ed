#!/usr/bin/env bash
# Do two laya builds make the same suggestion at every event of the typing
# traces? Both replay the traces with --fast (every event's suggestion
# completes, nothing is superseded) on the default model and write every
# suggestion (`laya replay --suggestions-out`: trace, event, text, token ids);
# the files must be equal line for line.
# Used to show a refactor of the session changed no suggestion (issue 26).
#
#   bench/ab_suggestions.sh OLD_LAYA NEW_LAYA [TRACE.jsonl...]
#
# Traces: by default every public trace, long/ included ($LAYA_FIXTURES or
# ../shared/fixtures). MODEL=path changes the model; OLD_ARGS / NEW_ARGS add
# replay options to one side (NEW_ARGS="--max-tokens 4" must be reported).
# Exits non-zero on the first difference, naming the trace and the event.
set -euo pipefail
if [ $# -lt 2 ]; then sed -n '2,15p' "$0" >&2; exit 2; fi
OLD="$1"; NEW="$2"; shift 2
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FX="${LAYA_FIXTURES:-$ROOT/../shared/fixtures}"
MODEL="${MODEL:-$ROOT/models/laya-default-q8_0.gguf}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

traces=("$@")
if [ ${#traces[@]} -eq 0 ]; then
  shopt -s nullglob
  traces=("$FX"/traces/*.jsonl "$FX"/traces/long/*.jsonl)
  shopt -u nullglob
  if [ ${#traces[@]} -eq 0 ]; then echo "ab_suggestions: no traces in $FX/traces" >&2; exit 2; fi
fi

for side in old new; do
  bin="$OLD"; extra="${OLD_ARGS:-}"
  if [ "$side" = new ]; then bin="$NEW"; extra="${NEW_ARGS:-}"; fi
  # The thread count changes no number (chunk i is computed the same by any
  # thread), --awake-ms 0 keeps idle workers off the other side's cores.
  # shellcheck disable=SC2086
  "$bin" replay --fast -m "$MODEL" -t 2 --no-mlock --awake-ms 0 -q $extra --suggestions-out "$TMP/$side.jsonl" \
    "${traces[@]}" >"$TMP/$side.out" 2>"$TMP/$side.err" || {
    echo "ab_suggestions: $side ($bin) failed: $(tail -3 "$TMP/$side.err")" >&2; exit 1; }
done

python3 - "$TMP/old.jsonl" "$TMP/new.jsonl" <<'PY'
import json, sys
old = open(sys.argv[1], encoding="utf-8").read().splitlines()
new = open(sys.argv[2], encoding="utf-8").read().splitlines()
for i in range(max(len(old), len(new))):
    a = old[i] if i < len(old) else None
    b = new[i] if i < len(new) else None
    if a == b:
        continue
    where = json.loads(a or b)
    print(f"DIFFERENT: {where['trace']} event {where['event']} (suggestion {i + 1} of the run)", file=sys.stderr)
    for side, line in (("old", a), ("new", b)):
        if line is None:
            print(f"  {side}: no more suggestions", file=sys.stderr)
        else:
            j = json.loads(line)
            print(f"  {side}: trace {j['trace']} event {j['event']}: {json.dumps(j['text'], ensure_ascii=False)} "
                  f"tokens {j['tokens']}", file=sys.stderr)
    sys.exit(1)
print(f"ab_suggestions: {len(old)} suggestions, identical (text and token ids)")
PY
