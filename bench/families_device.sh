#!/usr/bin/env bash
# Model families at ~0.5 B on the lent machine's CPU (issue 30), laya next to llama.cpp, in one call:
# decode speed (`laya bench` and `llama-bench`, 2 threads and 1) and keystroke -> suggestion latency
# at a capped typing pace (`laya replay` and llama-server driven by bench/llamacpp_typing_client.py)
# on random-weight models of each family's shape made there by `laya mkmodel` (Q8_0): phi3-0.5b,
# granite-0.5b, starcoder2-0.5b, gemma-0.5b, gemma2-0.5b, gemma3-0.5b, and the Llama family's
# qwen2.5-0.5b for reference.
#
#   1. here, from the checkout the device gets (the session's, not a helper's worktree):
#        bench/families_device.sh stage [DEST]
#      fills DEST (default devrun/families: /devrun/ is git-ignored, so `carry` can name it) with
#        bin.tar.xz  laya (LAYA, default build/laya), llama-bench and llama-server (from LLAMA_BIN,
#                    default ~/peers/llama.cpp/build-cuda/bin; left out with a note when absent)
#                    and the shared libraries they load (bench/device_pkg.sh)
#        traces/     the public typing traces (TRACES_DIR, default ../shared/fixtures/traces: the
#                    device gets no ../shared)
#        versions.txt  laya's and llama.cpp's commits
#      (or DIR holds the binaries as they are: DIR/laya, DIR/llama-bench, DIR/llama-server, libraries in
#      DIR/lib, traces in DIR/traces)
#   2. device, from the repository root:
#        run(command="bash bench/families_device.sh device devrun/families", carry=["devrun/families"])
#      writes to $OUT (at most 8 files come back): families.md (the tables), families.json (every
#      figure), families.log (the whole run), raw.tar.gz (each tool's own output).
#
# Timing runs go one after another (nothing else runs then), each pinned with taskset: 2 threads on
# CPUS2 (default 2,3), 1 thread on CPU1 (default 2), the typing client on CLIENT_CPU (default 8),
# apart from the engine it times. Models are made first, on every core, before anything is timed.
#   decode   laya bench -m M -t T -p 0 -n N_GEN --warmup 8 --json
#            llama-bench -m M -t T -p 0 -n N_GEN -r REPS -ngl 0 -o jsonl   (CUDA_VISIBLE_DEVICES=)
#   replay   bench/typing_vs_llamacpp.sh --pace-cap-ms CAP --ctx 1024: llama-server (-t 2 -c 1024
#            -np 1 --cache-reuse 256 -ngl 0), then laya replay -t 2 --max-ctx 1024, the same traces:
#            the first REPLAY_EVENTS events of each of REPLAY_TRACES (bench/cut_traces.py).
# The whole run keeps within BUDGET_S seconds (default 330: the lead's limit is 6 minutes): a step
# whose estimate does not fit in what is left is skipped and says so (the tables mark it).
# Environment (defaults): MODELS ("phi3-0.5b granite-0.5b starcoder2-0.5b gemma-0.5b gemma2-0.5b
# gemma3-0.5b qwen2.5-0.5b"),
# TYPE (Q8_0), N_GEN (64), REPS (2), THREAD_COUNTS ("2 1"), REPLAY_EVENTS (40), REPLAY_TRACES
# ("en_meeting_notes py_bisect"), CAP (300), PORT (8197), WORK (/tmp/laya-families), BUDGET_S,
# LAYA / LLAMA_BENCH / LLAMA_SERVER (binaries to use instead of the staged ones).
#
# Every model uses mkmodel's synthetic byte-level BPE vocabulary padded to the family's vocabulary
# size (the families' presets have no tokenizer fixture; the reference is made with the same one, so
# that a keystroke's text is as many tokens for every model). With random weights every suggestion runs
# to its 8 tokens, and a keystroke that comes before it is done cancels it (both engines count these).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
# shellcheck source=device_pkg.sh
. "$here/device_pkg.sh" || exit 1

