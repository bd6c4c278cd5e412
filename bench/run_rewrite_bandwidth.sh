#!/usr/bin/env bash
# Bandwidth of pageable copies with and without the pinned rewrite
# (docs/benchmarks.md).
#
#   bash bench/run_rewrite_bandwidth.sh [--build-dir DIR] [--max-size N] [--rounds R] [--sim|--gpu]
#
# Runs build/bench/rewrite_bandwidth in these modes, interleaved round by round
# so that drift (clock boost, other load) hits every mode alike:
#   baseline  no shim
#   shim      LD_PRELOAD=libcuxfer.so CUXFER_CUPTI=off            (observe only)
#   rewrite   LD_PRELOAD=libcuxfer.so:libcuxfer_memhooks.so CUXFER_CUPTI=off CUXFER_REWRITE=pin
# (CUPTI is off in both shim modes: this measures the rewrite, not CUPTI.)
# and prints, per size and direction, the median over rounds of each run's
# median GB/s for pinned, pageable (reused buffer) and pageable first-use
# (fresh malloc per copy) host memory, with and without the rewrite, and the
# ratios rewrite/pageable and rewrite/pinned; then the time until
# cudaMemcpyAsync H2D returns at 1 MiB and 64 MiB.
#
# Options:
#   --build-dir DIR  build tree (default: build/)
#   --max-size N     largest copy size (K/M/G suffixes; default 1G)
#   --rounds R       rounds (default 3)
#   --reps R         timed reps per case per run (default: by size, 5..50)
#   --modes LIST     comma list of modes (default baseline,shim,rewrite)
#   --sim            use the simulated CUDA (bench/rewrite_bandwidth-sim); the
#                    default when no GPU is found. Numbers then say nothing.
#   --gpu            insist on the real CUDA (bench/rewrite_bandwidth)
#   --check          exit non-zero unless every run printed every case (bench_rewrite_smoke)
#   --raw FILE       also keep the raw result lines in FILE
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"
MAX_SIZE=1G
ROUNDS=3
REPS=""
MODES="baseline,shim,rewrite"
MODE=auto
CHECK=0
RAW=""
while (($#)); do
  case "$1" in
    --build-dir) BUILD="$2"; shift ;;
    --max-size) MAX_SIZE="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --reps) REPS="$2"; shift ;;
    --modes) MODES="$2"; shift ;;
    --sim) MODE=sim ;;
    --gpu) MODE=gpu ;;
    --check) CHECK=1 ;;
    --raw) RAW="$2"; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_rewrite_bandwidth: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done

if [[ $MODE == auto ]]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then MODE=gpu; else MODE=sim; fi
fi
if [[ $MODE == sim ]]; then
  BIN="$BUILD/bench/rewrite_bandwidth-sim"
  echo "*** SIMULATED CUDA (tests/simcuda): the numbers say nothing about CUDA or the rewrite's speed ***"
else
  BIN="$BUILD/bench/rewrite_bandwidth"
  nvidia-smi -L 2>/dev/null | head -1 || true
fi
SHIM="$BUILD/lib/libcuxfer.so"
[[ -x "$BIN" ]] || { echo "run_rewrite_bandwidth: $BIN not built (cmake --build $BUILD --target $(basename "$BIN"))" >&2; exit 1; }
[[ -f "$SHIM" ]] || { echo "run_rewrite_bandwidth: $SHIM not built" >&2; exit 1; }

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
RESULTS="$TMP/results.txt"
: >"$RESULTS"

ARGS=(--max-size "$MAX_SIZE")
[[ -n $REPS ]] && ARGS+=(--reps "$REPS")

run_mode() {
  local mode="$1"
  local env=()
  case "$mode" in
    baseline) ;;
    shim) env+=(LD_PRELOAD="$SHIM" CUXFER_CUPTI=off CUXFER_OUTPUT_DIR="$TMP/traces") ;;
    rewrite) env+=(LD_PRELOAD="$SHIM:${SHIM%/*}/libcuxfer_memhooks.so" CUXFER_CUPTI=off CUXFER_REWRITE=pin CUXFER_OUTPUT_DIR="$TMP/traces") ;;
    *) echo "run_rewrite_bandwidth: unknown mode '$mode'" >&2; exit 2 ;;
  esac
  mkdir -p "$TMP/traces"
  local rc=0
  env "${env[@]}" "$BIN" "${ARGS[@]}" --label "$mode" >>"$RESULTS" 2>"$TMP/stderr" || rc=$?
  if ((rc != 0)); then
    echo "run_rewrite_bandwidth: $mode exited $rc" >&2
    cat "$TMP/stderr" >&2
    return "$rc"
  fi
  # Anything the shim said (e.g. that it does not know CUXFER_REWRITE yet) is worth seeing once.
  if [[ -s "$TMP/stderr" && ! -e "$TMP/said.$mode" ]]; then
    sed "s/^/[$mode] /" "$TMP/stderr" | head -5 >&2
    touch "$TMP/said.$mode"
  fi
  rm -rf "$TMP/traces"
}

