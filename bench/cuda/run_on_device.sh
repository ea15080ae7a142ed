#!/usr/bin/env bash
# The CUDA backend's tests and benchmarks on a lent GPU machine, in one call.
#
# The device machine gets the session's checkout (not a helper's worktree)
# plus the ignored folders named in `carry`, at most 64 MiB in all, and it has
# no Debian -dev packages. So the binaries are built HERE and carried:
#
#   1. here:   bench/cuda/run_on_device.sh stage [DEST]
#        builds laya + laya_tests with -DLAYA_CUDA=ON in build-cuda (ninja -j$JOBS,
#        default 1, ccache), and fills DEST (default /work/main/devcuda, which
#        /work/main/.git/info/exclude ignores) with:
#          bin.tar.zst  laya, laya_tests and the shared libraries they need that
#                       are not glibc (fmt, pcre2, utf8proc, xxhash, ncurses,
#                       httplib, ssl, libstdc++ ...), zstd-compressed
#          fx/          the fixture files the logits tests read (a subset that fits)
#          run_on_device.sh  this script
#   2. device: run(command="cd devcuda && bash run_on_device.sh device", carry=["devcuda"])
#        unpacks, runs the conformance suite through "cuda", the reference-model
#        logits through the engine on cuda, compute-sanitizer memcheck on part of
#        the suite, makes random-weight llama-3.2-1b BF16 / Q8_0 models there
#        (mkmodel on its 16 cores: a 1.3-2.5 GB file cannot be carried) and
#        times decode with `laya bench --backend cuda`. Logs go to $OUT.
#        STEPS="tests logits bench sanitize" selects parts (default: all, in this order).
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

stage() {
  local root dest fx
  root="$(cd "$here/../.." && pwd)"
  dest="${1:-/work/main/devcuda}"
  fx=/work/shared/fixtures/ref-models
  cmake -S "$root" -B "$root/build-cuda" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAYA_CUDA=ON \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DLAYA_BUILD_BENCH=OFF \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache \
    -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >/dev/null || return 1
  ninja -C "$root/build-cuda" -j "${JOBS:-1}" laya laya_tests || return 1
  rm -rf "$dest" && mkdir -p "$dest/pkg/lib" "$dest/fx/ref-models/common" || return 1
  cp "$root/build-cuda/laya" "$root/build-cuda/tests/laya_tests" "$dest/pkg/"
  # Every shared library but glibc's own: the device image has other versions or none.
  # libstdc++ / libgcc_s apart: the device's own (newer) are used unless the
  # binaries do not start with them; tools there (compute-sanitizer) need theirs.
  mkdir -p "$dest/pkg/lib-std"
  ldd "$root/build-cuda/laya" "$root/build-cuda/tests/laya_tests" | awk '/=> \// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*)\.so' | while read -r l; do
      case "$l" in */libstdc++*|*/libgcc_s*) cp -L "$l" "$dest/pkg/lib-std/" ;; *) cp -L "$l" "$dest/pkg/lib/" ;; esac
    done
  tar -C "$dest/pkg" -cf - . | zstd -q -19 -T0 -o "$dest/bin.tar.zst" && rm -rf "$dest/pkg"
  cp "$fx/common/prompts.json" "$dest/fx/ref-models/common/"
  # The files the logits cases below read (the tracked tree travels too: 64 MiB in all).
  local m f
  for f in llama-tiny:f16:logits llama-tiny:q8_0:logits_q8_0 llama-tiny:Q4_K_M:logits_Q4_K_M llama-tiny:Q6_K:logits_Q6_K \
           qwen2-tiny:q8_0:logits_q8_0 qwen3-tiny:f16:logits; do
    IFS=: read -r m t r <<<"$f"
    mkdir -p "$dest/fx/ref-models/$m/gguf" "$dest/fx/ref-models/$m/ref"
    cp "$fx/$m/gguf/$m-$t.gguf" "$dest/fx/ref-models/$m/gguf/"
    cp "$fx/$m/ref/${r}"_p[0-9].npy "$dest/fx/ref-models/$m/ref/"
  done
  cp "$here/run_on_device.sh" "$dest/"
  du -sh "$dest"
}

