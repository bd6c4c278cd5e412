#!/usr/bin/env bash
# Issue 13's GPU measurements, and the GPU tier, in as few device calls as the
# 10-minute limit allows. Run from the repository root with $OUT set:
#   STEPS="tier" bash devtools/gpu_issue13.sh                   # build all, PyCUDA beside it, ctest -L gpu
#   STEPS="pystacks storm torchloop jax" bash devtools/gpu_issue13.sh
# Steps:
#   tier       the GPU tier (ctest -L gpu -j$TIER_JOBS, default 3; TIER_TESTS: a -R regex,
#              TIER_EXCLUDE: a -E regex; PyCUDA from .whl/ when carried)
#   pystacks   bench/python_stacks.py at 10 and 50 Python frames, on the simulated
#              runtime (the shim's own cost) and on the real one
#   storm      bench/run_call_overhead.sh: a 4-byte copy storm per copy case,
#              plain, the shim without stacks, with stacks and CUPTI off, and default
#   storminproc  the storm in-process (bench/run_call_overhead.sh --toggle STORMIN_BLOCK, default
#              5000 calls a block): recorded and unrecorded blocks of one process
#              (CUXFER_CAPTURE_RANGE=cudaProfilerApi), STORMIN_MODES (default "baseline capture
#              capture_nocupti"; baseline is the in-process A/A), STORMIN_ROUNDS (3), STORMIN_N
#              (100000) calls a case; STORM_SHIM_B: another build's libcuxfer.so for b_* modes
#   torchloop  bench/run_torch_step.sh: a PyTorch training loop, plain (twice: an A/A
#              control) and default `cuxfer record`, interleaved, on TORCH_CPUS (2-9)
#   torchinproc  bench/run_torch_inprocess.sh: the training loop's recorded and unrecorded blocks
#              in one process (--capture-range=cudaProfilerApi), plain and whole-run controls
#   bigbatch   the loop with few, large copies (--batch BIG_BATCH, default 8192: ~15 ms a step,
#              the copies' records affordable): BIG_ROUNDS (2) whole-run recordings of BIG_STEPS
#              (300) steps per shim (this tree's, and INPROC_BASE's when set), each with its
#              copy_records and CUPTI note; then the in-process A/B on it (BIG_MODES, default
#              "capture capture_nocupti", plus capture_base with INPROC_BASE; BIG_INPROC_STEPS 400,
#              blocks of 25)
#   overheadnote  the shim's own account of its cost (the trace's "overhead:" note) on the
#              storm and on the training loop
#   overheadparts  the same note on the training loop with one part of the recording off at a
#              time (fingerprints, Python stacks, all stacks, the .eh_frame walk, CUPTI), and the
#              trace's call-stack note (how many stacks the fallback unwinder took)
#   declinewhere  where the .eh_frame walk declines on the training loop: the FDE and code
#              at the first declined return address the trace's note names
#   jax        the JAX production trial (tests/gpu/frameworks/trial.py)
#   detachnote a default recording of the storm: how often CUPTI was detached and attached
#              again, and what that cost the writer thread (the trace's note)
#   cuptiprobe devtools/probe_cupti_cost.cpp: a 4-byte copy without CUPTI, with memcpy records,
#              with them disabled after use, and with CUPTI finalized (PROBE_ROUNDS, interleaved)
#   external   NVIDIA's cuda-samples from the ignored .ext/ (devtools/gpu_external.sh): every
#              sample plain, observed and rewritten, and bandwidthTest pageable vs pinned under
#              --rewrite=pin (EXT_ROUNDS, default 2; EXT_DEADLINE, default 300 s)
#   sweep      bench/run_pattern_sweep.sh, one round (SWEEP_ROUND, SWEEP_MODES, SWEEP_ARGS)
#   smallparts a 4-byte copy (pattern_sweep, size=4, reused, pinned and reused_memset host buffers,
#              cudaMemcpy and cudaMemcpyAsync+sync on the legacy and an idle stream) with no shim, the shim loaded but disabled,
#              observe (CUPTI off) with one part off at a time, and the default; SMALL_ROUNDS
#              interleaved rounds (default 3), the median call per variant, and the trace's
#              overhead note of the last round
#   coldcall   bench/run_call_overhead.sh --evict: a 4-byte copy storm where every call
#              follows a write of an unrelated COLD_MIB (256) MiB buffer (caches and TLBs
#              cold), no shim vs the shim's modes (COLD_MODES), COLD_N calls, COLD_ROUNDS rounds
#   coldab     coldcall with the session's start commit's shim beside this tree's (A/B in
#              one process order: modes b_*; the base is built from `git archive HEAD` of the
#              remote .git, which is the session's start commit) and a warm storm the same way
#   torchab    bench/torch_step.py under `cuxfer record`, this tree's shim and the base's
#              (--shim), TORCHAB_ROUNDS interleaved rounds: the trace's overhead note each
#   sigterm    the training loop under `cuxfer record`, sent SIGTERM mid-step (SIGTERM_AFTER s, default 2, after its
#              trace file appears: a fixed delay from the start fired before `import torch` ended on
#              one host),
#              SIGTERM_ROUNDS (3) times with the shim's handler and with CUXFER_FINISH_ON_SIGNAL=0:
#              the time from the signal to the launcher's exit, whether the trace is complete, and
#              the launcher's line (interpose/signal_hooks.cpp: the writer flushes CUPTI while the
#              app's thread waits in the handler, at most 2 s)
#   unwindverify  real programs under CUXFER_UNWINDER=verify (every stack taken by the
#              .eh_frame walk and by libunwind, differences counted): the PyTorch,
#              CuPy and JAX workloads, and NVIDIA's samples when .ext/ is carried
set -u
B=${B:-/tmp/b}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
STEPS=${STEPS:-tier}
source devtools/gpu_env.sh
export PATH=/usr/local/cuda/bin:$PATH
case " $STEPS " in *" tier "*)
  if [ -d .whl ] && [ -f .ext/install_pycuda.sh ]; then
    (timeout 300 bash .ext/install_pycuda.sh > "$OUT/install_pycuda.log" 2>&1; echo "install rc=$?" >> "$OUT/install_pycuda.log") &
    PYCUDA_PID=$!
  fi ;;