stage() {
  local dest="${1:-$root/devrun/families}" laya="${LAYA:-$root/build/laya}" lb="${LLAMA_BIN:-$HOME/peers/llama.cpp/build-cuda/bin}"
  local traces="${TRACES_DIR:-}" bins=() b
  [ -x "$laya" ] || { echo "families stage: no laya binary at $laya (build it, or set LAYA)" >&2; return 1; }
  bins+=("$laya")
  for b in llama-bench llama-server; do
    if [ -x "$lb/$b" ]; then bins+=("$lb/$b"); else echo "families stage: no $lb/$b: the device run will skip llama.cpp's side" >&2; fi
  done
  if [ -z "$traces" ]; then
    for traces in /work/shared/fixtures/traces "$root/../shared/fixtures/traces" "$root/shared/fixtures/traces"; do
      [ -d "$traces" ] && break
    done
  fi
  [ -d "$traces" ] || { echo "families stage: no typing traces at $traces (set TRACES_DIR)" >&2; return 1; }
  rm -rf "$dest" && mkdir -p "$dest" || return 1
  pkg_pack "$dest" "${bins[@]}" || return 1
  cp -r "$traces" "$dest/traces" && chmod -R u+w "$dest/traces"
  {
    echo "laya $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?') $("$laya" version 2>/dev/null | head -1)"
    [ -x "$lb/llama-bench" ] && echo "llama.cpp $("$lb/llama-bench" --version 2>&1 | grep -m1 -i version || echo '?')"
  } >"$dest/versions.txt"
  cat "$dest/versions.txt"
  du -sh "$dest"
  local kb; kb=$(du -sk "$dest" | cut -f1)
  if [ "$kb" -gt $((60 * 1024)) ]; then
    echo "families stage: $dest is over 60 MiB: with the checkout it may not fit the call's 64 MiB (a CPU-only llama.cpp build is smaller)" >&2
  fi
}

# ---- device ------------------------------------------------------------------------------------

T0=$SECONDS
log() { echo "[$((SECONDS - T0)) s] $*"; }
# fits SECONDS WHAT: 0 when the estimate fits in what is left of BUDGET_S, else says what is skipped.
fits() {
  local left=$((BUDGET_S - (SECONDS - T0)))
  if [ "$1" -le "$left" ]; then return 0; fi
  log "skipped (budget: needs ~$1 s, $left s left): $2"
  echo "$2" >>"$RAW/skipped.txt"
  return 1
}
pinned() {  # pinned CPUS CMD...: CMD on those CPUs (none: as it is)
  local cpus="$1"
  shift
  if [ -n "$cpus" ]; then taskset -c "$cpus" "$@"; else "$@"; fi
}
# first_exe NAME CANDIDATE...: the first executable candidate, else "".
first_exe() {
  local c
  shift
  for c in "$@"; do [ -n "$c" ] && [ -f "$c" ] && [ -x "$c" ] && { echo "$c"; return; }; done
  echo ""
}

