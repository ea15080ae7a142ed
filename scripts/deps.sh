#!/usr/bin/env bash
# Installs the Debian 12 packages laya builds and tests with (run as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev \
  libgtest-dev libgmock-dev libbenchmark-dev \
  nlohmann-json3-dev libfmt-dev libcli11-dev libpcre2-dev libutf8proc-dev libxxhash-dev \
  libcpp-httplib-dev libncurses-dev tmux curl python3 chromium >/dev/null
# Real clients for the end-to-end tests (tests/e2e): the npm packages of
# package.json, exactly as package-lock.json pins them. Node comes with the
# machine where it is there (v20 here); Debian's nodejs otherwise.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if ! command -v npm >/dev/null; then
  $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
(cd "$ROOT" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
