#!/usr/bin/env bash
# Issue 12's GPU measurements in one call: build, bandwidthTest's pattern per
# copy (devtools/probe_bwtest_pattern.cpp), the never-slower sweep
# (bench/run_pattern_sweep.sh), tensor.cpu() into fresh memory. $OUT set.
#   STEPS="probe hostprobe cuptiprobe sweep torch external tier pycuda" SWEEP_ARGS="--max-size 64M" ROUND=1
set -u
B=${B:-/tmp/b}
STEPS=${STEPS:-probe sweep torch}
# libunwind8 (what a Debian install of cuxfer recommends; the GPU image lacks
# it, and without it the shim falls back to glibc's much slower backtrace()).
if ls .debs/libunwind8_*.deb >/dev/null 2>&1; then
  mkdir -p /opt/uw && dpkg -x .debs/libunwind8_*.deb /opt/uw &&
    cp -a /opt/uw/usr/lib/x86_64-linux-gnu/libunwind.so.8* /usr/local/lib/ && ldconfig && echo "libunwind8 installed"
fi
export PATH=/usr/local/cuda/bin:$PATH
# PyCUDA builds from its sdist (~130 s of CPU): started first, beside the build.
case " $STEPS " in *" pycuda "*)
  (timeout 300 bash .ext/install_pycuda.sh > "$OUT/install_pycuda.log" 2>&1; echo "install rc=$?" >> "$OUT/install_pycuda.log") &
  PYCUDA_PID=$! ;;
esac
TIER_APPS=${TIER_APPS:-}  # GPU-tier test apps to build (step tier)
gpu_cfg=(-DCUXFER_BUILD_TESTS=OFF -DCUXFER_GPU_TESTS=OFF)
[ -n "$TIER_APPS" ] && gpu_cfg=(-DCUXFER_BUILD_TESTS=ON -DCUXFER_GPU_TESTS=ON -DCMAKE_CUDA_COMPILER=nvcc)
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUXFER_BUILD_BENCH=ON "${gpu_cfg[@]}" \
  -DPython3_EXECUTABLE="$(command -v python3)" > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
cmake --build "$B" -j16 --target cuxfer pattern_sweep $TIER_APPS > "$OUT/build.log" 2>&1 ||
  { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -40; exit 1; }
g++ -O2 -std=c++17 -I/usr/local/cuda/include devtools/probe_bwtest_pattern.cpp -L/usr/local/cuda/lib64 -lcudart \
  -Wl,-rpath,/usr/local/cuda/lib64 -o "$B/probe" || exit 1
