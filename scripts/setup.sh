#!/usr/bin/env bash
# One command for a newcomer: install dependencies, build, and run the main
# job (a completion) on the default model.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/deps.sh"
"$ROOT/scripts/build.sh"
MODEL="${LAYA_MODEL:-}"
if [ -z "$MODEL" ]; then
  if [ -f "$ROOT/models/laya-default-q8_0.gguf" ]; then
    MODEL="$ROOT/models/laya-default-q8_0.gguf"
  elif [ -f "$ROOT/../shared/fixtures/demo-model/demo-q8_0.gguf" ]; then
    # Until the project's own default model ships (issue 5), use the fixture demo model.
    MODEL="$ROOT/../shared/fixtures/demo-model/demo-q8_0.gguf"
  else
    echo "setup: built ./build/laya; no default model found (pass one with LAYA_MODEL=path)" >&2
    exit 0
  fi
fi
"$ROOT/build/laya" complete -m "$MODEL" -p "${PROMPT:-def fibonacci(n):}" -n 32 --stats
