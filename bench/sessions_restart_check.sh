#!/usr/bin/env bash
# Save -> kill -9 -> load (issue 12): a process builds the documents, switches
# between them, saves every session (bench-sessions --save) and writes, per
# document, hashes of its next suggestion and of that suggestion's prompt
# logits (--check); it is then killed with SIGKILL. A new process loads the
# store (--load) and must write the identical check file: every document
# resumes with the same next suggestion and bit-identical logits.
# Then a third process loads the store, switches, and is killed with SIGKILL
# while it saves over it: the store must still load (the old file or the
# new one, never a mix; atomic_file.h) and, when the old one survived, give
# the first run's check again.
#
# usage: bench/sessions_restart_check.sh [bench-sessions options, e.g. -m MODEL --docs 100 --tokens 2000 -t 1]
# env:   LAYA (default build/laya), KEEP=1 keeps the work folder.
set -euo pipefail
LAYA=${LAYA:-build/laya}
WORK=$(mktemp -d /tmp/laya-restart.XXXXXX)
[[ "${KEEP:-0}" == 1 ]] || trap 'rm -rf "$WORK"' EXIT
STORE="$WORK/store"
# Only the options that pick the model and engine go to the loading runs.
ENGINE_OPTS=()
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[$i]}" in
    -m|--model|-t|--threads|--kv|--kv-budget|--backend|--max-ctx|--max-tokens) ENGINE_OPTS+=("${args[$i]}" "${args[$((i + 1))]}"); i=$((i + 1)) ;;
    --no-mlock) ENGINE_OPTS+=("${args[$i]}") ;;
  esac
done

wait_for() {  # wait_for FILE PATTERN PID: until FILE holds PATTERN (or the process died)
  until grep -q "$2" "$1" 2>/dev/null; do
    kill -0 "$3" 2>/dev/null || { echo "FAIL: the process ended before '$2':"; cat "$1"; exit 1; }
    sleep 0.05
  done
}

echo "== 1: build, switch, save, check, then kill -9"
"$LAYA" bench-sessions "$@" --save "$STORE" --check "$WORK/first.check" --json "$WORK/first.json" --hold >"$WORK/first.log" 2>&1 &
PID=$!
wait_for "$WORK/first.log" holding $PID
kill -9 $PID
wait $PID 2>/dev/null || true
grep -E "^(documents|switch|recompute|save)" "$WORK/first.log" || true

echo "== 2: a new process loads the store"
"$LAYA" bench-sessions "${ENGINE_OPTS[@]}" --load "$STORE" --switches 0 --check "$WORK/second.check" \
  --json "$WORK/second.json" >"$WORK/second.log" 2>&1 || { cat "$WORK/second.log"; exit 1; }
grep -E "^(documents|load)" "$WORK/second.log" || true
if ! diff -q "$WORK/first.check" "$WORK/second.check" >/dev/null; then
  echo "FAIL: the loaded documents' next suggestions or logits differ:"
  diff "$WORK/first.check" "$WORK/second.check" | head -20
  exit 1
fi
echo "OK: $(wc -l <"$WORK/first.check") documents, identical next suggestion and logits after kill -9 and load"

echo "== 3: kill -9 during a save over the store"
cp "$WORK/first.check" "$WORK/expect.check"
"$LAYA" bench-sessions "${ENGINE_OPTS[@]}" --load "$STORE" --switches 20 --recompute 0 --save "$STORE" \
  >"$WORK/third.log" 2>&1 &
PID=$!
caught=0
while kill -0 $PID 2>/dev/null; do
  if compgen -G "$STORE/.sessions.laya.tmp-*" >/dev/null; then kill -9 $PID; caught=1; break; fi
  sleep 0.001
done
wait $PID 2>/dev/null || true
leftover=$(compgen -G "$STORE/.sessions.laya.tmp-*" | wc -l || true)
"$LAYA" bench-sessions "${ENGINE_OPTS[@]}" --load "$STORE" --switches 0 --check "$WORK/third.check" \
  >"$WORK/third-load.log" 2>&1 || { echo "FAIL: the store does not load after a kill during save:"; cat "$WORK/third-load.log"; exit 1; }
if [[ $caught == 1 ]]; then
  diff -q "$WORK/expect.check" "$WORK/third.check" >/dev/null || { echo "FAIL: killed mid-save, the old store changed"; exit 1; }
  echo "OK: killed mid-save (a temporary file was being written; $leftover left beside the store), the old store loads unchanged"
else
  echo "OK: the save finished before the kill could land; the new store loads"
fi
