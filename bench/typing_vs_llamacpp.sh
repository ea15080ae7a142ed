#!/usr/bin/env bash
# Keystroke -> suggestion latency of llama.cpp's llama-server and of laya, side by side: the
# same model, threads and typing traces, in one run (issue 10, "the peer, side by side").
#
#   bench/typing_vs_llamacpp.sh [options] LLAMA_SERVER MODEL.gguf TRACE.jsonl...
#     -t, --threads N   threads for both engines (default 2; env THREADS)
#     --fast            events back to back (default: at the recorded pace, as typed)
#     --pace-cap-ms N   at the recorded pace with every pause longer than N ms cut to N (both engines)
#     --port N          llama-server's port on 127.0.0.1 (default 8090; env PORT)
#     --fim             llama-server gets /infill (llama.vim's layout) instead of /completion
#                       (laya has no fill-in-the-middle yet: then the two do different work)
#     --ctx N           context in tokens for both (default 1024, the default model's)
#     --out DIR         keep the JSON results and llama-server's log there (default: a temp dir)
#   env: LAYA=build/laya (laya's binary; this script builds nothing), PYTHON=python3,
#        LLAMA_ARGS="..." (more llama-server flags), PIN_SERVER / PIN_CLIENT / PIN_LAYA: taskset
#        CPU lists (e.g. "2,3") for llama-server, the Python client and laya replay (default: none)
#
# LLAMA_SERVER is the llama-server binary (or a llama.cpp build dir holding bin/llama-server):
# a CPU build made outside this repo. It is started on 127.0.0.1 with -c CTX -np 1, prompt
# caching and --cache-reuse 256 (flags that its --help does not list are left out), GPU offload
# off, and stopped when its half is done (and on any exit). bench/llamacpp_typing_client.py plays
# every trace against it as an editor plugin does (one request per event, the previous one
# cancelled by closing its connection); then `laya replay` plays the same traces at the same pace.
# The table: per trace and overall, events, suggest latency p50/p90/p99/p99.9/max in ms,
# tokens computed per event (p50/p99), requests cancelled, and llama-server/laya per percentile.
# Percentiles are nearest rank on both sides.
set -euo pipefail

die() { echo "typing_vs_llamacpp: $*" >&2; exit 2; }
usage() { sed -n '2,25p' "$0" >&2; exit 2; }

THREADS="${THREADS:-2}"
PORT="${PORT:-8090}"
CTX=1024
FAST=0
CAP=""
FIM=0
KEEP=""
POS=()
while [ $# -gt 0 ]; do
  case "$1" in
    -t|--threads) [ $# -ge 2 ] || die "$1 needs a value"; THREADS="$2"; shift 2 ;;
    --fast) FAST=1; shift ;;
    --pace-cap-ms) [ $# -ge 2 ] || die "$1 needs a value"; CAP="$2"; shift 2 ;;
    --fim) FIM=1; shift ;;
    --port) [ $# -ge 2 ] || die "$1 needs a value"; PORT="$2"; shift 2 ;;
    --ctx) [ $# -ge 2 ] || die "$1 needs a value"; CTX="$2"; shift 2 ;;
    --out) [ $# -ge 2 ] || die "$1 needs a value"; KEEP="$2"; shift 2 ;;
    -h|--help) usage ;;
    --) shift; POS+=("$@"); break ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) POS+=("$1"); shift ;;
  esac
