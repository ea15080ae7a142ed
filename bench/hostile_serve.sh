#!/usr/bin/env bash
# laya serve under hostile clients at issue 29's sizes (the ctest hostile.server
# runs the same suite short): a 1 GiB chunked body, 500 slow-header
# connections + 200 idle keep-alive clients for 20 s while a normal client
# types (/infill p99 during <= 2x quiet, /health <= 100 ms), 50 truncations of
# a model file during a hot swap, 16 MiB LSP frames x3. Server defaults
# (--max-connections 128, --max-connections-per-client 32, --health-reserve 4)
# with --request-timeout 10. ~2 minutes on 2 cores.
#
#   bench/hostile_serve.sh [build/laya] [more suite options, e.g. --groups slowloris]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LAYA="${1:-$ROOT/build/laya}"
shift || true
exec python3 "$ROOT/tests/hostile/server_suite.py" --laya "$LAYA" --full "$@"
