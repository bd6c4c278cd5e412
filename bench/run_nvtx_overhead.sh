#!/usr/bin/env bash
# What an NVTX push+pop costs with cuxfer as the NVTX tool, against NVTX with
# no tool (bench/nvtx_overhead.cpp), ROUNDS interleaved rounds; prints each
# case's median over rounds and the difference. No GPU needed.
#   bash bench/run_nvtx_overhead.sh [--build-dir DIR] [--rounds N] [-n PAIRS]
set -euo pipefail
BUILD=build
ROUNDS=5
N=2000000
while (($#)); do
  case "$1" in
    --build-dir) BUILD="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    -n) N="$2"; shift ;;
    *) echo "run_nvtx_overhead: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done
BIN="$BUILD/bench/nvtx_overhead"
SHIM="$(cd "$BUILD/lib" && pwd)/libcuxfer.so"
[[ -x "$BIN" && -f "$SHIM" ]] || { echo "run_nvtx_overhead: build $BIN and $SHIM first" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for r in $(seq "$ROUNDS"); do
  "$BIN" -n "$N" | sed "s/^/mode=plain /" >> "$TMP/results"
  LD_PRELOAD="$SHIM" NVTX_INJECTION64_PATH="$SHIM" CUXFER_OUTPUT_DIR="$TMP" "$BIN" -n "$N" |
    sed "s/^/mode=cuxfer /" >> "$TMP/results"
done
python3 - "$TMP/results" <<'PY'
import collections, re, statistics, sys
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    kv = dict(re.findall(r"(\w+)=([^\s]+)", line))
    v[(kv["case"], kv["mode"])].append(float(kv["median_ns_per_pair"]))
cases = sorted({c for c, _ in v})
print(f"{'case':<14}{'plain ns':>10}{'cuxfer ns':>11}{'added ns':>10}   (per push+pop pair; median of rounds, spread of cuxfer rounds)")
for c in cases:
    p, x = statistics.median(v[(c, "plain")]), statistics.median(v[(c, "cuxfer")])
    print(f"{c:<14}{p:>10.1f}{x:>11.1f}{x - p:>10.1f}   [{min(v[(c, 'cuxfer')]):.1f}..{max(v[(c, 'cuxfer')]):.1f}]")
PY