# gtest filter of the logits cases whose files stage() carries.
logits_filter() {
  local f="" c
  for c in llama_tiny_gguf_llama_tiny_f16_gguf llama_tiny_gguf_llama_tiny_q8_0_gguf llama_tiny_gguf_llama_tiny_Q4_K_M_gguf \
           llama_tiny_gguf_llama_tiny_Q6_K_gguf qwen2_tiny_gguf_qwen2_tiny_q8_0_gguf qwen3_tiny_gguf_qwen3_tiny_f16_gguf; do
    f="$f*ModelLogits.*/$c:"
  done
  echo "${f}ModelIncremental.*"
}

device() {
  # Five log files in $OUT (the tool returns at most 8, and what is there when
  # a command is stopped at its time limit).
  local out="${OUT:-$PWD/out}" steps="${STEPS:-tests logits bench sanitize}"
  mkdir -p "$out" pkg || return 1
  zstd -q -d -c bin.tar.zst | tar -C pkg -xf - || return 1
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
  export LD_LIBRARY_PATH="$PWD/pkg/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  local laya="$PWD/pkg/laya" tests="$PWD/pkg/laya_tests"
  if ! "$tests" --gtest_list_tests >/dev/null 2>&1; then
    echo "the device's libstdc++ is older than the build's: using the carried one"
    export LD_LIBRARY_PATH="$PWD/pkg/lib-std:$LD_LIBRARY_PATH"
  fi
  "$tests" --gtest_list_tests >/dev/null || return 1
  if [[ " $steps " == *" tests "* ]]; then
    echo "== conformance suite through cuda"
    timeout "${TESTS_S:-200}" "$tests" --gtest_filter='*BackendConformance*cuda*' >"$out/conformance.log" 2>&1
    echo "rc $?"; grep -E '^\[ +(measure|PASSED|FAILED|SKIPPED) ' "$out/conformance.log" | grep -v ' OK ' | tail -60
  fi
  if [[ " $steps " == *" logits "* ]]; then
    echo "== reference-model logits through the engine on cuda"
    LAYA_TEST_BACKEND=cuda LAYA_FIXTURES="$PWD/fx" timeout "${LOGITS_S:-150}" "$tests" --gtest_filter="$(logits_filter)" >"$out/logits.log" 2>&1
    echo "rc $?"; grep -E '^\[ +(measure|PASSED|FAILED|SKIPPED) ' "$out/logits.log" | tail -40
  fi
  if [[ " $steps " == *" bench "* ]]; then
    echo "== decode on random-weight llama-3.2-1b"
    local t
    for t in ${TYPES:-BF16 Q8_0}; do
      [ -f "/tmp/llama-1b-$t.gguf" ] || timeout 120 "$laya" mkmodel --preset llama-3.2-1b --type "$t" -o "/tmp/llama-1b-$t.gguf" -q || continue
      ls -la "/tmp/llama-1b-$t.gguf"
      # Decode steps replayed as CUDA graphs (the default), then issued op by op.
      local g
      for g in ${GRAPHS:-1 0}; do
        echo "-- $t graphs=$g" >>"$out/bench.log"
        LAYA_CUDA_GRAPHS=$g timeout "${BENCH_S:-90}" "$laya" bench -m "/tmp/llama-1b-$t.gguf" --backend cuda -p 512 -n 256 \
          --warmup 32 --json >>"$out/bench.log" 2>&1
        echo "rc $? $t graphs=$g"; tail -n 3 "$out/bench.log"
      done
    done
  fi
  if [[ " $steps " == *" sanitize "* ]]; then
    echo "== compute-sanitizer memcheck (ops, KV, memory; the Q4_K and BF16 weight cases)"
    timeout "${SANITIZE_S:-200}" compute-sanitizer --tool memcheck --error-exitcode 9 "$tests" \
      --gtest_filter='*BackendConformance.*/cuda:*BackendConformanceWeights.*/cuda_Q4_K:*BackendConformanceWeights.*/cuda_BF16' \
      >"$out/memcheck.log" 2>&1
    echo "rc $?"; grep -E 'ERROR SUMMARY|PASSED|FAILED|Error' "$out/memcheck.log" | head -20
  fi
}

case "${1:-}" in
  stage) shift; stage "$@" ;;
  device) device ;;
  *) echo "usage: $0 stage [DEST] | device" >&2; exit 2 ;;
esac
