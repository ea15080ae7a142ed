#!/usr/bin/env bash
# A/B of two laya builds on the same files and thread counts, alternating
# A B A B so the machine's drift hits both (used to show a refactor kept the
# speed: issue 9's "within ±5 % of the previous commit").
#
#   bench/ab_laya.sh OLD_LAYA NEW_LAYA MODEL.gguf [MODEL.gguf ...]
#   env: THREADS="1 2" ROUNDS=5 PROMPT=512 GEN=128
#
# Prints one line per round, then per model/threads the medians of prefill
# tok/s, decode tok/s and decode step p50 / p99 (ms) for each build and the
# ratio new/old, as a Markdown table.
set -euo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,11p' "$0" >&2
  exit 2
fi
OLD="$1"; NEW="$2"; shift 2
THREADS="${THREADS:-1 2}"
ROUNDS="${ROUNDS:-5}"
PROMPT="${PROMPT:-512}"
GEN="${GEN:-128}"
for b in "$OLD" "$NEW"; do [ -x "$b" ] || { echo "ab_laya: $b is not an executable" >&2; exit 2; }; done
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

for m in "$@"; do
  for t in $THREADS; do
    for r in $(seq 1 "$ROUNDS"); do
      for side in old new; do
        bin="$OLD"; [ "$side" = new ] && bin="$NEW"
        "$bin" bench -m "$m" -t "$t" --prompt "$PROMPT" --gen "$GEN" --json 2>/dev/null \
          | tail -1 >"$TMP/$(basename "$m")-t$t-r$r-$side.json"
      done
      python3 - "$TMP/$(basename "$m")-t$t-r$r" <<'EOF'
import json, sys
o = json.load(open(sys.argv[1] + "-old.json")); n = json.load(open(sys.argv[1] + "-new.json"))
print(f"{sys.argv[1].split('/')[-1]}: prefill {o['prefill_tok_s']:.1f} -> {n['prefill_tok_s']:.1f}  "
      f"decode {o['decode_tok_s']:.1f} -> {n['decode_tok_s']:.1f} tok/s  p50 {o['decode_ms_p50']:.3f} -> {n['decode_ms_p50']:.3f} ms")
EOF
    done
  done
done

python3 - "$TMP" "$THREADS" "$@" <<'EOF'
import glob, json, os, statistics, sys
tmp, threads, models = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
print("\n| model | threads | prefill old / new tok/s | ratio | decode old / new tok/s | ratio | step p50 old / new ms | p99 old / new ms |")
print("|---|---|---|---|---|---|---|---|")
for m in models:
    b = os.path.basename(m)
    for t in threads:
        med = {}
        for side in ("old", "new"):
            runs = [json.load(open(f)) for f in sorted(glob.glob(f"{tmp}/{b}-t{t}-r*-{side}.json"))]
            med[side] = {k: statistics.median(r[k] for r in runs)
                         for k in ("prefill_tok_s", "decode_tok_s", "decode_ms_p50", "decode_ms_p99")}
        o, n = med["old"], med["new"]
        print(f"| {b} | {t} | {o['prefill_tok_s']:.1f} / {n['prefill_tok_s']:.1f} | {n['prefill_tok_s'] / o['prefill_tok_s']:.3f} "
              f"| {o['decode_tok_s']:.1f} / {n['decode_tok_s']:.1f} | {n['decode_tok_s'] / o['decode_tok_s']:.3f} "
              f"| {o['decode_ms_p50']:.3f} / {n['decode_ms_p50']:.3f} | {o['decode_ms_p99']:.3f} / {n['decode_ms_p99']:.3f} |")
EOF
