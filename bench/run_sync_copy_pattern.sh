#!/usr/bin/env bash
# NVIDIA bandwidthTest's pageable loop against its fair reference, the same
# loop on pinned memory (bench/sync_copy_pattern.cpp says what the loop does;
# docs/benchmarks.md, "Programs not written for cuxfer").
#
#   bash bench/run_sync_copy_pattern.sh [--build-dir DIR] [--sizes "4M 32M 60M"] [--rounds R] [--sim|--gpu]
#
# Runs build/bench/sync_copy_pattern in these modes, interleaved round by round
# so that drift (clock boost, another tenant) hits every mode alike:
#   reference        --host pinned: the loop on cudaMallocHost memory
#   pageable         malloc'd memory, no cuxfer (bandwidthTest --memory=pageable)
#   rewrite          the same under `cuxfer record --rewrite=pin` (default recording)
#   rewrite_nocupti  the same under `cuxfer record --rewrite=pin --cupti=off`
# and, when named in --modes, observe (`cuxfer record`, no rewrite),
# registered (--host registered: the program registers its own buffer),
# registered_portable (registered as the rewrite does), registered_huge and
# registered_collapse (the same on transparent huge pages:
# sync_copy_pattern.cpp says how), rewrite_stage (the rewrite with every
# copy staged: CUXFER_REGISTER=off CUXFER_STAGE_MIN=0), rewrite_lean (the
# rewrite recording the least: no stacks, no fingerprints, no CUPTI) and
# observe_registered (`cuxfer record` of the program registering its own
# buffer: the recording's cost on a copy at pinned speed); for a buffer's
# first copies, rewrite_first_staged (below the 8 MiB H2D staging threshold
# too, a buffer's copies before its registration are staged from 1 MiB, not
# left to the driver's pageable path: CUXFER_STAGE_MIN_H2D=1M),
# rewrite_inline (registered on the copying thread at its second copy:
# CUXFER_REGISTER=inline) and rewrite_pool_early (the whole staging pool
# made from the first device allocation on: CUXFER_POOL_GROW=early).
# Prints per size and direction the median over rounds of each mode's GB/s
# (bandwidthTest's figure: bytes / summed copy times) with its range, the
# ratio of each rewrite mode to the reference (paired round by round: drift
# between rounds cancels) with its range, and the first two copies of the
# buffer (µs; where the one-time costs land) beside the median of the rest.
# CUXFER_* variables in the environment reach the shim in the cuxfer modes
# (e.g. CUXFER_REGISTER=inline to put registration back on the app's thread).
#
# Options:
#   --build-dir DIR    build tree (default: build/)
#   --sizes LIST       copy sizes, space or comma separated (K/M/G; default "4M 32M 60M",
#                      bandwidthTest --mode=range --start=4194304 --end=62914560
#                      --increment=29360128)
#   --rounds R         rounds (default 3)
#   --iters N          timed copies per size and direction (default 100, bandwidthTest's)
#   --memset-size N    the buffer memset between copies (default 256M, bandwidthTest's)
#   --modes LIST       comma list (default reference,pageable,rewrite,rewrite_nocupti)
#   --sim              the simulated CUDA (bench/sync_copy_pattern-sim); the default
#                      when no GPU is found. Numbers then say nothing.
#   --gpu              insist on the real CUDA (bench/sync_copy_pattern)
#   --check            exit 1 unless every run printed every size and direction
#                      with its data intact (bench_sync_copy_pattern_smoke)
#   --raw FILE         also keep the raw lines (`mode=M round=R <line>`) in FILE
# Exit status: 0; 1 a run failed (or --check: a line missing); 2 bad
# arguments; 77 no GPU.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"
SIZES="4M 32M 60M"
ROUNDS=3
ITERS=100
MEMSET=256M
MODES="reference,pageable,rewrite,rewrite_nocupti"
MODE=auto
CHECK=0
RAW=""
while (($#)); do
  case "$1" in
    --build-dir) BUILD="$2"; shift ;;
    --sizes) SIZES="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --iters) ITERS="$2"; shift ;;
    --memset-size) MEMSET="$2"; shift ;;
    --modes) MODES="$2"; shift ;;
    --sim) MODE=sim ;;
    --gpu) MODE=gpu ;;
    --check) CHECK=1 ;;
    --raw) RAW="$2"; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_sync_copy_pattern: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "run_sync_copy_pattern: bad --rounds '$ROUNDS'" >&2; exit 2; }
