#!/usr/bin/env bash
# What default recording costs a PyTorch training loop, measured inside one
# process (issue 13's <= 1 % bar): bench/torch_step.py --toggle alternates
# blocks of steps between torch.cuda.profiler.start() and stop(), and under
# `cuxfer record --capture-range=cudaProfilerApi` only the started blocks are
# recorded. The paired ratio (recorded block / the adjacent unrecorded one)
# then compares the loop with and without recording in the same process:
# what moves a whole process's speed on a shared host (placement, clocks,
# allocator state: 5-20 % between processes here, docs/benchmarks.md)
# cancels. Modes, interleaved round by round:
#   plain    no cuxfer: the profiler calls change nothing (in-process A/A)
#   plain_dry no cuxfer, and the blocks labelled without calling the profiler
#            (torch_step.py --toggle-dry): what the driver's profiler calls
#            move by themselves, if anything, apart from the block order
#   capture  cuxfer record --capture-range=cudaProfilerApi (the measurement)
#   capture_nocupti  the same with --cupti=off: the shim's own part of the cost
#   capture_nostacks the same with --no-stacks: what the call stacks cost
#   capture_nofp     the same with CUXFER_FINGERPRINT=0: what the uploads'
#                    content fingerprints (record/fingerprint.h) cost
#   capture_memsetstacks the same with CUXFER_MEMSET_STACKS=1: what walking
#                    the memsets' stacks too costs (record/site_capture.h)
#   capture_trail    the same with CUXFER_PREFETCH_TRAIL=1: what the stack
#                    walks' prefetch trail (shim/core/prefetch_trail.h, off by
#                    default) saves or costs
#   capture_base     capture with another shim (--base-shim PATH): an A/B of two builds
#   whole    cuxfer record of the whole run: both kinds of block recorded
#            (A/A under recording: what the switching itself moves)
# Prints each run's line, then per mode the median over runs of the paired
# ratio, the runs' range, the median of all its runs' pairs pooled with a
# bootstrap 90 % interval, each mode's pooled median minus plain's (with its
# interval) when plain ran, and the capture runs' notes; then the same pooled
# figures for the blocks' median step (torch_step.py's step_pair_ratios: the
# typical step, without the pauses that spread the block means) and for the
# blocks' CPU time on the loop's thread (cpu_pair_ratios: the hooks' time
# without the time the thread was not scheduled).
#
#   bash bench/run_torch_inprocess.sh [--build-dir DIR] [--rounds R] [--modes "plain capture whole"]
#                                     [--base-shim PATH] [-- ARGS]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"
ROUNDS=4
MODES="plain capture whole"
BASE_SHIM=""
while (($#)); do
  case "$1" in
    --build-dir) BUILD="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --modes) MODES="$2"; shift 2 ;;
    --base-shim) BASE_SHIM="$2"; shift 2 ;;
    --) shift; break ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_torch_inprocess: unknown option '$1'" >&2; exit 2 ;;
  esac
done
CUX="$BUILD/bin/cuxfer"
[[ -x "$CUX" ]] || { echo "run_torch_inprocess: $CUX not built" >&2; exit 1; }
PY=${PYTHON:-python3}
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
for ((r = 1; r <= ROUNDS; r++)); do
  for m in $MODES; do
    rc=0
    case $m in
      plain) line=$("$PY" "$ROOT/bench/torch_step.py" --toggle "$@" 2>&1 | tail -1) || rc=$? ;;
      plain_dry) line=$("$PY" "$ROOT/bench/torch_step.py" --toggle-dry "$@" 2>&1 | tail -1) || rc=$? ;;
      capture | capture_nocupti | capture_nostacks | capture_nofp | capture_memsetstacks | capture_trail | capture_base | whole)
        opt=()
        env=()
        [[ $m == capture_trail ]] && env=(CUXFER_PREFETCH_TRAIL=1)
        [[ $m == capture_memsetstacks ]] && env=(CUXFER_MEMSET_STACKS=1)
        [[ $m == capture_nofp ]] && env=(CUXFER_FINGERPRINT=0)
        [[ $m == capture* ]] && opt=(--capture-range=cudaProfilerApi)
        [[ $m == capture_nocupti ]] && opt+=(--cupti=off)
        [[ $m == capture_nostacks ]] && opt+=(--no-stacks)
        if [[ $m == capture_base ]]; then
          [[ -f $BASE_SHIM ]] || { echo "run_torch_inprocess: capture_base needs --base-shim" >&2; exit 2; }
          opt+=(--shim "$BASE_SHIM")
        fi
        line=$(env "${env[@]}" "$CUX" record -q "${opt[@]}" -o "$TMP/t" -- "$PY" "$ROOT/bench/torch_step.py" --toggle "$@" 2>&1 | tail -1) || rc=$?
        "$CUX" report --json "$TMP/t" 2>/dev/null | "$PY" -c '
import json, sys
r = json.load(sys.stdin)
for n in (n for p in r["processes"] for n in p.get("notes", [])):
    if n.startswith(("overhead:", "capture range", "cupti:")): print("  note:", n)
