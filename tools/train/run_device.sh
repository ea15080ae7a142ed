#!/bin/bash
# Reproduces laya's default model on the lent GPU machine (one H200), from the
# repository root. Here, once (about 10 minutes on 2 cores; ~32 MB of xz):
#   python3 tools/train/build_local_corpus.py --out build-train-data   # man/info/doc English, C headers
#   python3 tools/train/fetch_corpus.py --out build-train-data         # zh, en, go, rust, js (apt-get download, npm pack)
# Then on the GPU machine (the device tool's run, carry=["build-train-data"]):
#   STAGE=all BUDGET=470 bash tools/train/run_device.sh   # everything in one call (smoke ~40 s + 470 s + export)
# or in two calls on the same warm machine (so that training gets a whole call):
#   STAGE=prep  bash tools/train/run_device.sh     # smoke test + corpus, tokenizer, token streams
#   STAGE=train bash tools/train/run_device.sh     # training, evaluation, HF + GGUF export
# The smoke test runs the whole pipeline on a sliver of data first, so that a
# broken step fails in seconds. Extra arguments go to train.py (e.g. --steps N
# to repeat a run's exact number of steps; metrics.json records it).
set -uo pipefail
OUT=${OUT:-/tmp/laya-out}
STAGE=${STAGE:-all}
# seconds for train.py (corpus + tokenizer + training + eval) in the train / all stage; the all stage
# also runs the smoke test (~40 s) first, so it gets less by default to end within one 600 s call.
if [ "$STAGE" = all ]; then BUDGET=${BUDGET:-470}; else BUDGET=${BUDGET:-560}; fi
W=/tmp/laya-train
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
mkdir -p "$W" "$OUT"
T0=$(date +%s)
LOG="$OUT/log-$STAGE.txt"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import sys,torch,transformers,tokenizers,safetensors,numpy;print(sys.version.split()[0],"torch",torch.__version__,"transformers",transformers.__version__,"tokenizers",tokenizers.__version__,"numpy",numpy.__version__)'
} 2>&1 | tee "$LOG"
if [ "$STAGE" = prep ] || [ "$STAGE" = all ]; then
  python3 tools/train/train.py --smoke --no-compile --work "$W/smoke" --out "$W/smoke/hf" >"$W/smoke.log" 2>&1 &&
    python3 tools/train/export_gguf.py "$W/smoke/hf" "$W/smoke/smoke.gguf" --type q8_0 >>"$W/smoke.log" 2>&1
  rc=$?
  tail -n 30 "$W/smoke.log" | tee -a "$LOG"
  if [ $rc != 0 ]; then cp "$W/smoke.log" "$OUT/"; echo "SMOKE FAILED rc=$rc" | tee -a "$LOG"; exit 1; fi
  echo "smoke ok after $(( $(date +%s) - T0 )) s" | tee -a "$LOG"
fi
if [ "$STAGE" = prep ]; then
  python3 tools/train/train.py --prep-only --work "$W" --out "$W/hf" "$@" 2>&1 | tee -a "$LOG"
  cp "$W/prep/tokenizer.json" "$W/prep/prep.json" "$OUT/" 2>/dev/null
  echo "device seconds for this stage: $(( $(date +%s) - T0 ))" | tee -a "$LOG"
  exit 0
fi
python3 tools/train/train.py --work "$W" --out "$W/hf" --budget-seconds "$BUDGET" "$@" 2>&1 | tee -a "$LOG"
python3 tools/train/export_gguf.py "$W/hf" "$W/laya-default-q8_0.gguf" --type q8_0 2>&1 | tee -a "$LOG"
cp "$W/metrics.json" "$OUT/" 2>/dev/null
echo "device seconds for this stage: $(( $(date +%s) - T0 ))" | tee -a "$LOG"
# What comes back: the HF folder (+ the Q8_0 GGUF when it fits), in 15 MiB parts.
cd "$W"
items="hf"
sz=$(du -sm hf laya-default-q8_0.gguf 2>/dev/null | awk '{s+=$1} END {print s}')
if [ -f laya-default-q8_0.gguf ] && [ "${sz:-999}" -lt 61 ]; then items="hf laya-default-q8_0.gguf"; fi
tar cf - $items | split -b 15M -d - "$OUT/model.tar.part"
ls -la "$OUT" | tee -a "$LOG"