done
[ "${#POS[@]}" -ge 3 ] || usage
for v in "$THREADS" "$PORT" "$CTX"; do
  [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "'$v' is not a positive integer (threads, port, ctx)"
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The prefixes that pin the commands (PIN_*): "taskset -c CPUS", or nothing. taskset execs the
# command, so $! of a pinned server is the server's own pid.
for v in "${PIN_SERVER:-}" "${PIN_CLIENT:-}" "${PIN_LAYA:-}"; do
  [ -n "$v" ] || continue
  [[ "$v" =~ ^[0-9]+([,-][0-9]+)*$ ]] || die "'$v' is not a CPU list (PIN_SERVER, PIN_CLIENT, PIN_LAYA)"
  command -v taskset > /dev/null || die "PIN_* needs taskset"
done
PIN_S=() PIN_C=() PIN_L=()
[ -z "${PIN_SERVER:-}" ] || PIN_S=(taskset -c "$PIN_SERVER")
[ -z "${PIN_CLIENT:-}" ] || PIN_C=(taskset -c "$PIN_CLIENT")
[ -z "${PIN_LAYA:-}" ] || PIN_L=(taskset -c "$PIN_LAYA")
SERVER="${POS[0]}"
MODEL="${POS[1]}"
TRACES=("${POS[@]:2}")
LAYA="${LAYA:-build/laya}"
PYTHON="${PYTHON:-python3}"
CLIENT="$ROOT/bench/llamacpp_typing_client.py"

[ -d "$SERVER" ] && [ -x "$SERVER/bin/llama-server" ] && SERVER="$SERVER/bin/llama-server"
[ -e "$SERVER" ] || die "llama-server not found: $SERVER"
if [ ! -f "$SERVER" ] || [ ! -x "$SERVER" ]; then die "llama-server is not an executable file: $SERVER"; fi
[ -f "$MODEL" ] || die "model not found: $MODEL"
for t in "${TRACES[@]}"; do [ -f "$t" ] || die "trace not found: $t"; done
if [ ! -x "$LAYA" ] && [ -x "$ROOT/$LAYA" ]; then LAYA="$ROOT/$LAYA"; fi
[ -x "$LAYA" ] || die "laya binary not found: $LAYA (build it, or set LAYA=path/to/laya)"
command -v "$PYTHON" > /dev/null || die "$PYTHON not found (set PYTHON)"
[ -f "$CLIENT" ] || die "client not found: $CLIENT"

if [ -n "$KEEP" ]; then
  mkdir -p "$KEEP"
  OUT="$(cd "$KEEP" && pwd)"
else
  OUT="$(mktemp -d)"
fi
SERVER_PID=""
stop_server() {
  if [ -n "$SERVER_PID" ]; then
    kill -TERM "$SERVER_PID" 2> /dev/null || true
    for _ in $(seq 1 50); do
      kill -0 "$SERVER_PID" 2> /dev/null || break
      sleep 0.2
    done
    kill -KILL "$SERVER_PID" 2> /dev/null || true
    wait "$SERVER_PID" 2> /dev/null || true
    SERVER_PID=""
  fi
}
cleanup() {
  stop_server
  if [ -z "$KEEP" ]; then rm -rf "$OUT"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Nothing may already listen on the port (the client would talk to it).
if "$PYTHON" - "$PORT" <<'PY'
import socket, sys
s = socket.socket()
s.settimeout(1)
sys.exit(0 if s.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0 else 1)
PY
then
  die "something already listens on 127.0.0.1:$PORT (use --port)"
fi

# ---- llama-server -------------------------------------------------------------------------------
HELP="$("$SERVER" --help 2>&1 || true)"
has() { grep -q -e "$1" <<< "$HELP"; }
ARGS=(-m "$MODEL" --host 127.0.0.1 --port "$PORT" -t "$THREADS" -c "$CTX")
has '--threads-batch' && ARGS+=(-tb "$THREADS")
has '--parallel' && ARGS+=(-np 1)
if has '--cache-reuse'; then ARGS+=(--cache-reuse 256); else echo "note: this llama-server has no --cache-reuse" >&2; fi
has '--no-webui' && ARGS+=(--no-webui)
has '--n-gpu-layers' && ARGS+=(-ngl 0)
has '--device <dev1' && ARGS+=(--device none)
LSV="$("$SERVER" --version 2>&1 | grep -m1 -i 'version' || echo unknown)"

# LLAMA_ARGS: more llama-server flags (split on spaces), e.g. LLAMA_ARGS="-nr".
read -r -a EXTRA <<< "${LLAMA_ARGS:-}"
ARGS+=("${EXTRA[@]}")

# Starts llama-server and waits for /health: 0 ready; otherwise SERVER_RC is its exit status.
SERVER_RC=0
start_server() {
  echo "llama-server: $SERVER ${ARGS[*]}" >&2
  CUDA_VISIBLE_DEVICES="" "${PIN_S[@]}" "$SERVER" "${ARGS[@]}" > "$OUT/llama-server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 600); do
    if ! kill -0 "$SERVER_PID" 2> /dev/null; then
      SERVER_RC=0
      wait "$SERVER_PID" || SERVER_RC=$?
      SERVER_PID=""
      return 1
    fi
    if "$PYTHON" - "$PORT" <<'PY'
import sys, urllib.request
try:
    sys.exit(0 if urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=1).status == 200 else 1)
except Exception:
    sys.exit(1)
PY
    then return 0; fi
    sleep 0.2
  done
  stop_server
  tail -20 "$OUT/llama-server.log" >&2
  die "llama-server not ready after 120 s (log above)"
}
if ! start_server; then
  # SIGILL: a CPU that lists AMX but traps on its instructions (seen in a VM) kills a native
  # build in ggml's AMX matmul; --no-repack turns off ggml's extra CPU buffer types, AMX among
  # them (for Q8_0 weights on x86 that is all it turns off).
  if [ "$SERVER_RC" = 132 ] && has '--no-repack' && ! grep -q -e '-nr' -e '--no-repack' <<< "${ARGS[*]}"; then
    echo "note: llama-server died of SIGILL (AMX?): again with --no-repack" >&2
    ARGS+=(--no-repack)
    start_server || true
  fi
  if [ -z "$SERVER_PID" ]; then
    tail -20 "$OUT/llama-server.log" >&2
    die "llama-server exited (status $SERVER_RC) before it was ready (log above)"
  fi
fi

PACE=()
[ "$FAST" = 1 ] && PACE=(--fast)
if [ -n "$CAP" ]; then
  [[ "$CAP" =~ ^[1-9][0-9]*$ ]] || die "--pace-cap-ms: '$CAP' is not a positive integer"
  [ "$FAST" = 1 ] && die "--pace-cap-ms plays at the recorded pace: not with --fast"
  PACE=(--pace-cap-ms "$CAP")
fi
CARGS=(--server "http://127.0.0.1:$PORT" --n-ctx "$CTX" --json "$OUT/llama-server.json")
[ "$FIM" = 1 ] && CARGS+=(--fim)
echo "== llama-server ==" >&2
"${PIN_C[@]}" "$PYTHON" "$CLIENT" "${CARGS[@]}" "${PACE[@]}" "${TRACES[@]}" >&2
stop_server
LRU="$(grep -c 'selected slot by LRU' "$OUT/llama-server.log" || true)"
CANCELS="$(grep -c 'cancel task' "$OUT/llama-server.log" || true)"

# ---- laya ---------------------------------------------------------------------------------------
echo "== laya ==" >&2
"${PIN_L[@]}" "$LAYA" replay -m "$MODEL" -t "$THREADS" --max-ctx "$CTX" "${PACE[@]}" --json "$OUT/laya.json" "${TRACES[@]}" >&2

# ---- the table ----------------------------------------------------------------------------------
echo
echo "machine: $(lscpu 2> /dev/null | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; threads $THREADS"
echo "model: $MODEL; context $CTX; pace: $([ "$FAST" = 1 ] && echo 'back to back (--fast)' || { [ -n "$CAP" ] && echo "recorded, pauses capped at $CAP ms" || echo 'recorded'; })"
echo "llama-server: $LSV; $([ "$FIM" = 1 ] && echo '/infill' || echo '/completion'), n_predict 8, greedy, cache_prompt, ${ARGS[*]:4}"
echo "laya: $LAYA ($(git -C "$ROOT" rev-parse --short HEAD 2> /dev/null || echo '?')), replay --max-tokens 8"
[ -n "$KEEP" ] && echo "results: $OUT/{llama-server,laya}.json, $OUT/llama-server.log"
"$PYTHON" - "$OUT/llama-server.json" "$OUT/laya.json" "$LRU" "$CANCELS" <<'PY'
import json, sys
L = json.load(open(sys.argv[1])); Y = json.load(open(sys.argv[2])); lru, cancels = sys.argv[3], sys.argv[4]
P = ("p50", "p90", "p99", "p999", "max")

def row(engine, name, d):
    ms = d["suggest_ms"]; tk = d["tokens_computed_per_event"]
    cells = [name, engine, str(d["events"])] + ["-" if ms[p] is None else f"{ms[p]:.2f}" for p in P]
    cells += [f"{tk['p50']} / {tk['p99']}", str(d.get("cancelled", "-"))]
    return "| " + " | ".join(cells) + " |"

def ratio(name, a, b):
    cells = [name, "llama-server / laya", ""]
    for p in P:
        x, y = a["suggest_ms"][p], b["suggest_ms"][p]
        cells.append("-" if not x or not y else f"{x / y:.2f}x")
    return "| " + " | ".join(cells + ["", ""]) + " |"

print()
print("| trace | engine | events | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | tokens computed p50 / p99 | cancelled |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
names = list(L["traces"])
groups = [(n, L["traces"][n], Y["traces"].get(n)) for n in names]
if len(names) > 1:
    groups.append(("overall", L, Y))
for n, a, b in groups:
    print(row("llama-server", n, a))
    if b is not None:
        print(row("laya", n, b))
        print(ratio(n, a, b))
print()
print("suggest ms: llama-server = client side (request written -> response parsed, HTTP + JSON included);"
      " laya = event handed to the session -> suggestion returned (in process).")
print(f"llama-server's own time (timings.prompt_ms + predicted_ms) overall: p50 {L['server_ms']['p50']:.2f}"
      f" p99 {L['server_ms']['p99']:.2f} ms; tokens cached per event (cache_n) p50 {L['cache_n_per_event']['p50']};"
      f" events with a windowed prefix {L['windowed_events']}; slots selected by LRU (prompt-cache save/load) {lru}.")
if L.get("paced"):
    print("paced: a llama-server request still running at the next event is cancelled (connection closed) and left out"
          " of its percentiles; laya handles events in order (a slow one delays the next, all are counted)."
          f" Tasks llama-server logged as cancelled: {cancels} (of {L['cancelled']} connections the client closed).")
PY