esac
t0=$(date +%s)
case " $STEPS " in
  *" tier "*) gpu_configure_build ;;
  *) gpu_configure_build cuxfer call_overhead pattern_sweep simcuda_runtime simcuda_driver ;;
esac
echo "== built in $(( $(date +%s) - t0 )) s: $(git log -1 --format=%h 2>/dev/null || echo '?'), $(nvidia-smi -L | head -1)"
CUX="$B/bin/cuxfer"
SHIM="$B/lib/libcuxfer.so"
BASE_SHIM=/tmp/base/build/lib/libcuxfer.so
case " $STEPS " in *" coldab "* | *" torchab "*)
  t1=$(date +%s)
  rm -rf /tmp/base && mkdir -p /tmp/base && git archive HEAD | tar x -C /tmp/base &&
    (cd /tmp/base && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUXFER_BUILD_TESTS=OFF \
       -DCUXFER_BUILD_BENCH=OFF > "$OUT/base_configure.log" 2>&1 && ninja -C build cuxfer_shim cuxfer_memhooks > "$OUT/base_build.log" 2>&1)
  echo "== base shim ($(git log -1 --format=%h HEAD)) built in $(( $(date +%s) - t1 )) s: $(ls -l $BASE_SHIM 2>&1 | awk '{print $5}') bytes" ;;
