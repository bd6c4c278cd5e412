#!/usr/bin/env bash
# Issue 12's GPU measurements in one call: build, bandwidthTest's pattern per
# copy (devtools/probe_bwtest_pattern.cpp), the never-slower sweep
# (bench/run_pattern_sweep.sh), tensor.cpu() into fresh memory. $OUT set.
#   STEPS="probe diag gate storm torchstep torchdiag hostprobe cuptiprobe sweep torch trial external tier pycuda" SWEEP_ARGS="--max-size 64M" ROUND=1
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
cmake --build "$B" -j16 --target cuxfer pattern_sweep call_overhead $TIER_APPS > "$OUT/build.log" 2>&1 ||
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
  diag)  # bandwidthTest's pattern under the shim with one cost at a time taken away (subtraction)
    for round in $(seq "${PROBE_ROUNDS:-2}"); do
      for v in ${DIAG_VARIANTS:-pinned appreg obs_appreg obs_appreg_nocupti rw rw_nocupti rw_bare rw_stageonly}; do
        echo "== $v"
        case $v in
          pinned|appreg) timeout 100 "$B/probe" --host $v 4M 32M 68M ;;
          obs_appreg) timeout 100 "$CUX" record -q -o /tmp/tr -- "$B/probe" --host appreg 4M 32M 68M ;;
          obs_appreg_on) timeout 100 "$CUX" record -q -o /tmp/tr --cupti=on -- "$B/probe" --host appreg 4M 32M 68M ;;
          rw_on) timeout 100 "$CUX" record -q -o /tmp/tr --rewrite=pin --cupti=on -- "$B/probe" 4M 32M 68M ;;
          obs_appreg_nocupti) timeout 100 "$CUX" record -q -o /tmp/tr --cupti=off -- "$B/probe" --host appreg 4M 32M 68M ;;
          rw) timeout 100 "$CUX" record -q -o /tmp/tr --rewrite=pin -- "$B/probe" 4M 32M 68M ;;
          rw_nocupti) timeout 100 "$CUX" record -q -o /tmp/tr --rewrite=pin --cupti=off -- "$B/probe" 4M 32M 68M ;;
          rw_bare) CUXFER_FINGERPRINT=0 CUXFER_PYTHON_STACKS=0 timeout 100 "$CUX" record -q -o /tmp/tr --rewrite=pin \
                     --cupti=off --no-stacks -- "$B/probe" 4M 32M 68M ;;
          rw_stageonly) CUXFER_REGISTER=off timeout 100 "$CUX" record -q -o /tmp/tr --rewrite=pin -- "$B/probe" 4M 32M 68M ;;
        esac 2>&1 | sed "s/^/$v /"
      done
    done 2>&1 | tee "$OUT/diag.log" | grep -E "size=" | awk '{print $1, $2, $3, $5, $6, $8}' ;;
  storm)  # a 4-byte copy storm per copy case, plain and under the shim per CUPTI mode (bench/run_call_overhead.sh)
    timeout 200 bash bench/run_call_overhead.sh --build-dir "$B" --gpu -n "${STORM_N:-200000}" --rounds "${STORM_ROUNDS:-3}" \
      --modes "${STORM_MODES:-baseline shim_d16 cupti_on cupti_off}" > "$OUT/storm.log" 2>&1; echo "storm rc=$?"; tail -18 "$OUT/storm.log" ;;
  torchstep)  # a PyTorch training loop, plain and recorded per CUPTI mode (bench/run_torch_step.sh)
    timeout 240 bash bench/run_torch_step.sh --build-dir "$B" --rounds "${TORCH_ROUNDS:-3}" > "$OUT/torchstep.log" 2>&1
    echo "torchstep rc=$?"; tail -8 "$OUT/torchstep.log" ;;
  torchdiag)  # which part of the shim a PyTorch training step pays (subtraction), and the governor's doing
    for round in $(seq "${TORCH_ROUNDS:-2}"); do
      for v in plain auto auto_nopy auto_nostacks off_bare; do
        case $v in
          plain) line=$(timeout 60 python3 bench/torch_step.py 2>&1 | tail -1) ;;
          auto) line=$(timeout 60 "$CUX" record -q -o /tmp/tt -- python3 bench/torch_step.py 2>&1 | tail -1) ;;
          auto_nopy) line=$(CUXFER_PYTHON_STACKS=0 timeout 60 "$CUX" record -q -o /tmp/tt -- python3 bench/torch_step.py 2>&1 | tail -1) ;;
          auto_nostacks) line=$(CUXFER_PYTHON_STACKS=0 timeout 60 "$CUX" record -q --no-stacks -o /tmp/tt -- python3 bench/torch_step.py 2>&1 | tail -1) ;;
          off_bare) line=$(CUXFER_PYTHON_STACKS=0 CUXFER_FINGERPRINT=0 timeout 60 "$CUX" record -q --no-stacks --cupti=off -o /tmp/tt -- python3 bench/torch_step.py 2>&1 | tail -1) ;;
        esac
        echo "round=$round mode=$v $line"
        [ "$v" = auto ] && [ "$round" = 1 ] && "$CUX" report /tmp/tt/*.trace 2>&1 | grep -A3 "GPU time:" | head -4
        [ "$v" = auto ] && [ "$round" = 1 ] && "$CUX" report /tmp/tt/*.trace 2>&1 | sed -n '/^Call sites/,/^$/p' | head -12
        rm -rf /tmp/tt
      done
    done 2>&1 | tee "$OUT/torchdiag.log" ;;
  gate)  # the governor in bandwidthTest's pattern: what the report says of GPU time
    timeout 60 "$B/probe" --host appreg 4M 32M | grep size= | awk '{print "plain", $1, $2, $4, $5, $7}'
    timeout 60 "$CUX" record -q -o /tmp/tg -- "$B/probe" --host appreg 4M 32M | grep size= | awk '{print "auto", $1, $2, $4, $5, $7}'
    "$CUX" report /tmp/tg/*.trace 2>&1 | grep -A3 "GPU time:" | head -4; rm -rf /tmp/tg
    timeout 60 "$CUX" record -q -o /tmp/tg --cupti=off -- "$B/probe" --host appreg 4M 32M | grep size= | awk '{print "off", $1, $2, $4, $5, $7}'
    rm -rf /tmp/tg ;;
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
  trial)  # the framework production trials (tests/gpu/frameworks/trial.py) for $TRIALS
    for fw in ${TRIALS:-torch cupy}; do
      prof=""; [ "$fw" = torch ] && prof=--profile
      (cd tests/gpu/frameworks && timeout 300 python3 trial.py --cuxfer "$CUX" --framework "$fw" $prof \
        --summary "$OUT/trial_$fw.json" > "$OUT/trial_$fw.log" 2>&1; echo "trial $fw rc=$?")
      tail -25 "$OUT/trial_$fw.log"
    done ;;
  torch)
    for round in 1 2; do
      echo "plain: $(timeout 120 python3 devtools/torch_cpu_fresh.py 2>&1 | tail -1)"
      echo "rewrite: $(timeout 120 "$CUX" record -q -o /tmp/tr --rewrite=pin -- python3 devtools/torch_cpu_fresh.py 2>&1 | tail -1)"
    done 2>&1 | tee "$OUT/torch.log" ;;
  esac
done
