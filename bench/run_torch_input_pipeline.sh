#!/usr/bin/env bash
# The input pipeline users run (bench/torch_input_pipeline.py: a DataLoader
# with 4 workers feeding ~38.5 MB batches to a small conv net), with and
# without the pinned rewrite, against its floor (docs/benchmarks.md).
#
#   bash bench/run_torch_input_pipeline.sh [--build-dir DIR] [--rounds R] [--modes "..."] [--check] [-- ARGS]
#
# Modes, interleaved round by round so that drift hits every mode alike:
#   floor           the host memcpy of each batch into a reused buffer at the
#                   staging threads' count (torch_input_pipeline.py --floor; no cuxfer)
#   plain           pin_memory=False, no cuxfer
#   rewrite         pin_memory=False under `cuxfer record --rewrite=pin`
#   pinned          pin_memory=True, no cuxfer
#   pinned_rewrite  pin_memory=True under `cuxfer record --rewrite=pin`
# Prints per mode the median over rounds of each run's median step time, .to()
# call time, .to() stream time and loader wait (ms) with their range over
# rounds; then, paired round by round (drift cancels), the rewritten .to() over
# the floor, and rewrite / plain and pinned_rewrite / pinned.
#
# Options:
#   --build-dir DIR  build tree (default: build/; its bin/cuxfer records)
#   --rounds R       rounds (default 5)
#   --modes LIST     space or comma separated (default "floor plain rewrite pinned pinned_rewrite")
#   --check          exit 1 unless every run printed its line
#   -- ARGS          passed to torch_input_pipeline.py (e.g. --steps 200, --blocking)
# PYTHON names the interpreter (default python3). Exit status: 0; 1 a run
# failed; 2 bad arguments; 77 no torch or no GPU.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"
ROUNDS=5
MODES="floor plain rewrite pinned pinned_rewrite"
CHECK=0
while (($#)); do
  case "$1" in
    --build-dir) BUILD="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --modes) MODES="$2"; shift 2 ;;
    --check) CHECK=1; shift ;;
    --) shift; break ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_torch_input_pipeline: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "run_torch_input_pipeline: bad --rounds '$ROUNDS'" >&2; exit 2; }
read -r -a MODE_LIST <<<"${MODES//,/ }"
for m in "${MODE_LIST[@]}"; do
  case "$m" in
    floor | plain | rewrite | pinned | pinned_rewrite) ;;
    *) echo "run_torch_input_pipeline: unknown mode '$m' (floor, plain, rewrite, pinned, pinned_rewrite)" >&2; exit 2 ;;
  esac
done

PY=${PYTHON:-python3}
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  echo "run_torch_input_pipeline: no torch ($PY cannot import it): skipping"
  exit 77
fi
if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" >/dev/null 2>&1; then
  echo "run_torch_input_pipeline: no GPU (torch.cuda.is_available() is False): skipping"
  exit 77
fi
CUX="$BUILD/bin/cuxfer"
[[ -x "$CUX" ]] || { echo "run_torch_input_pipeline: $CUX not built" >&2; exit 1; }
nvidia-smi -L 2>/dev/null | head -1 || true

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
SCRIPT="$ROOT/bench/torch_input_pipeline.py"
REC=("$CUX" record -q --rewrite=pin -o "$TMP/trace" --)
for ((r = 1; r <= ROUNDS; r++)); do
  for m in "${MODE_LIST[@]}"; do
    case "$m" in
      floor) cmd=("$PY" "$SCRIPT" --floor) ;;
      plain) cmd=("$PY" "$SCRIPT" --pin-memory 0) ;;
      rewrite) cmd=("${REC[@]}" "$PY" "$SCRIPT" --pin-memory 0) ;;
      pinned) cmd=("$PY" "$SCRIPT" --pin-memory 1) ;;
      pinned_rewrite) cmd=("${REC[@]}" "$PY" "$SCRIPT" --pin-memory 1) ;;
    esac
    rc=0
    "${cmd[@]}" "$@" >"$TMP/out" 2>&1 || rc=$?
    rm -rf "$TMP/trace"
    if ((rc == 77)); then tail -1 "$TMP/out"; exit 77; fi
    if ((rc != 0)); then
      echo "run_torch_input_pipeline: $m (round $r) exited $rc:" >&2
      tail -8 "$TMP/out" >&2
      exit 1
    fi
    line=$(grep -E '^(config|floor) ' "$TMP/out" | tail -1 || true)
    echo "round=$r mode=$m $line" | tee -a "$TMP/results"
  done
done

python3 - "$TMP/results" "$CHECK" "$ROUNDS" "${MODE_LIST[*]}" <<'EOF'
import statistics, sys
from collections import defaultdict

path, check, rounds, modes = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), sys.argv[4].split()
runs = defaultdict(dict)  # mode -> round -> fields
for line in open(path):
    kv = dict(f.split("=", 1) for f in line.split() if "=" in f)
    if "step_ms" in kv or "floor_ms" in kv:
        runs[kv["mode"]][int(kv["round"])] = kv
missing = [f"{m} round {r}" for m in modes for r in range(1, rounds + 1) if r not in runs[m]]
if missing:
    print("run_torch_input_pipeline: no result line from", ", ".join(missing), file=sys.stderr)
    if check:
        sys.exit(1)


def values(mode, field):
    return {r: float(kv[field]) for r, kv in runs[mode].items() if field in kv}


def spread(v, prec=2):
    v = list(v)
    if not v:
        return "-"
    med = f"{statistics.median(v):.{prec}f}"
    return med if len(v) == 1 else f"{med} [{min(v):.{prec}f}-{max(v):.{prec}f}]"


def paired(a, b):
    return [a[r] / b[r] for r in a if r in b and b[r] > 0]


print(f"\nms, median over {rounds} round(s) of each run's median [min-max over rounds]")
cols = (("step", "step_ms"), (".to()", "to_ms"), (".to() stream", "to_gpu_ms"), ("loader wait", "wait_ms"))
print(f"{'mode':<16}" + "".join(f"{c:>24}" for c, _ in cols))
for m in modes:
    if m != "floor" and runs[m]:
        print(f"{m:<16}" + "".join(f"{spread(values(m, f).values()):>24}" for _, f in cols))
if runs["floor"]:
    kv = next(iter(runs["floor"].values()))
    print(f"\nfloor: {kv['batch_mb']} MB batch, memmove by {kv['threads']} threads into a reused buffer as it"
          f" arrives: {spread(values('floor', 'floor_ms').values(), 3)} ms"
          f" ({spread(values('floor', 'floor_gbps').values())} GB/s); the same batch again:"
          f" {spread(values('floor', 'mapped_ms').values(), 3)} ms")
print("\nratios, paired round by round, median [min-max]:")
for name, a, fa, b, fb in (("rewritten .to() / floor", "rewrite", "to_ms", "floor", "floor_ms"),
                           ("rewrite / plain, .to()", "rewrite", "to_ms", "plain", "to_ms"),
                           ("rewrite / plain, step", "rewrite", "step_ms", "plain", "step_ms"),
                           ("pinned_rewrite / pinned, step", "pinned_rewrite", "step_ms", "pinned", "step_ms"),
                           ("pinned_rewrite / pinned, .to()", "pinned_rewrite", "to_ms", "pinned", "to_ms")):
    p = paired(values(a, fa), values(b, fb))
    if p:
        print(f"  {name:<32}{spread(p)}")
EOF