print("  copies recorded:", r["totals"]["calls"])' > "$TMP/note" 2>/dev/null || true
        # Also printed now (prefixed with the run), so that a run cut short keeps what came before.
        sed "s/^/round=$r mode=$m/" "$TMP/note"
        cat "$TMP/note" >> "$TMP/notes.$m"
        rm -rf "$TMP/t" ;;
      *) echo "run_torch_inprocess: unknown mode '$m'" >&2; exit 2 ;;
    esac
    if ((rc == 77)); then echo "$line"; exit 77; fi
    ((rc == 0)) || { echo "run_torch_inprocess: $m exited $rc: $line" >&2; exit 1; }
    echo "round=$r mode=$m $line" | tee -a "$TMP/results"
  done
done
for m in capture capture_nocupti capture_nostacks capture_nofp capture_memsetstacks capture_trail capture_base whole; do
  [[ -f "$TMP/notes.$m" ]] && { echo "$m runs' notes:"; cat "$TMP/notes.$m"; }
done
"$PY" - "$TMP/results" "$MODES" <<'PYEOF'
import random, re, statistics, sys
runs, pairs, step_pairs, cpu_pairs = {}, {}, {}, {}
for line in open(sys.argv[1]):
    m = re.search(r"mode=(\w+) .*on_median_ms=([\d.]+) off_median_ms=([\d.]+) paired_ratio=([\d.]+) paired_iqr=([\d.]+)-([\d.]+)", line)
    if m:
        runs.setdefault(m[1], []).append([float(x) for x in m.groups()[1:]])
        for key, into in (("pair_ratios", pairs), ("step_pair_ratios", step_pairs), ("cpu_pair_ratios", cpu_pairs)):
            p = re.search(rf"(?<![\w]){key}=([\d.,]+)", line)
            if p:
                into.setdefault(m[1], []).extend(float(x) for x in p[1].split(","))


def interval(v, rounds=2000):
    # Bootstrap of the median: the 5th and 95th percentile of resampled medians.
    rng = random.Random(1)
    meds = sorted(statistics.median(rng.choices(v, k=len(v))) for _ in range(rounds))
    return meds[rounds // 20], meds[rounds - rounds // 20 - 1]


print(f"\n{'mode':<18}{'runs':>5}{'on ms':>9}{'off ms':>9}{'ratio, median of runs':>23}{'runs min-max':>16}"
      f"{'pooled pairs':>14}{'median [90 %]':>24}")
for mode in sys.argv[2].split():
    v = runs.get(mode)
    if not v:
        continue
    ratios = [r[2] for r in v]
    pooled = pairs.get(mode, [])
    pool = ""
    if len(pooled) >= 4:
        lo, hi = interval(pooled)
        pool = f"{len(pooled):>14}{statistics.median(pooled):>10.4f} [{lo:.4f}-{hi:.4f}]"
    print(f"{mode:<18}{len(v):>5}{statistics.median(r[0] for r in v):>9.4f}{statistics.median(r[1] for r in v):>9.4f}"
          f"{statistics.median(ratios):>23.4f}{min(ratios):>8.4f}-{max(ratios):.4f}{pool}")


def against(label, pooled, control):
    # A mode's pooled median minus the control's, with a bootstrap 90 %
    # interval of that difference. The A/A's own distance from 1 is what the
    # toggle moves by itself (or noise), so this, not the ratio alone, is the
    # mode's cost when the control ran beside it.
    base = pooled.get(control, [])
    if len(base) < 4:
        return
    rng = random.Random(2)
    for mode in sys.argv[2].split():
        v = pooled.get(mode, [])
        if mode == control or len(v) < 4:
            continue
        d = sorted(statistics.median(rng.choices(v, k=len(v))) - statistics.median(rng.choices(base, k=len(base)))
                   for _ in range(2000))
        print(f"{label}{mode:<18} minus {control}: {statistics.median(v) - statistics.median(base):+.4f} "
              f"[{d[100]:+.4f} to {d[1899]:+.4f}] ({len(v)} and {len(base)} pairs)")


against("", pairs, "plain")
against("", pairs, "plain_dry")
against("", pairs, "capture_base")  # an A/B of two builds: this tree's capture minus the base's
for label, title, pooled in (("step ", "the blocks' median step (step_pair_ratios)", step_pairs),
                             ("cpu ", "the blocks' CPU time on the loop's thread (cpu_pair_ratios)", cpu_pairs)):
    if not pooled:
        continue
    print(f"\n{title}:")
    for mode in sys.argv[2].split():
        v = pooled.get(mode, [])
        if len(v) >= 4:
            lo, hi = interval(v)
            print(f"{label}{mode:<18}{len(v):>6} pairs {statistics.median(v):.4f} [{lo:.4f}-{hi:.4f}]")
    against(label, pooled, "plain")
    against(label, pooled, "plain_dry")
    against(label, pooled, "capture_base")
PYEOF
