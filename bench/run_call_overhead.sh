#!/usr/bin/env bash
# Per-call overhead of libcuxfer.so on copy calls (docs/benchmarks.md).
#
#   bash bench/run_call_overhead.sh [--build-dir DIR] [-n N] [--rounds R] [--sim]
#
# Runs build/bench/call_overhead in three modes, interleaved round by round so
# that drift (clock boost, other load) hits every mode alike:
#   baseline   no shim
#   shim_d0    LD_PRELOAD=libcuxfer.so CUXFER_STACK_DEPTH=0  (immediate call site only)
#   shim_d16   LD_PRELOAD=libcuxfer.so CUXFER_STACK_DEPTH=16 (the default)
#   baseline_again  no shim, a second time: an A/A control whose paired ratio
#              shows what the host's noise alone makes of "slower"
# and prints, per copy case, the median over rounds of each mode's per-call
# median and p99, and the shim's added ns (shim - baseline).
#
# Options:
#   --build-dir DIR  build tree (default: build/)
#   -n N             timed calls per case per run (default 20000)
#   --rounds R       rounds (default 5)
#   --size BYTES     bytes per copy (default 4)
#   --evict MIB      write an unrelated MIB-MiB buffer before every timed call
#                    (call_overhead --evict): each call then starts with cold
#                    caches and TLBs; use a small -n (e.g. 300 at 256 MiB)
#   --sim            use the simulated driver (build/simcuda/lib); the default
#                    when no GPU is found. Numbers then say nothing about CUDA.
#   --gpu            insist on the real driver
#   --modes "M ..."  modes to run (default "baseline shim_d0 shim_d16"); also
#                    cupti_on / cupti_off: shim_d16 with CUXFER_CUPTI=on / off
#                    (the default shim modes run CUXFER_CUPTI=auto, the governor);
#                    no_detach: shim_d16 with CUXFER_CUPTI_DETACH=0 (CUPTI kept
#                    attached while the governor has its records off);
#                    prefetch / no_prefetch: shim_d16 with CUXFER_PREFETCH_TRAIL=1
#                    / 0 (cold captures prefetch the last one's reads, or not:
#                    off by default);
#                    libunwind / libunwind_cupti_off: shim_d16 / cupti_off with
#                    CUXFER_UNWINDER=libunwind (stacks as before the .eh_frame walk)
#   --toggle B       the in-process A/B (call_overhead --toggle B): each case's
#                    calls run in blocks of B alternating between cuProfilerStop
#                    and cuProfilerStart; modes capture / capture_nocupti are
#                    shim_d16 / cupti_off recording only the started blocks
#                    (CUXFER_CAPTURE_RANGE=cudaProfilerApi), and baseline is then
#                    its own in-process A/A. Prints, per mode and case, the
#                    recorded / unrecorded paired ratio pooled over rounds with a
#                    bootstrap 90 % interval of its median. The unrecorded blocks
#                    still pay the hooks' pass-through (tens of ns a call):
#                    compare with baseline's whole-process mean for that part.
#   --shim-b PATH    a second libcuxfer.so (another build) for A/B runs in one
#                    session: mode b_<mode> is <mode> with PATH preloaded instead
#   --check          exit non-zero unless every run printed every case (bench_smoke)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"
N=20000
ROUNDS=5
SIZE=4
EVICT=0
SHIM_B=""
MODE=auto
CHECK=0
TOGGLE=0
MODES="baseline shim_d0 shim_d16"
while (($#)); do
  case "$1" in
    --build-dir) BUILD="$2"; shift ;;
    -n) N="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --size) SIZE="$2"; shift ;;
    --evict) EVICT="$2"; shift ;;
    --toggle) TOGGLE="$2"; shift ;;
    --shim-b) SHIM_B="$2"; shift ;;
    --sim) MODE=sim ;;
    --gpu) MODE=gpu ;;
    --check) CHECK=1 ;;
    --modes) MODES="$2"; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_call_overhead: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done

