#!/usr/bin/env bash
# Hugging Face generate() (bench/hf_generate.py: a small GPT-2, greedy, many
# tiny copies and a read per token) without cuxfer, observed and rewritten,
# with the noise measured beside it (docs/benchmarks.md).
#
#   bash bench/run_hf_generate.sh [--build-dir DIR] [--rounds R] [--modes "..."] [-- ARGS]
#
# Modes, interleaved round by round so that drift hits every mode alike, each
# run a fresh process:
#   plain     no cuxfer
#   plain_aa  no cuxfer again: plain_aa / plain is the noise (A/A)
#   observe   `cuxfer record` (default recording)
#   rewrite   `cuxfer record --rewrite=pin`
# Prints per mode the median over rounds of each run's median generate() time
# (caller's clock) and of its CUDA-event time, with the range over rounds;
# then each mode over plain, paired round by round, median [min-max]. Every
# run's output tokens must be the same (greedy decoding of seeded weights):
# exit 1 otherwise.
#
# Options:
#   --build-dir DIR  build tree (default: build/; its bin/cuxfer records)
#   --rounds R       rounds (default 5)
#   --modes LIST     space or comma separated (default "plain plain_aa observe rewrite")
#   -- ARGS          passed to hf_generate.py (e.g. --calls 60 --new-tokens 128)
# PYTHON names the interpreter (default python3). Exit status: 0; 1 a run
# failed or the tokens differ; 2 bad arguments; 77 no torch, transformers or GPU.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"
ROUNDS=5
MODES="plain plain_aa observe rewrite"
while (($#)); do
  case "$1" in
    --build-dir) BUILD="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --modes) MODES="$2"; shift 2 ;;
    --) shift; break ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_hf_generate: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "run_hf_generate: bad --rounds '$ROUNDS'" >&2; exit 2; }
read -r -a MODE_LIST <<<"${MODES//,/ }"
for m in "${MODE_LIST[@]}"; do
  case "$m" in
    plain | plain_aa | observe | rewrite) ;;
    *) echo "run_hf_generate: unknown mode '$m' (plain, plain_aa, observe, rewrite)" >&2; exit 2 ;;
  esac
done
PY=${PYTHON:-python3}
CUX="$BUILD/bin/cuxfer"
[[ -x "$CUX" ]] || { echo "run_hf_generate: $CUX not built" >&2; exit 1; }
nvidia-smi -L 2>/dev/null | head -1 || true

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
SCRIPT="$ROOT/bench/hf_generate.py"
for ((r = 1; r <= ROUNDS; r++)); do
  for m in "${MODE_LIST[@]}"; do
    case "$m" in
      plain | plain_aa) cmd=("$PY" "$SCRIPT") ;;
      observe) cmd=("$CUX" record -q -o "$TMP/trace" -- "$PY" "$SCRIPT") ;;
      rewrite) cmd=("$CUX" record -q --rewrite=pin -o "$TMP/trace" -- "$PY" "$SCRIPT") ;;
    esac
    rc=0
    "${cmd[@]}" "$@" >"$TMP/out" 2>&1 || rc=$?
    if ((rc == 0)) && [[ $m == rewrite && $r == 1 ]]; then
      "$CUX" report --no-symbols "$TMP/trace" >"$TMP/report.txt" 2>&1 || true
    fi
    rm -rf "$TMP/trace"
    if ((rc == 77)); then tail -1 "$TMP/out"; exit 77; fi
    if ((rc != 0)); then
      echo "run_hf_generate: $m (round $r) exited $rc:" >&2
      tail -8 "$TMP/out" >&2
      exit 1
    fi
    line=$(grep -E '^generate ' "$TMP/out" | tail -1 || true)
    echo "round=$r mode=$m $line" | tee -a "$TMP/results"
  done
done
if [[ -s $TMP/report.txt ]]; then
  echo "== the rewritten run's report (round 1), its transfer lines:"
  grep -iE "calls|staged|registered|passed through|copies" "$TMP/report.txt" | head -12
fi

python3 - "$TMP/results" "$ROUNDS" "${MODE_LIST[*]}" <<'PYEOF'
import statistics, sys
from collections import defaultdict

path, rounds, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
runs = defaultdict(dict)
for line in open(path):
    kv = dict(f.split("=", 1) for f in line.split() if "=" in f)
    if "median_ms" in kv:
        runs[kv["mode"]][int(kv["round"])] = kv
missing = [f"{m} round {r}" for m in modes for r in range(1, rounds + 1) if r not in runs[m]]
tokens = {kv["tokens"] for m in runs for kv in runs[m].values()}
def spread(v, prec=2):
    v = list(v)
    if not v:
        return "-"
    med = f"{statistics.median(v):.{prec}f}"
    return med if len(v) == 1 else f"{med} [{min(v):.{prec}f}-{max(v):.{prec}f}]"
print(f"\ngenerate(), ms: median over {rounds} round(s) of each run's median [min-max]")
for m in modes:
    print(f"  {m:10} caller's clock {spread(float(kv['median_ms']) for kv in runs[m].values()):>24}"
          f"   CUDA events {spread(float(kv['event_median_ms']) for kv in runs[m].values()):>24}")
if "plain" in runs:
    print("each mode / plain, paired round by round: median [min-max]")
    for m in modes:
        if m == "plain":
            continue
        pr = [float(runs[m][r]["median_ms"]) / float(runs["plain"][r]["median_ms"]) for r in runs[m] if r in runs["plain"]]
        print(f"  {m:10} {spread(pr, 3)}")
bad = False
if missing:
    print("run_hf_generate: no result line from", ", ".join(missing), file=sys.stderr)
    bad = True
if len(tokens) > 1:
    print(f"run_hf_generate: the output tokens differ between runs: {sorted(tokens)}", file=sys.stderr)
    bad = True
else:
    print(f"output tokens identical in every run ({next(iter(tokens), '-')})")
sys.exit(1 if bad else 0)
PYEOF