IFS=, read -r -a MODE_LIST <<<"$MODES"
for m in "${MODE_LIST[@]}"; do
  case "$m" in
    reference | pageable | registered | registered_portable | registered_huge | registered_collapse | observe | observe_registered | rewrite | rewrite_nocupti | rewrite_stage | rewrite_lean | rewrite_first_staged | rewrite_inline | rewrite_pool_early) ;;
    *) echo "run_sync_copy_pattern: unknown mode '$m' (reference, pageable, registered, registered_portable, registered_huge, registered_collapse, observe, observe_registered, rewrite, rewrite_nocupti, rewrite_stage, rewrite_lean, rewrite_first_staged, rewrite_inline, rewrite_pool_early)" >&2; exit 2 ;;
  esac
done
read -r -a SIZE_LIST <<<"${SIZES//,/ }"

if [[ $MODE == auto ]]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then MODE=gpu; else MODE=sim; fi
fi
if [[ $MODE == sim ]]; then
  BIN="$BUILD/bench/sync_copy_pattern-sim"
  echo "*** SIMULATED CUDA (tests/simcuda): the numbers say nothing about CUDA or the rewrite's speed ***"
else
  BIN="$BUILD/bench/sync_copy_pattern"
  nvidia-smi -L 2>/dev/null | head -1 || true
fi
CUX="$BUILD/bin/cuxfer"
[[ -x "$BIN" ]] || { echo "run_sync_copy_pattern: $BIN not built (cmake --build $BUILD --target $(basename "$BIN") cuxfer)" >&2; exit 1; }
[[ -x "$CUX" ]] || { echo "run_sync_copy_pattern: $CUX not built" >&2; exit 1; }

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
RESULTS="$TMP/results.txt"
: >"$RESULTS"
ARGS=(--iters "$ITERS" --memset-size "$MEMSET" "${SIZE_LIST[@]}")

run_mode() {
  local mode="$1" round="$2" cmd rc=0
  local rec=("$CUX" record -q -o "$TMP/trace")
  case "$mode" in
    reference) cmd=("$BIN" --host pinned) ;;
    pageable) cmd=("$BIN") ;;
    registered | registered_portable | registered_huge | registered_collapse) cmd=("$BIN" --host "$mode") ;;
    observe) cmd=("${rec[@]}" -- "$BIN") ;;
    rewrite) cmd=("${rec[@]}" --rewrite=pin -- "$BIN") ;;
    rewrite_nocupti) cmd=("${rec[@]}" --rewrite=pin --cupti=off -- "$BIN") ;;
    rewrite_stage) cmd=(env CUXFER_REGISTER=off CUXFER_STAGE_MIN=0 "${rec[@]}" --rewrite=pin -- "$BIN") ;;
    rewrite_lean) cmd=(env CUXFER_STACK_DEPTH=0 CUXFER_FINGERPRINT=off "${rec[@]}" --rewrite=pin --cupti=off -- "$BIN") ;;
    observe_registered) cmd=("${rec[@]}" -- "$BIN" --host registered) ;;
    rewrite_first_staged) cmd=(env CUXFER_STAGE_MIN_H2D=1048576 "${rec[@]}" --rewrite=pin -- "$BIN") ;;
    rewrite_inline) cmd=(env CUXFER_REGISTER=inline "${rec[@]}" --rewrite=pin -- "$BIN") ;;
    rewrite_pool_early) cmd=(env CUXFER_POOL_GROW=early "${rec[@]}" --rewrite=pin -- "$BIN") ;;
  esac
  "${cmd[@]}" "${ARGS[@]}" >"$TMP/out" 2>"$TMP/stderr" || rc=$?
  rm -rf "$TMP/trace"
  if ((rc == 77)); then
    cat "$TMP/out"
    echo "run_sync_copy_pattern: no GPU" >&2
    exit 77
  fi
  if ((rc != 0)); then
    echo "run_sync_copy_pattern: $mode (round $round) exited $rc" >&2
    tail -5 "$TMP/out" "$TMP/stderr" >&2
    exit 1
  fi
  grep '^dir=' "$TMP/out" | sed "s/^/mode=$mode round=$round /" >>"$RESULTS" || true
  # What the shim or cuxfer said (a refusal, a fallback) is worth seeing once per mode.
  if [[ -s "$TMP/stderr" && ! -e "$TMP/said.$mode" ]]; then
    sed "s/^/[$mode] /" "$TMP/stderr" | head -5 >&2
    touch "$TMP/said.$mode"
  fi
}

echo "sync_copy_pattern: sizes ${SIZE_LIST[*]}, $ITERS copies each, memset $MEMSET, $ROUNDS round(s), modes ${MODE_LIST[*]} interleaved"
for ((r = 1; r <= ROUNDS; r++)); do
  for m in "${MODE_LIST[@]}"; do
    run_mode "$m" "$r"
  done
done
[[ -n $RAW ]] && cp "$RESULTS" "$RAW"