BIN="$BUILD/bench/call_overhead"
SHIM="$BUILD/lib/libcuxfer.so"
[[ $EVICT =~ ^[0-9]+$ ]] || { echo "run_call_overhead: bad --evict '$EVICT' (MiB)" >&2; exit 2; }
[[ $TOGGLE =~ ^[0-9]+$ ]] || { echo "run_call_overhead: bad --toggle '$TOGGLE' (calls a block)" >&2; exit 2; }
[[ -x "$BIN" ]] || { echo "run_call_overhead: $BIN not built (cmake --build $BUILD --target call_overhead)" >&2; exit 1; }
[[ -f "$SHIM" ]] || { echo "run_call_overhead: $SHIM not built" >&2; exit 1; }

if [[ $MODE == auto ]]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then MODE=gpu; else MODE=sim; fi
fi
ENV_BASE=()
if [[ $MODE == sim ]]; then
  [[ -e "$BUILD/simcuda/lib/libcuda.so.1" ]] || { echo "run_call_overhead: no $BUILD/simcuda/lib/libcuda.so.1" >&2; exit 1; }
  ENV_BASE=(LD_LIBRARY_PATH="$BUILD/simcuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  echo "*** SIMULATED CUDA driver (tests/simcuda): numbers measure the shim's hook path only, not CUDA ***"
else
  nvidia-smi -L 2>/dev/null | head -1 || true
fi

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
RESULTS="$TMP/results.txt"
: >"$RESULTS"

run_mode() {
  local mode="$1"
  local env=("${ENV_BASE[@]}")
  local SHIM="$SHIM"
  if [[ $mode == b_* ]]; then
    [[ -f "$SHIM_B" ]] || { echo "run_call_overhead: mode $mode needs --shim-b PATH" >&2; return 2; }
    SHIM="$SHIM_B"
  fi
  case "${mode#b_}" in
    baseline | baseline_again) ;;
    shim_d0) env+=(LD_PRELOAD="$SHIM" CUXFER_STACK_DEPTH=0 CUXFER_OUTPUT_DIR="$TMP/traces") ;;
    shim_d16) env+=(LD_PRELOAD="$SHIM" CUXFER_STACK_DEPTH=16 CUXFER_OUTPUT_DIR="$TMP/traces") ;;
    cupti_on) env+=(LD_PRELOAD="$SHIM" CUXFER_STACK_DEPTH=16 CUXFER_CUPTI=on CUXFER_OUTPUT_DIR="$TMP/traces") ;;
    cupti_off) env+=(LD_PRELOAD="$SHIM" CUXFER_STACK_DEPTH=16 CUXFER_CUPTI=off CUXFER_OUTPUT_DIR="$TMP/traces") ;;
    no_detach) env+=(LD_PRELOAD="$SHIM" CUXFER_STACK_DEPTH=16 CUXFER_CUPTI_DETACH=0 CUXFER_OUTPUT_DIR="$TMP/traces") ;;
    no_prefetch) env+=(LD_PRELOAD="$SHIM" CUXFER_STACK_DEPTH=16 CUXFER_PREFETCH_TRAIL=0 CUXFER_OUTPUT_DIR="$TMP/traces") ;;
    prefetch) env+=(LD_PRELOAD="$SHIM" CUXFER_STACK_DEPTH=16 CUXFER_PREFETCH_TRAIL=1 CUXFER_OUTPUT_DIR="$TMP/traces") ;;
    capture) env+=(LD_PRELOAD="$SHIM" CUXFER_STACK_DEPTH=16 CUXFER_CAPTURE_RANGE=cudaProfilerApi CUXFER_OUTPUT_DIR="$TMP/traces") ;;
    capture_nocupti) env+=(LD_PRELOAD="$SHIM" CUXFER_STACK_DEPTH=16 CUXFER_CAPTURE_RANGE=cudaProfilerApi CUXFER_CUPTI=off
                           CUXFER_OUTPUT_DIR="$TMP/traces") ;;
    libunwind) env+=(LD_PRELOAD="$SHIM" CUXFER_STACK_DEPTH=16 CUXFER_UNWINDER=libunwind CUXFER_OUTPUT_DIR="$TMP/traces") ;;
    libunwind_cupti_off) env+=(LD_PRELOAD="$SHIM" CUXFER_STACK_DEPTH=16 CUXFER_UNWINDER=libunwind CUXFER_CUPTI=off
                               CUXFER_OUTPUT_DIR="$TMP/traces") ;;
    *) echo "run_call_overhead: unknown mode '$mode'" >&2; return 2 ;;
  esac
  mkdir -p "$TMP/traces"
  local rc=0
  local toggle=()
  ((TOGGLE)) && toggle=(--toggle "$TOGGLE")
  env "${env[@]}" "$BIN" -n "$N" --size "$SIZE" --evict "$EVICT" "${toggle[@]}" --label "$mode" >>"$RESULTS" 2>"$TMP/stderr" || rc=$?
  if ((rc != 0)); then
    echo "run_call_overhead: $mode exited $rc" >&2
    cat "$TMP/stderr" >&2
    return "$rc"
  fi
  if ((CHECK && TOGGLE)) && [[ ${mode#b_} == capture* ]]; then check_capture_switched "$mode" || return 1; fi
  rm -rf "$TMP/traces"
}

# --check with --toggle: a capture mode's trace holds exactly the copies of the
# recorded blocks (off on on off ...: the calls of blocks 1 and 2 of every
# four, for each of the six cases; warm-up calls fall outside the range). The
# direct proof that the capture range switched, whatever the blocks' times.
check_capture_switched() {
  local mode="$1" blocks=$((N / TOGGLE)) on=0 b
  for ((b = 0; b < blocks; b++)); do ((b % 4 == 1 || b % 4 == 2)) && on=$((on + TOGGLE)); done
  local want=$((6 * on)) got
  got=$("$BUILD/bin/cuxfer" report --json "$TMP/traces" 2>/dev/null |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["totals"]["calls"])' 2>/dev/null) || got="(no report)"
  if [[ $got != "$want" ]]; then
    echo "run_call_overhead: $mode: the trace holds $got copies, the recorded blocks made $want: the capture range did not switch" >&2
    return 1
  fi
}

echo "call_overhead: N=$N calls/case, $SIZE-byte copies$( ((EVICT)) && echo ", $EVICT MiB written before each")$( ((TOGGLE)) && echo ", in-process blocks of $TOGGLE")), $ROUNDS rounds, modes ${MODES// //} interleaved"
for ((r = 1; r <= ROUNDS; r++)); do
  for mode in $MODES; do
    run_mode "$mode"
  done
done

python3 - "$RESULTS" "$CHECK" "$ROUNDS" "$MODES" "$TOGGLE" "$MODE" <<'EOF'
import random, statistics, sys
from collections import defaultdict

path, check, rounds = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])
runs = defaultdict(lambda: {"median": [], "p99": [], "mean": []})
cases = []
for line in open(path):
    kv = dict(f.split("=", 1) for f in line.split() if "=" in f)
    if "case" not in kv:
        continue
    key = (kv["mode"], kv["case"])
    runs[key]["median"].append(float(kv["median_ns"]))
    runs[key]["p99"].append(float(kv["p99_ns"]))
    runs[key]["mean"].append(float(kv.get("mean_ns", "nan")))
    if "pair_ratios" in kv:
        runs[key].setdefault("paired", []).append(float(kv["paired_ratio"]))
        runs[key].setdefault("pairs", []).extend(float(x) for x in kv["pair_ratios"].split(","))
    if kv["case"] not in cases:
        cases.append(kv["case"])