device() {
  local dir="${1:-devrun/families}"
  local out="${OUT:-$PWD/out-families}" work="${WORK:-/tmp/laya-families}"
  BUDGET_S="${BUDGET_S:-330}"
  local models="${MODELS:-phi3-0.5b granite-0.5b starcoder2-0.5b gemma-0.5b gemma2-0.5b gemma3-0.5b qwen2.5-0.5b}"
  local type="${TYPE:-Q8_0}"
  local n_gen="${N_GEN:-64}" reps="${REPS:-2}" threads="${THREAD_COUNTS:-2 1}"
  local events="${REPLAY_EVENTS:-40}" rtraces="${REPLAY_TRACES:-en_meeting_notes py_bisect}" cap="${CAP:-300}"
  local cpus2="${CPUS2:-2,3}" cpu1="${CPU1:-2}" ccpu="${CLIENT_CPU:-8}" port="${PORT:-8197}"
  RAW="$work/raw"
  rm -rf "$RAW" && mkdir -p "$out" "$RAW" "$work/models" "$work/empty" || return 1
  export CUDA_VISIBLE_DEVICES=""  # llama.cpp's CUDA build, CPU only (-ngl 0 as well)

  echo "$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores," \
    "avx512_vnni: $(grep -q avx512_vnni /proc/cpuinfo && echo yes || echo no)" >"$RAW/machine.txt"
  log "machine: $(cat "$RAW/machine.txt")"
  local c
  for c in cpus2 cpu1 ccpu; do
    if ! { command -v taskset >/dev/null && taskset -c "${!c}" true 2>/dev/null; }; then
      echo "cannot pin to CPUs ${!c} here (no taskset, or fewer cores): not pinned" | tee -a "$RAW/machine.txt"
      printf -v "$c" '%s' ""
    fi
  done

  # The binaries: staged (bin.tar.xz), or LAYA / LLAMA_BENCH / LLAMA_SERVER, or beside DIR.
  if [ -f "$dir/bin.tar.xz" ]; then
    pkg_unpack "$dir" "$dir/pkg/laya" version || { log "cannot unpack $dir/bin.tar.xz"; return 1; }
  else
    export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  local laya lbench lserver
  laya=$(first_exe laya "${LAYA:-}" "$dir/pkg/laya" "$dir/laya" "$dir/bin/laya" build/laya)
  lbench=$(first_exe llama-bench "${LLAMA_BENCH:-}" "$dir/pkg/llama-bench" "$dir/llama-bench" "$dir/bin/llama-bench")
  lserver=$(first_exe llama-server "${LLAMA_SERVER:-}" "$dir/pkg/llama-server" "$dir/llama-server" "$dir/bin/llama-server")
  [ -n "$laya" ] || { log "no laya binary (stage $dir first, or set LAYA)"; return 1; }
  laya="$(cd "$(dirname "$laya")" && pwd)/$(basename "$laya")"
  "$laya" version >/dev/null 2>&1 || { log "laya does not start: missing libraries: $(pkg_missing "$laya")"; return 1; }
  # A CUDA build of llama.cpp loads CUDA's runtime libraries (cuBLAS: too large to carry): the
  # device's CUDA installation or its Python wheels have them, where the loader may not look.
  local b d extra=""
  for b in "$lbench" "$lserver"; do
    [ -n "$b" ] && [ -n "$(pkg_missing "$b")" ] || continue
    local sp
    sp=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib $(for s in $sp; do echo "$s"/nvidia/*/lib "$s"/nvidia/*/lib64; done); do
      [ -d "$d" ] && extra="$extra:$d"
    done
    export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}$extra"
    echo "llama.cpp: $(basename "$b") misses libraries; CUDA's folders added to LD_LIBRARY_PATH:$extra" | tee -a "$RAW/machine.txt"
    break
  done
  for b in lbench lserver; do
    local p="${!b}"
    if [ -z "$p" ]; then
      echo "llama.cpp: no ${b/l/llama-} binary: its side is skipped" | tee -a "$RAW/machine.txt"
    elif ! "$p" --version >/dev/null 2>&1 && ! "$p" --help >/dev/null 2>&1; then
      echo "llama.cpp: $p does not start (missing: $(pkg_missing "$p")): its side is skipped" | tee -a "$RAW/machine.txt"
      printf -v "$b" '%s' ""
    fi
  done
  {
    echo "laya: $laya ($("$laya" version 2>&1 | head -1))"
    [ -f "$dir/versions.txt" ] && cat "$dir/versions.txt"
    [ -n "$lbench" ] && echo "llama-bench: $("$lbench" --version 2>&1 | grep -m1 -i version)"
  } | tee -a "$RAW/machine.txt"

  # The traces, cut to the first REPLAY_EVENTS events of each.
  local tdir="" t cut=() play_s=0
  for t in "${TRACES_DIR:-}" "$dir/traces" ../shared/fixtures/traces shared/fixtures/traces; do
    [ -n "$t" ] && [ -d "$t" ] && { tdir="$t"; break; }
  done
  if [ -z "$tdir" ]; then
    log "no typing traces (stage them, or set TRACES_DIR): replays are skipped"
  else
    local srcs=()
    for t in $rtraces; do
      if [ -f "$tdir/$t.jsonl" ]; then srcs+=("$tdir/$t.jsonl"); elif [ -f "$tdir/long/$t.jsonl" ]; then srcs+=("$tdir/long/$t.jsonl"); else log "no trace $t in $tdir"; fi
    done
    if [ "${#srcs[@]}" -gt 0 ]; then
      python3 "$here/cut_traces.py" --events "$events" --pace-cap-ms "$cap" --out "$work/traces" "${srcs[@]}" >"$RAW/traces.tsv" || return 1
      while IFS=$'\t' read -r _ _ _ capped path; do
        cut+=("$path")
        play_s=$(python3 -c "import math; print(math.ceil($play_s + $capped))")
      done <"$RAW/traces.tsv"
      log "replay traces: $(cut -f1,2 "$RAW/traces.tsv" | tr '\t\n' ': ') ~${play_s} s of play each"
    fi
  fi

  # ---- the models, on every core, before anything is timed
  local m f
  for m in $models; do
    f="$work/models/$m-$type.gguf"
    [ -f "$f" ] || fits 40 "mkmodel $m" || continue
    if [ ! -f "$f" ]; then
      # From an empty folder with LAYA_FIXTURES unset: the synthetic vocabulary for every preset.
      # (The file is written whole or not at all.)
      (cd "$work/empty" && env -u LAYA_FIXTURES "$laya" mkmodel --preset "$m" --type "$type" -o "$f" -q) \
        >"$RAW/$m.mkmodel.txt" 2>&1 || { log "mkmodel $m failed: $(tail -n 2 "$RAW/$m.mkmodel.txt")"; continue; }
    else
      echo "$f: made earlier on this machine" >"$RAW/$m.mkmodel.txt"
    fi
    "$laya" info -m "$f" >"$RAW/$m.info.txt" 2>&1
    log "$(head -n 1 "$RAW/$m.mkmodel.txt")"
  done

  # ---- decode: laya bench and llama-bench, one after another, pinned
  local th cpus
  for m in $models; do
    f="$work/models/$m-$type.gguf"
    [ -f "$f" ] || continue
    for th in $threads; do
      cpus=$([ "$th" = 1 ] && echo "$cpu1" || echo "$cpus2")
      # ~2 s to load and pack, then (8 + N_GEN) steps of at most ~40 ms a thread-halving.
      if fits $((4 + (8 + n_gen) * 60 / th / 1000 + 1)) "laya bench $m -t $th"; then
        pinned "$cpus" timeout 120 "$laya" bench -m "$f" -t "$th" -p 0 -n "$n_gen" --warmup 8 --json \
          >"$RAW/$m.laya-t$th.json" 2>"$RAW/$m.laya-t$th.err"
        log "laya bench $m -t $th: rc $? $(grep -o '"decode_ms_p50": [0-9.]*\|"decode_ms_mean": [0-9.]*' "$RAW/$m.laya-t$th.json" | tr '\n' ' ')"
      fi
      [ -n "$lbench" ] || continue
      if fits $((4 + (reps + 1) * n_gen * 60 / th / 1000 + 1)) "llama-bench $m -t $th"; then
        pinned "$cpus" timeout 180 "$lbench" -m "$f" -t "$th" -p 0 -n "$n_gen" -r "$reps" -ngl 0 -o jsonl \
          >"$RAW/$m.llama-t$th.jsonl" 2>"$RAW/$m.llama-t$th.err"
        log "llama-bench $m -t $th: rc $? $(grep -o '"avg_ns": [0-9]*' "$RAW/$m.llama-t$th.jsonl" | tail -n 1)"
      fi
    done
  done

  # ---- keystroke -> suggestion at a capped pace: llama-server, then laya replay, same traces
  if [ "${#cut[@]}" -gt 0 ]; then
    for m in $models; do
      f="$work/models/$m-$type.gguf"
      [ -f "$f" ] || continue
      mkdir -p "$RAW/$m.replay"
      if [ -n "$lserver" ]; then
        fits $((2 * play_s + 25)) "replay $m (llama-server and laya)" || continue
        PIN_SERVER="$cpus2" PIN_CLIENT="$ccpu" PIN_LAYA="$cpus2" LAYA="$laya" PORT="$port" \
          timeout $((2 * play_s + 120)) bash "$here/typing_vs_llamacpp.sh" --pace-cap-ms "$cap" --ctx 1024 \
          --out "$RAW/$m.replay" "$lserver" "$f" "${cut[@]}" >"$RAW/$m.replay/table.md" 2>"$RAW/$m.replay/run.log"
        log "replay $m: rc $? $(grep -h '^| overall' "$RAW/$m.replay/table.md" | head -n 2 | cut -d'|' -f3,5 | tr '\n' ' ')"
      else
        fits $((play_s + 15)) "replay $m (laya)" || continue
        pinned "$cpus2" timeout $((play_s + 90)) "$laya" replay -m "$f" -t 2 --max-ctx 1024 --pace-cap-ms "$cap" \
          --json "$RAW/$m.replay/laya.json" "${cut[@]}" >"$RAW/$m.replay/run.log" 2>&1
        log "replay $m (laya alone): rc $?"
      fi
    done
  fi

  # ---- the tables
  {
    echo "models=$models"; echo "type=$type"; echo "n_gen=$n_gen"; echo "reps=$reps"; echo "threads=$threads"
    echo "cpus2=$cpus2"; echo "cpu1=$cpu1"; echo "client_cpu=$ccpu"; echo "pace_cap_ms=$cap"; echo "replay_events=$events"
    echo "replay_traces=$rtraces"; echo "budget_s=$BUDGET_S"; echo "elapsed_s=$((SECONDS - T0))"
  } >"$RAW/settings.txt"
  python3 "$here/families_table.py" "$RAW" --json "$out/families.json" --md "$out/families.md" || log "families_table.py failed"
  tar -C "$work" -czf "$out/raw.tar.gz" raw
  [ -f "$out/families.md" ] && cat "$out/families.md"
  log "done"
}

case "${1:-}" in
  stage) shift; stage "$@" ;;
  device)
    shift
    o="${OUT:-$PWD/out-families}"
    mkdir -p "$o"
    device "$@" 2>&1 | tee "$o/families.log"
    ;;
  *) sed -n '2,42p' "$0" >&2; exit 2 ;;
esac
