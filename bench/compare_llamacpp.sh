#!/usr/bin/env bash
# Side-by-side decode/prefill speed of laya and llama.cpp on the same files and
# thread counts, alternating A B A B so drift hits both. Fetches nothing.
#
#   bench/compare_llamacpp.sh LLAMA_CPP_BUILD_DIR MODEL.gguf [MODEL.gguf ...]
#   env: THREADS="1 2" ROUNDS=5 PROMPT=512 GEN=128 LAYA=build/laya
#        MEMBW=build/bench/laya_bench (set MEMBW= to skip the bandwidth probe)
#
# LLAMA_CPP_BUILD_DIR holds bin/llama-bench (a CPU build made outside this
# repo). Prints one line per round with both speeds and the ratio, then the
# median ratio per model/threads, as a Markdown table ready for
# docs/PERFORMANCE.md. Before each round the machine's read bandwidth for the
# round's thread count is probed (MemoryRead), because a shared VM's
# bandwidth moves between runs: laya's effective GB/s is reported against the
# bandwidth measured in the same rounds.
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,12p' "$0" >&2
  exit 2
fi
LCPP="$1"; shift
BENCH="$LCPP/bin/llama-bench"
[ -x "$BENCH" ] || { echo "compare: $BENCH not found or not executable" >&2; exit 2; }
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LAYA="${LAYA:-$ROOT/build/laya}"
THREADS="${THREADS:-1 2}"
ROUNDS="${ROUNDS:-5}"
PROMPT="${PROMPT:-512}"
GEN="${GEN:-128}"
MEMBW="${MEMBW-$ROOT/build/bench/laya_bench}"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

for model in "$@"; do
  for t in $THREADS; do
    for r in $(seq 1 "$ROUNDS"); do
      bw=0
      if [ -n "$MEMBW" ] && [ -x "$MEMBW" ]; then
        bw=$("$MEMBW" --benchmark_filter="MemoryRead/.*threads:$t\$" --benchmark_format=json 2>/dev/null |
          python3 -c 'import json,sys; print(json.load(sys.stdin)["benchmarks"][0]["bytes_per_second"]/1e9)' 2>/dev/null || echo 0)
      fi
      /usr/bin/time -f "%M" -o "$OUT/l.rss" "$BENCH" -m "$model" -t "$t" -p "$PROMPT" -n "$GEN" -r 1 -o json \
        > "$OUT/l.json" 2>/dev/null
      "$LAYA" bench -m "$model" -t "$t" --prompt "$PROMPT" --gen "$GEN" --json > "$OUT/y.json"
      python3 - "$model" "$t" "$r" "$OUT/l.json" "$OUT/y.json" "$OUT/l.rss" "$bw" >> "$OUT/rounds.tsv" <<'PY'
import json, sys, os
model, t, r, lp, yp, rp, bw = sys.argv[1:]
lrss = float(open(rp).read().split()[-1]) / 1024.0
l = json.load(open(lp)); y = json.load(open(yp))
pp = next(e["avg_ts"] for e in l if e["n_prompt"] > 0 and e["n_gen"] == 0)
tg = next(e["avg_ts"] for e in l if e["n_gen"] > 0 and e["n_prompt"] == 0)
print("\t".join(map(str, [os.path.basename(model), t, r, pp, y["prefill_tok_s"], tg, y["decode_tok_s"],
                          y["decode_ms_p50"], y["decode_ms_p99"], y["decode_gb_s"], y["peak_rss_mb"], lrss, bw])))
PY
      tail -1 "$OUT/rounds.tsv" | awk -F'\t' '{printf "%s t=%s round %s: prefill llama.cpp %.1f laya %.1f (x%.2f) | decode llama.cpp %.1f laya %.1f (x%.2f) tok/s | laya %.1f GB/s, machine %.1f GB/s\n", $1,$2,$3,$4,$5,$5/$4,$6,$7,$7/$6,$10,$13}'
    done
  done
done

python3 - "$OUT/rounds.tsv" <<'PY'
import sys, statistics as st
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
groups = {}
for r in rows:
    groups.setdefault((r[0], r[1]), []).append(r)
print()
print("| model | threads | prefill llama.cpp | prefill laya | ratio | decode llama.cpp | decode laya | ratio | laya p50 / p99 ms | laya GB/s (machine GB/s, same rounds) | RSS MB llama.cpp / laya |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for (m, t), g in groups.items():
    f = lambda i: [float(x[i]) for x in g]
    pr = st.median([b / a for a, b in zip(f(3), f(4))]); dr = st.median([b / a for a, b in zip(f(5), f(6))])
    print(f"| {m} | {t} | {st.median(f(3)):.1f} | {st.median(f(4)):.1f} | {pr:.2f} | {st.median(f(5)):.1f} | "
          f"{st.median(f(6)):.1f} | {dr:.2f} | {st.median(f(7)):.3f} / {st.median(f(8)):.3f} | {st.median(f(9)):.1f} ({st.median(f(12)):.1f}) | {st.median(f(11)):.0f} / {st.median(f(10)):.0f} |")
PY