esac
for step in $STEPS; do
  case $step in
  tier)
    [ -n "${PYCUDA_PID:-}" ] && { wait "$PYCUDA_PID"; tail -2 "$OUT/install_pycuda.log"; }
    (cd "$B" && PYTHONPATH=/tmp/site timeout "${CTEST_TIMEOUT:-400}" ctest -L gpu ${TIER_TESTS:+-R "$TIER_TESTS"} ${TIER_EXCLUDE:+-E "$TIER_EXCLUDE"} \
      --output-on-failure -j"${TIER_JOBS:-3}" \
      > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?")
    grep -E "tests passed|\*\*\*|Skipped|Total Test" "$OUT/ctest.log" | head -30
    grep -E "^bar|PyCUDA, median" -A6 "$OUT/ctest.log" | head -20 ;;
  pystacks)
    REAL=$(ls /usr/local/cuda/lib64/libcudart.so.13 2>/dev/null | head -1)
    for rt in "$B/simcuda/lib/libcudart.so" "$REAL"; do
      for d in 10 50; do
        echo "== $(basename "$(dirname "$(dirname "$rt")")")/$(basename "$rt") depth=$d"
        timeout 120 python3 bench/python_stacks.py --shim "$SHIM" --libcudart "$rt" --calls 100000 --depth $d \
          --rounds 7 --check 2>&1 | tail -1
      done
    done 2>&1 | tee "$OUT/pystacks.log" ;;
  storm)
    timeout "${STORM_TIMEOUT:-240}" ${STORM_CPU:+taskset -c "$STORM_CPU"} bash bench/run_call_overhead.sh --build-dir "$B" --gpu -n "${STORM_N:-200000}" \
      --rounds "${STORM_ROUNDS:-3}" --modes "${STORM_MODES:-baseline shim_d0 cupti_off shim_d16}" \
      > "$OUT/storm.log" 2>&1; echo "storm rc=$?"; tail -16 "$OUT/storm.log" ;;
  storminproc)
    timeout "${STORMIN_TIMEOUT:-240}" ${STORM_CPU:+taskset -c "$STORM_CPU"} bash bench/run_call_overhead.sh --build-dir "$B" --gpu \
      -n "${STORMIN_N:-100000}" --toggle "${STORMIN_BLOCK:-5000}" --rounds "${STORMIN_ROUNDS:-3}" \
      --modes "${STORMIN_MODES:-baseline capture capture_nocupti}" ${STORM_SHIM_B:+--shim-b "$STORM_SHIM_B"} > "$OUT/storminproc.log" 2>&1
    echo "storminproc rc=$?"; grep -A8 "^in-process" "$OUT/storminproc.log"; grep -A8 "^per-call ns" "$OUT/storminproc.log" ;;
  torchloop)
    # Several cores (TORCH_CPUS): on one, the shim's writer thread would
    # take its time from the training thread's.
    timeout "${TORCH_TIMEOUT:-300}" taskset -c "${TORCH_CPUS:-2-9}" bash bench/run_torch_step.sh --build-dir "$B" \
      --rounds "${TORCH_ROUNDS:-6}" --modes "${TORCH_MODES:-plain plain_again auto}" -- --steps "${TORCH_STEPS:-2000}" \
      > "$OUT/torchloop.log" 2>&1
    echo "torchloop rc=$?"; tail -7 "$OUT/torchloop.log" ;;
  torchinproc)
    # The in-process A/B (bench/run_torch_inprocess.sh): recorded and
    # unrecorded blocks of one process, on TORCH_CPUS (2-9).
    timeout "${INPROC_TIMEOUT:-300}" taskset -c "${TORCH_CPUS:-2-9}" bash bench/run_torch_inprocess.sh --build-dir "$B" \
      --rounds "${INPROC_ROUNDS:-4}" --modes "${INPROC_MODES:-plain capture whole}" ${INPROC_BASE:+--base-shim "$INPROC_BASE"} \
      -- --steps "${INPROC_STEPS:-4000}" --block "${INPROC_BLOCK:-100}" > "$OUT/torchinproc.log" 2>&1
    echo "torchinproc rc=$?"; tail -16 "$OUT/torchinproc.log" ;;
  bigbatch)
    shims=("$SHIM"); [ -n "${INPROC_BASE:-}" ] && shims+=("$INPROC_BASE")
    for r in $(seq "${BIG_ROUNDS:-2}"); do
      for sh in "${shims[@]}"; do
        rm -rf /tmp/big
        timeout 120 taskset -c "${TORCH_CPUS:-2-9}" "$CUX" record -q --shim "$sh" -o /tmp/big -- python3 bench/torch_step.py \
          --steps "${BIG_STEPS:-300}" --block 25 --batch "${BIG_BATCH:-8192}" > "$OUT/big.log" 2>&1
        echo "== $sh: $(tail -1 "$OUT/big.log")"
        # One file back, not a folder: \$OUT must stay a few files (the logs).
        [ "$sh" = "$SHIM" ] && tar czf "$OUT/big_trace_$r.tgz" -C /tmp big
        "$CUX" report --json /tmp/big 2>/dev/null | python3 -c '