IFS=, read -r -a MODE_LIST <<<"$MODES"
echo "rewrite_bandwidth: max size $MAX_SIZE, $ROUNDS round(s), modes ${MODE_LIST[*]} interleaved"
for ((r = 1; r <= ROUNDS; r++)); do
  for mode in "${MODE_LIST[@]}"; do
    run_mode "$mode"
  done
done
[[ -n $RAW ]] && cp "$RESULTS" "$RAW"

python3 - "$RESULTS" "$CHECK" "$ROUNDS" "$MODES" <<'EOF'
import math, statistics, sys
from collections import defaultdict

path, check, rounds, modes = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), sys.argv[4].split(",")
gbps = defaultdict(list)   # (run mode, memory, dir, size) -> per-run medians
ret_us = defaultdict(list)
sizes = []
for line in open(path):
    kv = dict(f.split("=", 1) for f in line.split() if "=" in f)
    if "dir" not in kv or "label" not in kv:
        continue
    size = int(kv["size"])
    key = (kv["label"], kv["mode"], kv["dir"], size)
    gbps[key].append(float(kv["median_gbps"]))
    if "median_return_us" in kv:
        ret_us[key].append(float(kv["median_return_us"]))
    if kv["dir"] in ("H2D", "D2H") and size not in sizes:
        sizes.append(size)

async_sizes = sorted({k[3] for k in ret_us})
want = [(m, mem, d, s) for m in modes for s in sizes for d in ("H2D", "D2H")
        for mem in ("pinned", "pageable", "pageable_first")]
want += [(m, mem, "H2D_async", s) for m in modes for s in async_sizes for mem in ("pinned", "pageable")]
missing = [k for k in want if len(gbps[k]) != rounds]
bad = [k for k, v in gbps.items() if not all(math.isfinite(x) and x > 0 for x in v)]
if not sizes:
    missing.append("no sync results at all")
if missing or bad:
    print("run_rewrite_bandwidth: missing results:", missing[:10], "non-positive:", bad[:10], file=sys.stderr)
    if check:
        sys.exit(1)

med = lambda v: statistics.median(v) if v else float("nan")
def size_name(n):
    for unit, sh in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << sh and n % (1 << sh) == 0:
            return f"{n >> sh} {unit}"
    return f"{n} B"
def cell(x, w=9, prec=2):
    if math.isnan(x):
        return f"{'-':>{w}}"
    if 0 < abs(x) < 0.1:  # tiny copies: keep two significant digits instead of printing 0.00
        return f"{x:>{w}.2g}"
    return f"{x:>{w}.{prec}f}"

base = "baseline" if "baseline" in modes else modes[0]
rw = "rewrite" if "rewrite" in modes else None
print()
print(f"GB/s, median over {rounds} round(s) of each run's median (1e9 B/s). pinned/pageable/first: {base} run;"
      " +rw: CUXFER_REWRITE=pin run" + ("; shim: observe-only shim run" if "shim" in modes else ""))
cols = ["size", "dir", "pinned", "pageable", "first"]
if "shim" in modes:
    cols += ["pg+shim"]
if rw:
    cols += ["pg+rw", "first+rw", "pinned+rw", "rw/pg", "rw/pin", "frw/first"]
print(f"{cols[0]:>8} {cols[1]:>4}" + "".join(f"{c:>10}" for c in cols[2:]))
for s in sizes:
    for d in ("H2D", "D2H"):
        g = lambda m, mem: med(gbps[(m, mem, d, s)])
        pin, pg, first = g(base, "pinned"), g(base, "pageable"), g(base, "pageable_first")
        row = [pin, pg, first]
        if "shim" in modes:
            row.append(g("shim", "pageable"))
        if rw:
            pgrw, firstrw = g(rw, "pageable"), g(rw, "pageable_first")
            row += [pgrw, firstrw, g(rw, "pinned"), pgrw / pg if pg else float("nan"),
                    pgrw / pin if pin else float("nan"), firstrw / first if first else float("nan")]
        print(f"{size_name(s):>8} {d:>4}" + "".join(" " + cell(x) for x in row))

if async_sizes:
    print()
    print("time until cudaMemcpyAsync H2D returns (µs, median over rounds); GB/s call..stream sync")
    hdr = ["size", "pinned", "pageable"] + (["pg+rw", "pg GB/s", "pg+rw GB/s"] if rw else ["pg GB/s"])
    print(f"{hdr[0]:>8}" + "".join(f"{c:>12}" for c in hdr[1:]))
    for s in async_sizes:
        r = lambda m, mem: med(ret_us[(m, mem, "H2D_async", s)])
        row = [r(base, "pinned"), r(base, "pageable")]
        if rw:
            row += [r(rw, "pageable"), med(gbps[(base, "pageable", "H2D_async", s)]),
                    med(gbps[(rw, "pageable", "H2D_async", s)])]
        else:
            row += [med(gbps[(base, "pageable", "H2D_async", s)])]
        print(f"{size_name(s):>8}" + "".join(" " + cell(x, 11, 1) for x in row))
EOF
