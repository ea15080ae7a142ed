#!/usr/bin/env bash
# bench/families_device.sh's device run, end to end on a tiny model with llama.cpp's tools stood in
# for by tests/scripts/fake_llama.py (nothing is timed): the traces cut, the model made, laya bench
# and "llama-bench" at 2 threads and 1, the paced replay of llama-server (through
# bench/typing_vs_llamacpp.sh, pinned) and of laya, and the tables made from what they wrote.
#   tests/scripts/families_device_test.sh LAYA_BINARY
# Exit 77 (ctest's skip) when the public traces are absent ($LAYA_FIXTURES, else ../shared/fixtures).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
LAYA="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
FX="${LAYA_FIXTURES:-$ROOT/../shared/fixtures}"
[ -d "$FX/traces" ] || { echo "no typing traces at $FX/traces: skipped"; exit 77; }
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/fake"
ln -s "$ROOT/tests/scripts/fake_llama.py" "$T/fake/llama-bench"
ln -s "$ROOT/tests/scripts/fake_llama.py" "$T/fake/llama-server"
# CPU 0 for everything: the machine may have one core.
(cd "$ROOT" && OUT="$T/out" WORK="$T/work" MODELS="test-tiny-starcoder2" N_GEN=4 REPLAY_EVENTS=4 CAP=50 \
  CPUS2=0 CPU1=0 CLIENT_CPU=0 PORT=$((20000 + $$ % 20000)) LAYA="$LAYA" LLAMA_BENCH="$T/fake/llama-bench" \
  LLAMA_SERVER="$T/fake/llama-server" TRACES_DIR="$FX/traces" bash bench/families_device.sh device "$T/none" >"$T/log" 2>&1) ||
  { cat "$T/log"; exit 1; }
python3 - "$T/out" <<'PY' || { cat "$T/log"; exit 1; }
import json, os, sys
out = sys.argv[1]
for f in ("families.json", "families.md", "families.log", "raw.tar.gz"):
    assert os.path.isfile(os.path.join(out, f)), f"no {f}"
j = json.load(open(os.path.join(out, "families.json")))
assert not j["skipped"], j["skipped"]
(m,) = j["models"]
assert m["preset"] == "test-tiny-starcoder2" and m["params_m"] > 0 and m["tokenizer"] == "synthetic", m
for th in ("t2", "t1"):
    d = m["decode"][th]
    assert d["laya"] and d["laya"]["mean_ms"] > 0 and d["laya"]["steps"] == 4, d
    assert d["llama.cpp"] and d["llama.cpp"]["tokens"] == 4 and d["llama.cpp"]["build"] == "fake", d
for eng in ("laya", "llama-server"):
    r = m["replay"][eng]
    assert r and r["events"] == 8 and r["completed"] is not None and r["suggest_ms"]["p50"] is not None, (eng, r)
md = open(os.path.join(out, "families.md")).read()
assert "| test-tiny-starcoder2 | laya | " in md and "| test-tiny-starcoder2 | llama-server | " in md, md
print("families_device: 1 model, decode and replay on both sides, tables made")
PY