import json, sys
p = json.load(sys.stdin)["processes"][0]
print("   copy_records:", json.dumps(p["cupti"].get("copy_records")))
for n in p.get("notes", []):
    if n.startswith("cupti:"): print("  ", n)'
      done
    done 2>&1 | tee "$OUT/bigbatch.log"
    modes="${BIG_MODES:-capture capture_nocupti}"; [ -n "${INPROC_BASE:-}" ] && modes="$modes capture_base"
    timeout "${BIG_TIMEOUT:-200}" taskset -c "${TORCH_CPUS:-2-9}" bash bench/run_torch_inprocess.sh --build-dir "$B" \
      --rounds "${BIG_INPROC_ROUNDS:-2}" --modes "$modes" ${INPROC_BASE:+--base-shim "$INPROC_BASE"} \
      -- --steps "${BIG_INPROC_STEPS:-400}" --block 25 --batch "${BIG_BATCH:-8192}" > "$OUT/biginproc.log" 2>&1
    echo "biginproc rc=$?"; tail -14 "$OUT/biginproc.log" ;;
  cuptiprobe)
    g++ -O2 -std=c++17 -I/usr/local/cuda/include -I/usr/local/cuda/extras/CUPTI/include devtools/probe_cupti_cost.cpp \
      -L/usr/local/cuda/lib64 -L/usr/local/cuda/extras/CUPTI/lib64 -L/usr/local/cuda/lib64/stubs -Wl,-rpath,/usr/local/cuda/extras/CUPTI/lib64 \
      -lcudart -lcuda -lcupti -o "$B/probe_cupti_cost" || echo "probe build failed"
    for r in $(seq "${PROBE_ROUNDS:-5}"); do
      for m in none memcpy disabled finalized; do
        timeout 60 "$B/probe_cupti_cost" "$m" "${PROBE_ITERS:-400}" | grep -E " 4 | 0 |records|FAIL"
      done
    done > "$OUT/cuptiprobe.log" 2>&1
    python3 - "$OUT/cuptiprobe.log" <<'PY'
import collections, statistics, sys
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 5 and f[3] in ("4", "0") and f[4] != "FAIL":
        v[(f[1], f[2], f[0])].append(float(f[4]))
for k in sorted(v):
    print(*k, "median of %d rounds: %.2f us" % (len(v[k]), statistics.median(v[k])), "all:", v[k])
