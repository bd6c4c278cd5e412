#!/usr/bin/env bash
# Cost of the shim's libc hooks on malloc/free/mmap (docs/benchmarks.md).
#
#   bash bench/run_libc_hook_overhead.sh [--build-dir DIR] [-n N] [--rounds R] [--check]
#
# Runs build/bench/libc_hook_overhead in three modes, interleaved round by round:
#   baseline  no shim
#   observe   LD_PRELOAD=libcuxfer.so                       (no libc hooks at all)
#   pin       LD_PRELOAD=libcuxfer.so:libcuxfer_memhooks.so CUXFER_REWRITE=pin
#             (every call hooked; large blocks reported to the shim)
# and prints per case the median ns per operation of each mode and the
# difference to the baseline. No CUDA is used; the shim never starts recording.
# (The observe column checks that observe mode leaves the allocator alone.)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"; N=2000000; ROUNDS=5; CHECK=0
while (($#)); do
  case "$1" in
    --build-dir) BUILD="$2"; shift ;;
    -n) N="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --check) CHECK=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_libc_hook_overhead: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done
BIN="$BUILD/bench/libc_hook_overhead"; SHIM="$BUILD/lib/libcuxfer.so"
[[ -x $BIN && -f $SHIM ]] || { echo "run_libc_hook_overhead: build $BIN and $SHIM first" >&2; exit 2; }
RAW="$(mktemp)"; trap 'rm -f "$RAW"' EXIT
for ((r = 0; r < ROUNDS; r++)); do
  BENCH_LABEL=baseline "$BIN" "$N" 1 >>"$RAW"
  BENCH_LABEL=observe LD_PRELOAD="$SHIM" "$BIN" "$N" 1 >>"$RAW"
  BENCH_LABEL=pin CUXFER_REWRITE=pin LD_PRELOAD="$SHIM:$BUILD/lib/libcuxfer_memhooks.so" "$BIN" "$N" 1 >>"$RAW"
done
python3 - "$RAW" "$CHECK" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = dict(kv.split("=", 1) for kv in line.split())
    d[(f["case"], f["label"])].append(float(f["ns_per_op"]))
cases = list(dict.fromkeys(c for c, _ in d))
print(f"{'case':<18}{'baseline ns':>12}{'observe ns':>12}{'pin ns':>10}{'observe +ns':>13}{'pin +ns':>10}")
missing = 0
for c in cases:
    m = {l: statistics.median(d[(c, l)]) if d[(c, l)] else None for l in ("baseline", "observe", "pin")}
    if None in m.values():
        missing += 1
        continue
    print(f"{c:<18}{m['baseline']:>12.1f}{m['observe']:>12.1f}{m['pin']:>10.1f}"
          f"{m['observe'] - m['baseline']:>13.1f}{m['pin'] - m['baseline']:>10.1f}")
sys.exit(1 if (sys.argv[2] == "1" and (missing or len(cases) < 6)) else 0)
PY