modes = sys.argv[4].split()
expected = ["htod_pinned", "htod_pageable", "dtoh_pinned", "dtoh_pageable",
            "htod_async_pinned", "htod_async_pageable"]
missing = [(m, c) for m in modes for c in expected if len(runs[(m, c)]["median"]) != rounds]
if missing:
    print("run_call_overhead: missing results for", missing, file=sys.stderr)
    if check:
        sys.exit(1)
toggle, driver = int(sys.argv[5]), sys.argv[6]
if check and toggle:
    # Every run of every case must have printed its pairs; on the simulated
    # driver, where a call costs ~60 ns and the shim's recording more than a
    # quarter of that again, a capture mode's recorded blocks must be slower
    # than its unrecorded ones, or the blocks were not told apart (nothing
    # measured).
    for m in modes:
        for c in expected:
            r = runs[(m, c)]
            if len(r.get("paired", [])) != rounds:
                print(f"run_call_overhead: {m} {c}: no in-process pairs", file=sys.stderr)
                sys.exit(1)
            # Whether the range switched is checked on the trace (check_capture_switched);
            # here, that the blocks' times see the recording at all.
            if driver == "sim" and m.startswith("capture") and statistics.median(r["pairs"]) < 1.05:
                print(f"run_call_overhead: {m} {c}: recorded blocks not slower than unrecorded "
                      f"({statistics.median(r['pairs']):.3f}): the blocks were not told apart", file=sys.stderr)
                sys.exit(1)