SHIM="$B/lib/libcuxfer.so"
HOOKS="$B/lib/libcuxfer_memhooks.so"
CUX="$B/bin/cuxfer"
mkdir -p /tmp/tr
for step in $STEPS; do
  case $step in
  probe)
    for round in $(seq "${PROBE_ROUNDS:-1}"); do
      echo "== plain"; timeout 200 "$B/probe" 4M 32M 68M | sed 's/^/plain /'
      echo "== appreg"; timeout 200 "$B/probe" --appreg 4M 32M 68M | sed 's/^/appreg /'
      echo "== rewrite"; timeout 200 "$CUX" record -q -o /tmp/tr --rewrite=pin -- "$B/probe" 4M 32M 68M | sed 's/^/rewrite /'
      echo "== rewrite_nocupti"; timeout 200 "$CUX" record -q -o /tmp/tr --cupti=off --rewrite=pin -- "$B/probe" 4M 32M 68M | sed 's/^/rewrite_nocupti /'
    done 2>&1 | tee "$OUT/probe.log" | grep -E "==|size=" ;;
  hostprobe)  # what kind of host memory the pattern's DMA wants (probe --host)
    cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag 2>&1 | sed 's/^/thp /'
    for round in $(seq "${PROBE_ROUNDS:-2}"); do
      for h in pageable appreg collapse huge pinned; do
        echo "== $h"; timeout 100 "$B/probe" --host $h 4M 32M 68M | sed "s/^/$h /"
      done
      echo "== rewrite"; timeout 100 "$CUX" record -q -o /tmp/tr --rewrite=pin -- "$B/probe" 4M 32M 68M | sed 's/^/rewrite /'
    done 2>&1 | tee "$OUT/hostprobe.log" | grep -E "==|size=|collapse|thp" ;;
  cuptiprobe)  # what CUPTI's activity tracing adds per copy, per setting, without cuxfer
    CUPTI_LIB=$(dirname "$(find /usr/local/cuda/ -name 'libcupti.so' | head -1)")
    g++ -O2 -std=c++17 -I/usr/local/cuda/include -I/usr/local/cuda/extras/CUPTI/include devtools/probe_cupti_cost.cpp \
      -L/usr/local/cuda/lib64 -L"$CUPTI_LIB" -lcupti -lcudart -Wl,-rpath,/usr/local/cuda/lib64:"$CUPTI_LIB" -o "$B/pcc" || exit 1
    for round in $(seq "${PROBE_ROUNDS:-2}"); do
      for m in none memcpy memcpy_memset memcpy_ts memcpy_hostbuf memcpy_sharedbuf memcpy_flushperiod; do
        timeout 60 "$B/pcc" $m 200
      done
    done 2>&1 | tee "$OUT/cuptiprobe.log" | tail -3 ;;
  sweep)
    timeout 420 bash bench/run_pattern_sweep.sh --build-dir "$B" --gpu --rounds 1 --first-round "${ROUND:-1}" \
      --modes "${SWEEP_MODES:-baseline,observe,rewrite}" ${SWEEP_ARGS:-} --raw "$OUT/sweep-r${ROUND:-1}.txt" \
      > "$OUT/sweep.log" 2>&1; echo "sweep rc=$?"; tail -60 "$OUT/sweep.log" ;;
  external)  # NVIDIA's cuda-samples from the ignored .ext/ (devtools/gpu_external.sh)
    export PATH=/usr/local/cuda/bin:$PATH
    CUXFER="$CUX" ROUNDS=${EXT_ROUNDS:-1} DEADLINE=${EXT_DEADLINE:-200} timeout 330 bash devtools/gpu_external.sh /tmp/ext \
      --tar "$OUT/external.tgz"; echo "external rc=$?"; cat /tmp/ext/summary.txt 2>/dev/null | tail -60 ;;
  tier)  # the GPU-tier tests named by TIER_TESTS (a ctest -R regex), apps from TIER_APPS
    timeout 400 ctest --test-dir "$B" -L gpu -R "${TIER_TESTS:-gpu.rewrite_exactness}" --output-on-failure \
      > "$OUT/tier.log" 2>&1; echo "tier rc=$?"; grep -E "Test +#|tests passed|FAIL" "$OUT/tier.log" | tail -30 ;;
  pycuda)  # PyCUDA from its sdist carried in .whl/ (.ext/install_pycuda.sh, started above)
    export PYTHONUNBUFFERED=1
    wait "$PYCUDA_PID"; tail -2 "$OUT/install_pycuda.log"
    PYTHONPATH=/tmp/site timeout 240 python3 tests/gpu/frameworks/pycuda_trial.py --cuxfer "$CUX" --bar 0.90 \
      --summary "$OUT/trial_pycuda.json" > "$OUT/trial_pycuda.log" 2>&1; echo "pycuda trial rc=$?"
    tail -40 "$OUT/trial_pycuda.log" ;;
  torch)
    for round in 1 2; do
      echo "plain: $(timeout 120 python3 devtools/torch_cpu_fresh.py 2>&1 | tail -1)"
      echo "rewrite: $(timeout 120 "$CUX" record -q -o /tmp/tr --rewrite=pin -- python3 devtools/torch_cpu_fresh.py 2>&1 | tail -1)"
    done 2>&1 | tee "$OUT/torch.log" ;;
  esac
done