PY
    ;;
  unwindverify)
    if [ -f .ext/build_samples.sh ]; then timeout 200 bash .ext/build_samples.sh > "$OUT/samples_build.log" 2>&1; fi
    runs=("torch_train.py --epochs 1 --batches 12" "torch_transfer.py" "cupy_transfer.py" "jax_transfer.py")
    i=0
    for r in "${runs[@]}" call_overhead .ext/bin/bandwidthTest .ext/bin/bandwidthTest-shared .ext/bin/simpleStreams; do
      i=$((i + 1)); d="/tmp/uv$i"  # not under \$OUT: its traces would crowd out the logs
      rm -rf "$d"
      case $r in
        .ext/*) [ -x "$r" ] || continue; cmd=("$r") ;;
        call_overhead) cmd=("$B/bench/call_overhead" -n 20000) ;;
        *) read -r -a cmd <<<"python3 tests/gpu/frameworks/$r" ;;
      esac
      CUXFER_UNWINDER=verify timeout 120 "$CUX" record -q -o "$d" -- "${cmd[@]}" > "$d.log" 2>&1
      echo "== ${cmd[*]}: rc=$? $(grep -h 'unwinder verify' "$d.log" | head -1)"
      "$CUX" report --json "$d" 2>/dev/null | python3 -c "import json,sys; [print('  ', n) for p in json.load(sys.stdin)['processes'] for n in p.get('notes', []) if 'call stacks' in n]"
    done 2>&1 | tee "$OUT/unwindverify.log" ;;
  detachnote)
    # What detaching and attaching CUPTI cost the writer thread, from the notes of
    # a default recording of the storm (and of the training loop when torch is here).
    "$CUX" record -q -o "$OUT/detach_storm" -- "$B/bench/call_overhead" -n "${STORM_N:-200000}" > "$OUT/detach_storm.log" 2>&1
    "$CUX" report --json "$OUT/detach_storm" | python3 -c "import json,sys; p=json.load(sys.stdin)['processes'][0]; print('storm:', [n for n in p.get('notes', []) if 'cupti' in n], json.dumps(p.get('cupti', {}).get('copy_records')))"
    rm -rf "$OUT/detach_storm" ;;
  overheadnote)
    # What the shim says its own work cost (the trace's "overhead:" note), on
    # the storm and on the training loop, default `cuxfer record`.
    "$CUX" record -q -o "$OUT/on_storm" -- "$B/bench/call_overhead" -n "${STORM_N:-100000}" > "$OUT/on_storm.log" 2>&1
    "$CUX" report --json "$OUT/on_storm" | python3 -c "import json,sys; [print('storm:', n) for p in json.load(sys.stdin)['processes'] for n in p.get('notes', []) if n.startswith(('overhead', 'cupti'))]"
    "$CUX" record -q -o "$OUT/on_torch" -- python3 bench/torch_step.py --steps "${TORCH_STEPS:-1500}" > "$OUT/on_torch.log" 2>&1
    tail -1 "$OUT/on_torch.log"
    "$CUX" report --json "$OUT/on_torch" | python3 -c "import json,sys; [print('torch:', n) for p in json.load(sys.stdin)['processes'] for n in p.get('notes', []) if n.startswith(('overhead', 'cupti'))]"
    rm -rf "$OUT/on_storm" "$OUT/on_torch" ;;
  external)
    CUXFER="$CUX" ROUNDS=${EXT_ROUNDS:-2} DEADLINE=${EXT_DEADLINE:-300} timeout 420 bash devtools/gpu_external.sh /tmp/ext \
      --tar "$OUT/external.tgz"; echo "external rc=$?"; tail -45 /tmp/ext/summary.txt 2>/dev/null ;;
  sweep)
    timeout "${SWEEP_TIMEOUT:-400}" bash bench/run_pattern_sweep.sh --build-dir "$B" --gpu --rounds 1 --first-round "${SWEEP_ROUND:-1}" \
      --modes "${SWEEP_MODES:-baseline,observe,rewrite}" ${SWEEP_ARGS:-} --raw "$OUT/sweep-r${SWEEP_ROUND:-1}.txt" \
      > "$OUT/sweep.log" 2>&1; echo "sweep rc=$?"; tail -40 "$OUT/sweep.log" ;;
  coldcall)
    timeout "${COLD_TIMEOUT:-300}" bash bench/run_call_overhead.sh --build-dir "$B" --gpu -n "${COLD_N:-50}" \
      --rounds "${COLD_ROUNDS:-3}" --evict "${COLD_MIB:-256}" --modes "${COLD_MODES:-baseline shim_d0 cupti_off shim_d16}" \
      2>&1 | tee "$OUT/coldcall.log" | tail -30 ;;
  coldab)
    timeout "${COLD_TIMEOUT:-300}" bash bench/run_call_overhead.sh --build-dir "$B" --gpu -n "${COLD_N:-40}" \
      --rounds "${COLD_ROUNDS:-3}" --evict "${COLD_MIB:-256}" --shim-b "$BASE_SHIM" \
      --modes "${COLD_MODES:-baseline cupti_off b_cupti_off shim_d16 b_shim_d16 baseline_again}" \
      2>&1 | tee "$OUT/coldab.log" | tail -32
    timeout 200 bash bench/run_call_overhead.sh --build-dir "$B" --gpu -n 20000 --rounds "${COLD_ROUNDS:-3}" \
      --shim-b "$BASE_SHIM" --modes "baseline cupti_off b_cupti_off shim_d16 b_shim_d16" \
      2>&1 | tee "$OUT/warmab.log" | tail -24 ;;
  torchab)
    for r in $(seq 1 "${TORCHAB_ROUNDS:-2}"); do
      for v in new base; do
        sh=$SHIM; [ $v = base ] && sh=$BASE_SHIM
        "$CUX" record -q --shim "$sh" -o "$OUT/tab" -- python3 bench/torch_step.py --steps "${TORCH_STEPS:-3000}" > "$OUT/tab.log" 2>&1
        echo "== round $r $v: $(tail -1 "$OUT/tab.log")"
        "$CUX" report --json "$OUT/tab" | python3 -c "
import json, sys
for p in json.load(sys.stdin)['processes']:
    [print('  ', n) for n in p.get('notes', []) if n.startswith(('overhead', 'call stacks'))]"
        rm -rf "$OUT/tab"
      done
    done 2>&1 | tee "$OUT/torchab.log" ;;
  smallparts)
    IFS=';' read -r -a variants <<<"${SMALL_VARIANTS:-none;CUXFER_DISABLE=1;CUXFER_CUPTI=off;CUXFER_CUPTI=off CUXFER_STACK_DEPTH=0;CUXFER_CUPTI=off CUXFER_FINGERPRINT=0;CUXFER_CUPTI=off CUXFER_STACK_DEPTH=0 CUXFER_FINGERPRINT=0 CUXFER_NVTX=0;default}"
    sel=(--only size=4 --only sync=sync --only host=reused,pinned,reused_memset --only stream=legacy,idle --reps "${SMALL_REPS:-400}")
    for r in $(seq 1 "${SMALL_ROUNDS:-3}"); do
      i=0
      for v in "${variants[@]}"; do
        i=$((i + 1)); envs=()
        case $v in none) ;; default) envs=(LD_PRELOAD="$SHIM") ;; *) envs=(LD_PRELOAD="$SHIM" $v) ;; esac
        rm -rf "$OUT/sp$i"; mkdir -p "$OUT/sp$i"  # the shim records only into a folder that exists
        env "${envs[@]}" CUXFER_OUTPUT_DIR="$OUT/sp$i" "$B/bench/pattern_sweep" "${sel[@]}" 2>"$OUT/sp.err" \
          | sed "s/^/variant=$i round=$r /" >> "$OUT/smallparts.raw"
      done
    done
    python3 - "$OUT/smallparts.raw" "${variants[@]}" <<'PY' | tee "$OUT/smallparts.txt"
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
      [ -d "$OUT/sp$i" ] && echo "== variant $i: $("$CUX" report --json "$OUT/sp$i" 2>/dev/null | python3 -c "
import json, sys
for p in json.load(sys.stdin)['processes']:
    [print(n) for n in p.get('notes', []) if n.startswith(('overhead', 'call stacks', 'cupti'))]" | tr '\n' ' ')"
      rm -rf "$OUT/sp$i"
    done ;;
  overheadparts)
    # `cuxfer record` sets CUXFER_STACK_DEPTH and CUXFER_CUPTI itself: those two by its options.
    # PARTS: the variants, ';'-separated (default: all of them).
    IFS=';' read -r -a parts <<<"${PARTS:-default;env CUXFER_FINGERPRINT=0;env CUXFER_PYTHON_STACKS=0;opt --stack-depth=0;env CUXFER_UNWINDER=libunwind;opt --cupti=off;opt --stack-depth=0 --cupti=off;default}"
    first=1
    for v in "${parts[@]}"; do
      envs=(); opts=()
      case $v in env\ *) envs=(${v#env }) ;; opt\ *) read -r -a opts <<<"${v#opt }" ;; esac
      env "${envs[@]}" "$CUX" record -q "${opts[@]}" -o "$OUT/parts" -- python3 bench/torch_step.py --steps "${TORCH_STEPS:-3000}" > "$OUT/parts.log" 2>&1
      echo "== $v: $(tail -1 "$OUT/parts.log")"
      "$CUX" report --json "$OUT/parts" | python3 -c "
import json, sys
for p in json.load(sys.stdin)['processes']:
    [print('  ', n) for n in p.get('notes', []) if n.startswith(('overhead', 'call stacks', 'cupti'))]
    print('   copy_records:', json.dumps(p.get('cupti', {}).get('copy_records')))"
      ((first)) && "$CUX" report "$OUT/parts" > "$OUT/parts_report.txt" 2>&1
      first=0
      rm -rf "$OUT/parts"
    done 2>&1 | tee "$OUT/overheadparts.log" ;;
  declinewhere)
    # Where the .eh_frame walk declines on the training loop: the note's first
    # declined return address, its FDE (readelf) and the code around it (objdump).
    "$CUX" record -q -o "$OUT/dw" -- python3 bench/torch_step.py --steps 200 > "$OUT/dw.log" 2>&1
    note=$("$CUX" report --json "$OUT/dw" | python3 -c "import json,sys; [print(n) for p in json.load(sys.stdin)['processes'] for n in p.get('notes', []) if n.startswith('call stacks')]")
    echo "$note"
    where=$(echo "$note" | grep -o 'the first at [^ ]*+0x[0-9a-f]*' | head -1 | sed 's/the first at //')
    if [ -n "$where" ]; then
      lib=${where%+0x*}; off=$((16#${where##*+0x}))
      echo "== $lib at $(printf '%#x' $off)"
      timeout 200 readelf --debug-dump=frames-interp "$lib" 2>/dev/null | python3 -c "
import re, sys
off = int(sys.argv[1]); block = []; keep = False
for line in sys.stdin:
    m = re.match(r'^[0-9a-f]+ [0-9a-f]+ [0-9a-f]+ FDE cie=[0-9a-f]+ pc=([0-9a-f]+)\.\.([0-9a-f]+)', line)
    if m:
        if keep: break
        keep = int(m.group(1), 16) <= off - 1 < int(m.group(2), 16); block = []
    if keep: block.append(line.rstrip())
print('\n'.join(block[:60]) or 'no FDE found')" "$off"
      timeout 60 objdump -d --no-show-raw-insn --start-address=$((off - 96)) --stop-address=$((off + 16)) "$lib" | tail -40
    fi
    rm -rf "$OUT/dw" ;;
  sigterm)
    for r in $(seq 1 "${SIGTERM_ROUNDS:-3}"); do
      for v in on off; do
        rm -rf "$OUT/st"
        python3 - "$CUX" "$OUT/st" "$v" "${SIGTERM_AFTER:-2}" <<'PYEOF'
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
    done 2>&1 | tee "$OUT/sigterm.log" ;;
  jax)
    (cd tests/gpu/frameworks && timeout 300 python3 trial.py --cuxfer "$CUX" --framework jax \
      --summary "$OUT/trial_jax.json" > "$OUT/trial_jax.log" 2>&1; echo "trial jax rc=$?")
    grep -E "python_sites|share|PASS|FAIL|SKIP" -A2 "$OUT/trial_jax.log" | head -20 ;;
  esac
done
