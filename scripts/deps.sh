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
  python3 >/dev/null