med = lambda v: statistics.median(v) if v else float("nan")

if any("pairs" in r for r in runs.values()):
    def interval(v, n=2000):
        # Bootstrap of the median: the 5th and 95th percentile of resampled medians.
        rng = random.Random(1)
        meds = sorted(statistics.median(rng.choices(v, k=len(v))) for _ in range(n))
        return meds[n // 20], meds[n - n // 20 - 1]
    print()
    print("in-process: recorded block / adjacent unrecorded block, mean time a call;")
    print("median of rounds (their range), then all rounds' pairs pooled: median [bootstrap 90 %]")
    for c in cases:
        cells = []
        for m in modes:
            r = runs[(m, c)]
            if not r.get("pairs"):
                continue
            lo, hi = interval(r["pairs"])
            cells.append(f"{m}={med(r['paired']):.3f} ({min(r['paired']):.3f}-{max(r['paired']):.3f}) "
                         f"pooled {len(r['pairs'])}: {med(r['pairs']):.3f} [{lo:.3f}-{hi:.3f}]   ")
        print(f"{c:<22}" + "".join(cells))
shim = [m for m in modes if m != "baseline"]
print()
print("per-call ns (median over rounds of each run's median / p99 / mean); added = mode - baseline")
print(f"{'case':<22}" + "".join(f"{m:>24}" for m in modes) + "".join(f"{'added ' + m:>24}" for m in shim if "baseline" in modes))
for c in cases:
    row = {m: tuple(med(runs[(m, c)][k]) for k in ("median", "p99", "mean")) for m in modes}
    cell = lambda t: f"{t[0]:.0f} / {t[1]:.0f} / {t[2]:.0f}"
    line = f"{c:<22}" + "".join(f"{cell(row[m]):>24}" for m in modes)
    if "baseline" in modes:
        b = row["baseline"]
        line += "".join(f"{cell(tuple(x - y for x, y in zip(row[m], b))):>24}" for m in shim)
    print(line)
if "baseline" in modes:
    print()
    print("mean per call, ratio to baseline (a storm's total time)")
    for c in cases:
        b = med(runs[("baseline", c)]["mean"])
        print(f"{c:<22}" + "".join(f"{m}={med(runs[(m, c)]['mean']) / b:.3f}  " for m in shim))
    # Each run against the baseline run of its own round: drift between
    # rounds cancels. baseline_again (no shim either) is the resolution.
    def quartiles(v):
        v = sorted(v)
        return (v[0], v[-1]) if len(v) < 4 else (statistics.quantiles(v, n=4)[0], statistics.quantiles(v, n=4)[2])
    print()
    print("paired: mean per call / the same round's baseline, median over rounds [interquartile range]")
    for c in cases:
        b = runs[("baseline", c)]["mean"]
        cells = []
        for m in shim:
            v = [x / y for x, y in zip(runs[(m, c)]["mean"], b)]
            if v:
                lo, hi = quartiles(v)
                cells.append(f"{m}={med(v):.3f} [{lo:.3f}-{hi:.3f}]  ")
        print(f"{c:<22}" + "".join(cells))
EOF
