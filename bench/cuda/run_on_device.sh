#!/usr/bin/env bash
# The CUDA backend's tests and benchmarks on a lent GPU machine, in one call.
#
# The device machine gets the session's checkout (not a helper's worktree)
# plus the ignored folders named in `carry`, at most 64 MiB in all, and it has
# no Debian -dev packages. So the binaries are built HERE and carried:
#
#   1. here:   bench/cuda/run_on_device.sh stage [DEST]
#        builds laya + laya_tests with -DLAYA_CUDA=ON in build-cuda (ninja -j$JOBS,
#        default 1, ccache; CUDA_ARCHS=90a-real builds for the H200 alone, half
#        of matmul.cu's ~9 minutes), and fills DEST (default /work/main/devcuda, which
#        /work/main/.git/info/exclude ignores) with:
#          bin.tar.xz   laya, laya_tests and the shared libraries they need that
#                       are not glibc (bench/device_pkg.sh's pkg_pack, copied
#                       beside this script as device_pkg.sh)
#          llama-src.tar.gz  llama.cpp's sources for its CUDA llama-bench, when
#                       ~/peers/llama.cpp is there (the device builds it on its
#                       16 cores while laya's steps run: ~140 CUDA objects)
#          fx/          the fixture files the logits tests read (a subset that fits)
#          run_on_device.sh  this script
#   2. device: run(command="cd devcuda && bash run_on_device.sh device", carry=["devcuda"])
#        unpacks, runs the conformance suite through "cuda", the reference-model
#        logits through the engine on cuda, compute-sanitizer memcheck on part of
#        the suite, makes random-weight llama-3.2-1b BF16 / Q8_0 models there
#        (mkmodel on its 16 cores: a 1.3-2.5 GB file cannot be carried) and
#        times decode with `laya bench --backend cuda`. Logs go to $OUT.
#        STEPS="tests logits families bench sweep peer replay profile detail persist psanitize sanitize mlx" selects parts (run in the order tests logits families bench sweep replay profile detail persist psanitize sanitize mlx peer: the peer waits for its build).
#        mlx (not in the default steps): MLX-quantized weights on cuda, issue 30: the conformance
#        suite's MLX cases (also with LAYA_CUDA_STREAM=0, the per-row kernel) and under
#        compute-sanitizer memcheck, the llama-tiny MLX folders' logits through the engine
#        (LAYA_TEST_BACKEND=cuda; stage() carries the float folder and its references, ~7 MB,
#        unless STAGE_MLX=0), and decode of qwen2.5-0.5b made there as MLX4 / Q4_0 / MLX8 /
#        Q8_0 (MLX_MODELS, MLX_TYPES) with `laya bench --backend cuda`: mlx.log.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# pkg_pack / pkg_unpack: beside this script once staged, in bench/ in the repository.
# shellcheck source=../device_pkg.sh
. "$here/device_pkg.sh" 2>/dev/null || . "$here/../device_pkg.sh" || exit 1