python3 - "$RESULTS" "$CHECK" "$ROUNDS" "$MODES" "$ITERS" <<'EOF'
import statistics, sys
from collections import defaultdict

path, check, rounds, modes, iters = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), sys.argv[4].split(","), int(sys.argv[5])
runs = defaultdict(dict)  # (dir, size, mode) -> round -> fields
cases = []
for line in open(path):
    kv = dict(f.split("=", 1) for f in line.split() if "=" in f)
    key = (kv["dir"], int(kv["size"]), kv["mode"])
    runs[key][int(kv["round"])] = kv
    if key[:2] not in cases:
        cases.append(key[:2])
cases.sort(key=lambda c: (c[1], c[0] != "H2D"))

problems = []
for d, s in cases:
    for m in modes:
        for r in range(1, rounds + 1):
            kv = runs[(d, s, m)].get(r)
            if kv is None:
                problems.append(f"{m} round {r} {d} {s}: no line")
            elif kv["data"] != "ok" or int(kv["iters"]) != iters or not float(kv["mean_gbps"]) > 0:
                problems.append(f"{m} round {r} {d} {s}: {kv['data']}, iters {kv['iters']}, {kv['mean_gbps']} GB/s")
if not cases:
    problems.append("no results at all")
if problems:
    print("run_sync_copy_pattern:", "; ".join(problems[:10]), file=sys.stderr)
    if check:
        sys.exit(1)


def size_name(n):
    for unit, sh in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << sh and n % (1 << sh) == 0:
            return f"{n >> sh} {unit}"
    return f"{n} B"


def spread(v, prec=1):
    if not v:
        return "-"
    med = f"{statistics.median(v):.{prec}f}"
    return med if len(v) == 1 else f"{med} [{min(v):.{prec}f}-{max(v):.{prec}f}]"


ref = "reference" if "reference" in modes else None
# The program's own registration is the floor of a copy in place: its ratio
# is shown beside the rewrite's, and the rewrite's ratio to it.
ratio_modes = [m for m in modes if m.startswith(("rewrite", "registered"))] if ref else []
floor = next((m for m in ("registered_portable", "registered") if m in modes), None)
BAR = 0.90
print(f"\nGB/s: bandwidthTest's figure (bytes / summed copy times, 1e9 B/s), median over {rounds} round(s) [min-max];"
      "\nx/reference: the paired ratio of each round, median [min-max]"
      + (f"; * marks a rewrite median below the bar ({BAR:.2f})" if ratio_modes else "")
      + (f"\nrewrite/{floor}: the rewrite against the program's own registration (the floor of a copy in place)"
         if floor and "rewrite" in modes else ""))
# Columns wide enough for the longest mode's name (and its ratio's), a space between.
w = max(20, 2 + max(len(m) for m in modes))
ratios = [(m, ref) for m in ratio_modes] + ([("rewrite", floor)] if floor and "rewrite" in modes else [])
print(f"{'size':>8} {'dir':>4}" + "".join(f"{m:>{w}}" for m in modes)
      + "".join(f"{a + '/' + ('ref' if b == ref else b):>{w + 6}}" for a, b in ratios))
for d, s in cases:
    gb = lambda m: {r: float(kv["mean_gbps"]) for r, kv in runs[(d, s, m)].items()}
    row = [spread(list(gb(m).values())) for m in modes]
    for m, base in ratios:
        a, b = gb(m), gb(base)
        paired = [a[r] / b[r] for r in a if r in b and b[r] > 0]
        mark = "*" if base == ref and m.startswith("rewrite") and paired and statistics.median(paired) < BAR else " "
        row.append(spread(paired, 2) + mark)
    print(f"{size_name(s):>8} {d:>4}" + "".join(f"{c:>{w}}" for c in row[:len(modes)])
          + "".join(f"{c:>{w + 6}}" for c in row[len(modes):]))

print(f"\nthe buffer's first two copies and the median of the rest (µs, each the median over rounds): first, second / rest")
print(f"{'size':>8} {'dir':>4}" + "".join(f"{m:>{w + 4}}" for m in modes))
for d, s in cases:
    row = []
    for m in modes:
        v = list(runs[(d, s, m)].values())
        if not v:
            row.append("-")
            continue
        first = [[float(x) for x in kv["first_us"].split(",")] for kv in v]
        med = lambda xs: statistics.median(xs)
        row.append(f"{med([f[0] for f in first]):.0f}, {med([f[1] for f in first]):.0f} / "
                   f"{med([float(kv['rest_median_us']) for kv in v]):.0f}")
    print(f"{size_name(s):>8} {d:>4}" + "".join(f"{c:>{w + 4}}" for c in row))
EOF
