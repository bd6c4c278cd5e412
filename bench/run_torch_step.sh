#!/usr/bin/env bash
# What recording costs a PyTorch training loop (bench/torch_step.py), run
# plain and under `cuxfer record` in each CUPTI mode, interleaved round by
# round; prints each mode's median ms/step and its ratio to plain, with the
# spread of the plain runs as the noise (docs/benchmarks.md).
#
#   bash bench/run_torch_step.sh [--build-dir DIR] [--rounds R] [--modes "plain auto on off"] [-- ARGS]
#
# Modes: plain (no cuxfer), plain_again (no cuxfer either: an A/A control),
# auto/on/off (`cuxfer record --cupti=MODE`). Besides each mode's median it
# prints the median over rounds of the paired ratio mode/plain of the same
# round (drift between rounds cancels) with its interquartile range; the
# plain_again row is the resolution: an effect smaller than its spread
# cannot be told from noise. Two tables: the loop's mean (ms_per_step) and
# its median block of --block steps (block_median_ms: a run's pauses move the
# mean, hardly the block median).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"
ROUNDS=5
MODES="plain auto on off"
while (($#)); do
  case "$1" in
    --build-dir) BUILD="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --modes) MODES="$2"; shift 2 ;;
    --) shift; break ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_torch_step: unknown option '$1'" >&2; exit 2 ;;
  esac
done
CUX="$BUILD/bin/cuxfer"
[[ -x "$CUX" ]] || { echo "run_torch_step: $CUX not built" >&2; exit 1; }
PY=${PYTHON:-python3}
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
for ((r = 1; r <= ROUNDS; r++)); do
  for m in $MODES; do
    rc=0
    if [[ $m == plain || $m == plain_again ]]; then
      line=$("$PY" "$ROOT/bench/torch_step.py" "$@" 2>&1 | tail -1) || rc=$?
    else
      line=$("$CUX" record -q --cupti="$m" -o "$TMP/t" -- "$PY" "$ROOT/bench/torch_step.py" "$@" 2>&1 | tail -1) || rc=$?
      rm -rf "$TMP/t"
    fi
    if ((rc == 77)); then echo "$line"; exit 77; fi
    ((rc == 0)) || { echo "run_torch_step: $m exited $rc: $line" >&2; exit 1; }
    echo "round=$r mode=$m $line" | tee -a "$TMP/results"
  done
done
python3 - "$TMP/results" "$MODES" <<'PYEOF'
import re, statistics, sys
modes = sys.argv[2].split()


def table(metric):
    runs = {}
    for line in open(sys.argv[1]):
        m = re.search(r"round=(\d+) mode=(\w+) .*\b" + metric + r"=([\d.]+)", line)
        if m:
            runs.setdefault(m[2], {})[int(m[1])] = float(m[3])
    return runs


def quartiles(v):
    v = sorted(v)
    if len(v) < 4:
        return v[0], v[-1]
    q = statistics.quantiles(v, n=4)
    return q[0], q[2]


for metric in ("ms_per_step", "block_median_ms"):
    runs = table(metric)
    plain = runs.get("plain", {})
    if not plain:
        continue
    base = statistics.median(plain.values())
    print(f"\n{metric}:\n{'mode':<12}{'median ms/step':>16}{'min':>10}{'max':>10}{'vs plain':>10}"
          f"{'paired ratio':>14}{'IQR':>18}")
    for m in modes:
        v = runs.get(m, {})
        if not v:
            continue
        med = statistics.median(v.values())
        paired = [v[r] / plain[r] for r in v if r in plain] if m != "plain" else []
        pr = f"{statistics.median(paired):.4f}" if paired else ""
        iqr = "{:.4f}-{:.4f}".format(*quartiles(paired)) if paired else ""
        print(f"{m:<12}{med:>16.4f}{min(v.values()):>10.4f}{max(v.values()):>10.4f}{med / base:>10.4f}{pr:>14}{iqr:>18}")
    if len(plain) > 1:
        p = list(plain.values())
        print(f"noise: plain runs spread {100 * (max(p) - min(p)) / base:.1f} % of their median")
PYEOF