stage() {
  local root dest fx
  root="$(cd "$here/../.." && pwd)"
  dest="${1:-/work/main/devcuda}"
  fx=/work/shared/fixtures/ref-models
  cmake -S "$root" -B "$root/build-cuda" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAYA_CUDA=ON ${CUDA_ARCHS:+-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCHS} \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DLAYA_BUILD_BENCH=OFF -DLAYA_BUILD_TESTS=ON \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache \
    -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >/dev/null || return 1
  ninja -C "$root/build-cuda" -j "${JOBS:-1}" laya laya_tests || return 1
  rm -rf "$dest" && mkdir -p "$dest/fx/ref-models/common" || return 1
  # The binaries and the shared libraries they load (bench/device_pkg.sh): libstdc++ / libgcc_s
  # apart, since tools there (compute-sanitizer) need the device's own.
  pkg_pack "$dest" "$root/build-cuda/laya" "$root/build-cuda/tests/laya_tests" || return 1
  cp "$here/../device_pkg.sh" "$dest/"
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
  cp -r /work/shared/fixtures/traces "$dest/traces"
  # The mlx step's fixture (tests/mlx_quant_test.cpp quantizes llama-tiny's float folder there):
  # the folder xz-packed (12 -> 4.4 MB) and the float, Q8_0 and Q4_0 reference logits.
  if [ "${STAGE_MLX:-1}" = 1 ]; then
    tar -C "$fx" -cf - llama-tiny/hf/config.json llama-tiny/hf/model.safetensors | xz -9 -T2 >"$dest/fx-mlx.tar.xz"
    cp "$fx"/llama-tiny/ref/logits_{,q8_0_,Q4_0_}p[0-9].npy "$dest/fx/ref-models/llama-tiny/ref/"
  fi
  # llama.cpp's sources for the comparison (its CUDA build there): the core, ggml's CPU and CUDA
  # backends and llama-bench alone (tools/CMakeLists.txt replaced by that one line).
  local peer="${PEER_SRC:-$HOME/peers/llama.cpp}"
  if [ -d "$peer/ggml/src/ggml-cuda" ]; then
    local t; t=$(mktemp -d)
    (cd "$peer" && tar cf - --exclude='ggml/src/ggml-'{vulkan,sycl,metal,cann,opencl,hexagon,webgpu,openvino,zdnn,zendnn,et,virtgpu} \
        ggml src include common vendor cmake CMakeLists.txt LICENSE tools/llama-bench tools/server tools/ui tools/mtmd scripts/ui-assets.cmake) |
      tar -C "$t" -xf -
    printf 'add_subdirectory(llama-bench)\nadd_subdirectory(ui)\nadd_subdirectory(mtmd)\nadd_subdirectory(server)\n' >"$t/tools/CMakeLists.txt"
    tar -C "$t" -czf "$dest/llama-src.tar.gz" . && rm -rf "$t"
    (cd "$peer" && git log -1 --format='%H %s') >"$dest/llama-commit.txt" 2>/dev/null
  fi
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
  local out="${OUT:-$PWD/out}" steps="${STEPS:-tests logits bench sweep peer replay profile sanitize}"
  mkdir -p "$out" || return 1
  local laya="$PWD/pkg/laya" tests="$PWD/pkg/laya_tests"
  pkg_unpack "$PWD" "$tests" --gtest_list_tests || return 1
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
  "$tests" --gtest_list_tests >/dev/null || return 1
  # llama.cpp's CUDA build, in the background while laya's steps use the GPU.
  local peer_pid=""
  if [[ " $steps " == *" peer "* ]] && [ -f llama-src.tar.gz ]; then
    mkdir -p /tmp/llama && tar -C /tmp/llama -xzf llama-src.tar.gz
    # Native CPU code (this machine's AVX-512 VNNI): the same binaries serve bench/families_device.sh's
    # CPU comparison in the next call (CUDA_VISIBLE_DEVICES= there), llama-server included.
    (cd /tmp/llama && cmake -B b -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
        -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_APP=OFF >/tmp/llama-build.log 2>&1 &&
      nice -n 5 ninja -C b -j "${PEER_JOBS:-12}" llama-bench llama-server >>/tmp/llama-build.log 2>&1) &
    peer_pid=$!
  fi
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
  if [[ " $steps " == *" families "* ]]; then
    echo "== model families (issue 30) through the engine on cuda: transformers' float32 logits, the CPU's tolerances"
    # The family fixtures are in the tracked tree (tests/fixtures/families), where the test binary looks.
    LAYA_TEST_BACKEND=cuda timeout "${FAMILIES_S:-150}" "$tests" \
      --gtest_filter='Families/FamilyLogits.*:CudaPersistent.StepsWithOtherOps*' \
      >"$out/families.log" 2>&1
    echo "rc $?"; grep -E '^\[ +(measure|PASSED|FAILED|SKIPPED) |rel L2' "$out/families.log" | tail -30
  fi
  if [[ " $steps " == *" bench "* ]]; then
    echo "== decode on random-weight models (mkmodel here: a 1-2.5 GB file cannot be carried)"
    local t m f g
    for m in ${MODELS:-llama-3.2-1b qwen2.5-0.5b}; do
      for t in ${TYPES:-BF16 Q8_0 Q4_K_M}; do
        f="/tmp/$m-$t.gguf"
        [ -f "$f" ] || timeout 120 "$laya" mkmodel --preset "$m" --type "$t" -o "$f" -q || continue
        # Decode steps replayed as CUDA graphs (the default), then (1B Q8_0 only) issued op by op.
        for g in ${GRAPHS:-1 0}; do
          [ "$g" = 0 ] && [ "$m-$t" != llama-3.2-1b-Q8_0 ] && continue
          echo "-- $m $t graphs=$g" >>"$out/bench.log"
          LAYA_CUDA_GRAPHS=$g timeout "${BENCH_S:-60}" "$laya" bench -m "$f" --backend cuda -p 512 -n 256 \
            --warmup 32 --json >>"$out/bench.log" 2>&1
          echo "rc $? $m $t graphs=$g"; tail -n 1 "$out/bench.log" | cut -c1-400
        done
        if [ "$m-$t" = llama-3.2-1b-Q8_0 ]; then  # the same with programmatic dependent launch
          echo "-- $m $t pdl=1" >>"$out/bench.log"
          LAYA_CUDA_PDL=1 timeout "${BENCH_S:-60}" "$laya" bench -m "$f" --backend cuda -p 512 -n 256 --warmup 32 --json >>"$out/bench.log" 2>&1
          echo "rc $? $m $t pdl=1"; tail -n 1 "$out/bench.log" | cut -c1-400
        fi
      done
    done
  fi
  if [[ " $steps " == *" sweep "* ]]; then
    echo "== decode variants (the tuning knobs of matmul.cu / cuda_backend.cpp), -p 512 -n 128"
    local f v t
    for t in ${SWEEP_TYPES:-Q8_0 BF16}; do
      f="/tmp/llama-3.2-1b-$t.gguf"
      [ -f "$f" ] || timeout 120 "$laya" mkmodel --preset llama-3.2-1b --type "$t" -o "$f" -q || continue
      for v in ${SWEEP_VARIANTS:-default LAYA_CUDA_STREAM=0 LAYA_CUDA_STREAM_BLOCKS=1 LAYA_CUDA_STREAM_BLOCKS=2 \
               LAYA_CUDA_STREAM_BLOCKS=4 LAYA_CUDA_PDL=1 LAYA_CUDA_PINNED=0 LAYA_CUDA_ATTN_SPLIT=1 LAYA_CUDA_ATTN_SPLIT=4 LAYA_CUDA_ATTN_SPLIT=16}; do
        [ "$t" = BF16 ] && [[ "$v" == *ATTN* ]] && continue
        echo "$t $v: $(env ${v/default/LAYA_SWEEP=1} timeout 40 "$laya" bench -m "$f" --backend cuda -p 512 -n 128 --warmup 16 --json 2>&1 |
          grep -o '"decode_ms_p50": [0-9.]*\|"decode_ms_p99": [0-9.]*' | tr '\n' ' ')" | tee -a "$out/sweep.log"
      done
    done
  fi
  if [[ " $steps " == *" replay "* ]]; then
    echo "== keystroke -> 8-token suggestion on the public traces, 1B Q8_0 on cuda"
    local f=/tmp/llama-3.2-1b-Q8_0.gguf o
    [ -f "$f" ] || timeout 120 "$laya" mkmodel --preset llama-3.2-1b --type Q8_0 -o "$f" -q
    for o in ${REPLAY_MODES:---fast}; do
      local tr="traces/*.jsonl traces/long/*.jsonl"
      # At a person's pace: the first 200 events of each trace (cut-traces/, ~130 s at 300 ms a pause).
      [[ "$o" == *pace* ]] && [ -d cut-traces ] && tr="cut-traces/*.jsonl"
      timeout "${REPLAY_S:-120}" "$laya" replay -m "$f" --backend cuda ${o//=/ } -q $tr \
        --json "$out/replay${o//[^a-z0-9]/}.json" >>"$out/replay.log" 2>&1
      echo "rc $? replay $o"; tail -n 12 "$out/replay.log"
    done
    timeout "${REPLAY_S:-120}" "$laya" replay -m "$f" --backend cuda --fast --verify -q traces/*.jsonl >>"$out/replay.log" 2>&1
    echo "rc $? replay --verify"; tail -n 6 "$out/replay.log"
  fi
  if [[ " $steps " == *" profile "* ]]; then
    echo "== where a decode step's time goes: ncu kernel durations, 1B Q8_0, ops issued one by one"
    local f=/tmp/llama-3.2-1b-Q8_0.gguf
    [ -f "$f" ] || timeout 120 "$laya" mkmodel --preset llama-3.2-1b --type Q8_0 -o "$f" -q
    # Skip the prefill and warm-up launches; then 8 decode steps' kernels.
    LAYA_CUDA_GRAPHS=0 timeout "${PROFILE_S:-120}" ncu --clock-control none --metrics gpu__time_duration.sum --csv \
      --launch-skip "${PROFILE_SKIP:-1200}" --launch-count "${PROFILE_COUNT:-800}" \
      "$laya" bench -m "$f" --backend cuda -p 16 -n 24 --warmup 4 >"$out/ncu.csv" 2>"$out/ncu.err"
    echo "rc $?"
    python3 - "$out/ncu.csv" <<'PY' | tee "$out/profile.txt"
import csv, sys, collections, re
rows = [r for r in csv.reader(open(sys.argv[1], errors="replace")) if len(r) > 10]
if not rows: print("no ncu rows"); sys.exit()
h = rows[0]; ki = h.index("Kernel Name"); vi = h.index("Metric Value"); ui = h.index("Metric Unit")
tot = collections.Counter(); cnt = collections.Counter()
for r in rows[1:]:
    name = re.sub(r"\(.*", "", r[ki]).replace("void ", "")[:60]
    v = float(r[vi].replace(",", "")); u = r[ui]
    v = v / 1000.0 if u in ("nsecond", "ns") else v if u in ("usecond", "us") else v * 1000.0 if u in ("msecond", "ms") else v * 1e6
    tot[name] += v; cnt[name] += 1
all_us = sum(tot.values())
print(f"{sum(cnt.values())} kernels, {all_us:.0f} us of kernel time")
for n, v in tot.most_common(14): print(f"{v / all_us * 100:5.1f} %  {v / cnt[n]:8.2f} us x {cnt[n]:4d}  {n}")
PY
  fi
  if [[ " $steps " == *" detail "* ]]; then
    echo "== ncu sections (speed of light, memory, warp states, occupancy) for the decode matvec kernels"
    local f=/tmp/llama-3.2-1b-Q8_0.gguf v
    [ -f "$f" ] || timeout 120 "$laya" mkmodel --preset llama-3.2-1b --type Q8_0 -o "$f" -q
    for v in ${DETAIL_VARIANTS:-default}; do
      env ${v/default/LAYA_SWEEP=1} LAYA_CUDA_GRAPHS=0 timeout "${DETAIL_S:-150}" ncu --clock-control none \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy \
        --section LaunchStats --section SchedulerStats -k "regex:${DETAIL_KERNEL:-matvec}" \
        --launch-skip "${DETAIL_SKIP:-300}" --launch-count "${DETAIL_COUNT:-66}" \
        "$laya" bench -m "$f" --backend cuda -p 16 -n 24 --warmup 4 >"$out/detail-${v//[^A-Za-z0-9]/_}.txt" 2>&1
      echo "rc $? detail $v"
    done
  fi
  if [[ " $steps " == *" persist "* ]]; then
    echo "== the persistent decode kernel: the graph's bits, then decode with it on (default) and off"
    LAYA_FIXTURES="$PWD/fx" timeout "${PERSIST_TESTS_S:-120}" "$tests" --gtest_filter='CudaPersistent.*' >"$out/persist.log" 2>&1
    echo "rc $?"; grep -E '^\[ +(PASSED|FAILED|SKIPPED) |differs' "$out/persist.log" | head -20
    # The kernel runs Q8_0 weights with a Q8_0 cache only (persistent.cu says why); bench's cache is F32 by default.
    local t m f p pargs="${PERSIST_ARGS:---kv q8_0}"
    for m in ${PERSIST_MODELS:-llama-3.2-1b qwen2.5-0.5b}; do
      for t in ${PERSIST_TYPES:-Q8_0}; do
        f="/tmp/$m-$t.gguf"
        [ -f "$f" ] || timeout 120 "$laya" mkmodel --preset "$m" --type "$t" -o "$f" -q || continue
        # Each variant (environment assignments, comma-separated) in turn, PERSIST_ROUNDS times over.
        local r v
        for r in $(seq "${PERSIST_ROUNDS:-2}"); do
          for v in ${PERSIST_VARIANTS:-LAYA_CUDA_PERSISTENT=1 LAYA_CUDA_PERSISTENT=0}; do
            echo "$m $t $v: $(env ${v//,/ } timeout 60 "$laya" bench -m "$f" --backend cuda -p 512 -n 256 \
              --warmup 32 $pargs --json 2>&1 | grep -o '"decode_ms_p50": [0-9.]*\|"decode_ms_p99": [0-9.]*\|"step": "[^"]*"' | tr '\n' ' ')" |
              tee -a "$out/persist.log"
          done
        done
        # Where a step's time goes, instruction by instruction (clock64 in every block; each step
        # then waits for its clocks, so this run's own p50 is not the kernel's).
        if [ "${PERSIST_PROFILE:-1}" = 1 ]; then
          echo "-- $m $t profile" >>"$out/persist.log"
          LAYA_CUDA_PERSISTENT=1 LAYA_CUDA_PERSISTENT_PROFILE=1 timeout 60 "$laya" bench -m "$f" --backend cuda -p 512 \
            -n 128 --warmup 16 $pargs >>"$out/persist.log" 2>&1
          echo "rc $? profile $m $t"; tail -n 12 "$out/persist.log"
        fi
      done
    done
  fi
  if [[ " $steps " == *" psanitize "* ]]; then
    echo "== compute-sanitizer memcheck and racecheck on the persistent kernel (llama-tiny steps)"
    for tool in ${PSAN_TOOLS:-memcheck racecheck synccheck initcheck}; do
      LAYA_FIXTURES="$PWD/fx" timeout "${SANITIZE_S:-200}" compute-sanitizer --tool $tool --error-exitcode 9 "$tests" \
        --gtest_filter='CudaPersistent.Llama*' >"$out/persist-$tool.log" 2>&1
      echo "rc $? $tool"; grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' "$out/persist-$tool.log" | head -5
    done
  fi
  if [[ " $steps " == *" sanitize "* ]]; then
    echo "== compute-sanitizer memcheck (ops, KV, memory; the Q4_K and BF16 weight cases)"
    timeout "${SANITIZE_S:-200}" compute-sanitizer --tool memcheck --error-exitcode 9 "$tests" \
      --gtest_filter='*BackendConformance.*/cuda:*BackendConformanceWeights.*/cuda_Q4_K:*BackendConformanceWeights.*/cuda_BF16:*BackendConformanceWeights.*/cuda_Q8_0:-*MemoryAndErrors*' \
      >"$out/memcheck.log" 2>&1
    echo "rc $?"; grep -E 'ERROR SUMMARY|PASSED|FAILED|Error' "$out/memcheck.log" | head -20
  fi
  if [[ " $steps " == *" mlx "* ]]; then
    echo "== MLX-quantized weights on cuda (issue 30): conformance, per-row kernel, memcheck, llama-tiny logits, decode"
    local ml="$out/mlx.log"
    timeout "${MLX_TESTS_S:-120}" "$tests" --gtest_filter='*BackendConformanceMlx*cuda*' >>"$ml" 2>&1
    echo "rc $? conformance (streaming kernel)"
    LAYA_CUDA_STREAM=0 timeout "${MLX_TESTS_S:-120}" "$tests" --gtest_filter='*BackendConformanceMlx*cuda*' >>"$ml" 2>&1
    echo "rc $? conformance (LAYA_CUDA_STREAM=0: the per-row kernel)"
    grep -E '^\[ +(measure|PASSED|FAILED) ' "$ml" | grep -v ' OK ' | tail -40
    timeout "${MLX_SANITIZE_S:-150}" compute-sanitizer --tool memcheck --error-exitcode 9 "$tests" \
      --gtest_filter='*BackendConformanceMlx*cuda_MLX4:*BackendConformanceMlx*cuda_MLX8:*BackendConformanceMlx*cuda_MLX3' >>"$ml" 2>&1
    echo "rc $? memcheck"; grep -E 'ERROR SUMMARY' "$ml" | tail -3
    if [ -f fx-mlx.tar.xz ]; then
      tar -C fx/ref-models -xJf fx-mlx.tar.xz 2>/dev/null || python3 -c 'import tarfile; tarfile.open("fx-mlx.tar.xz").extractall("fx/ref-models")'
      LAYA_TEST_BACKEND=cuda LAYA_FIXTURES="$PWD/fx" timeout "${MLX_LOGITS_S:-120}" "$tests" \
        --gtest_filter='*MlxModel.LogitsWithinQuantizationError*:*MlxModel.ShardedFolder*' >>"$ml" 2>&1
      echo "rc $? llama-tiny MLX folders through the engine on cuda"; grep -E '^\[ +(measure|PASSED|FAILED) ' "$ml" | tail -10
    fi
    local m t f
    for m in ${MLX_MODELS:-qwen2.5-0.5b}; do
      for t in ${MLX_TYPES:-MLX4 Q4_0 MLX8 Q8_0}; do
        f="/tmp/$m-$t"; [[ "$t" == MLX* ]] || f="$f.gguf"
        [ -e "$f" ] || timeout 180 "$laya" mkmodel --preset "$m" --type "$t" -o "$f" -q || { echo "mkmodel $m $t failed"; continue; }
        echo "-- $m $t" >>"$ml"
        timeout "${BENCH_S:-60}" "$laya" bench -m "$f" --backend cuda -p 512 -n 256 --warmup 32 --json >>"$ml" 2>&1
        echo "rc $? $m $t: $(tail -n 1 "$ml" | grep -o '"decode_ms_p50": [0-9.]*\|"decode_ms_p99": [0-9.]*\|"decode_gb_s": [0-9.]*\|"prefill_tok_s": [0-9.]*' | tr '\n' ' ')"
      done
    done
  fi
  if [ -n "$peer_pid" ]; then
    echo "== llama.cpp CUDA ($(cat llama-commit.txt 2>/dev/null | cut -c1-12)), llama-bench, flash attention on, same files"
    # Waits for the build at most until PEER_DEADLINE_S seconds into the call, so the call ends in its limit.
    local t0=$SECONDS
    while kill -0 "$peer_pid" 2>/dev/null && ((SECONDS < ${PEER_DEADLINE_S:-420})); do sleep 2; done
    if kill -0 "$peer_pid" 2>/dev/null; then echo "llama.cpp build unfinished at ${PEER_DEADLINE_S:-420} s: skipped"; kill "$peer_pid"; fi
    echo "waited $((SECONDS - t0)) s for the llama.cpp build"; tail -n 2 /tmp/llama-build.log
    cp /tmp/llama-build.log "$out/peer-build.log"
    local t m f lb=/tmp/llama/b/bin/llama-bench
    for m in ${MODELS:-llama-3.2-1b qwen2.5-0.5b}; do
      for t in ${TYPES:-BF16 Q8_0 Q4_K_M}; do
        f="/tmp/$m-$t.gguf"; [ -f "$f" ] && [ -x "$lb" ] || continue
        echo "-- $m $t" >>"$out/peer.log"
        timeout 90 "$lb" -m "$f" -ngl 99 -fa 1 -p 512 -n 128 -r 2 -o jsonl >>"$out/peer.log" 2>>"$out/peer-build.log"
        echo "rc $? $m $t: $(tail -n 1 "$out/peer.log" | grep -o '"avg_ts": [0-9.]*')"
      done
    done
  fi
}

case "${1:-}" in
  stage) shift; stage "$@" ;;
  device) device ;;
  *) echo "usage: $0 stage [DEST] | device" >&2; exit 2 ;;
esac
