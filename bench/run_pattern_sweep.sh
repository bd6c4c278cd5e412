#!/usr/bin/env bash
# "Never slower", as a benchmark (issue 12; docs/benchmarks.md, "Pattern sweep").
#
#   bash bench/run_pattern_sweep.sh [--build-dir DIR] [--rounds R] [--modes LIST] [--sim|--gpu] [...]
#
# Runs bench/pattern_sweep (every size x sync/async x direction x host-buffer
# pattern x stream, one line per cell) in these modes, interleaved round by
# round so that drift (clock boost, other load) hits every mode alike:
#   baseline         no shim
#   observe          LD_PRELOAD=libcuxfer.so CUXFER_CUPTI=off
#   rewrite          LD_PRELOAD=libcuxfer.so:libcuxfer_memhooks.so CUXFER_REWRITE=pin
#                    (CUPTI at its default, as `cuxfer record --rewrite=pin` runs)
#   rewrite_nocupti  the same with CUXFER_CUPTI=off (not run by default)
# then bench/pattern_sweep_summary.py prints, per cell, the median over rounds
# of each mode, rewrite/baseline for call_us and done_us, the ratio to the
# pinned cell, the baseline's spread between rounds, and flags every cell
# where a rewrite mode is slower than 1.05 x baseline by the caller's clock
# (done_us for sync, call_us and done_us for async) and every pinned cell where
# the rewrite adds more than 150 ns over observe (rewrite_nocupti when it ran).
#
# Options:
#   --build-dir DIR    build tree (default: build/)
#   --rounds R         rounds (default 3)
#   --first-round N    number the rounds from N (default 1): rounds run by
#                      separate commands, each with its own --raw, stay apart
#                      when summarised together with --from
#   --modes LIST       comma list (default baseline,observe,rewrite)
#   --max-size N       largest copy size (K/M/G; default 256M)
#   --reps R           timed reps per cell per run (default: by size, 5..200)
#   --only SPEC        passed to pattern_sweep (dim=v1,v2 or a regex; repeatable)
#   --quick            passed to pattern_sweep (fewer reps, 64 MiB memset)
#   --memset-size N    passed to pattern_sweep (default 256M)
#   --busy-us US       passed to pattern_sweep (default 200)
#   --sim              the simulated CUDA (bench/pattern_sweep-sim); the default
#                      when no GPU is found. Numbers then say nothing.
#   --gpu              insist on the real CUDA (bench/pattern_sweep)
#   --check            exit 1 unless every run printed every cell (bench_pattern_sweep_smoke)
#   --bars             exit 3 if any cell is flagged
#   --raw FILE         also keep the raw lines (`mode=M round=R <line>`) in FILE
#   --summary FILE     also write the per-cell summary (.json: JSON, else TSV)
#   --from FILE        run nothing: summarise raw files kept earlier with --raw
#                      (repeatable; e.g. rounds run by separate commands)
# Exit status: 0; 1 a run failed, a data mismatch, or (--check) a missing cell;
# 2 bad arguments; 3 (--bars) a flagged cell; 77 no GPU.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build"
ROUNDS=3
FIRST=1
MODES="baseline,observe,rewrite"
MODE=auto
CHECK=0
BARS=0
RAW=""
SUMMARY=""
FROM=()
ARGS=()
while (($#)); do
  case "$1" in
    --build-dir) BUILD="$2"; shift ;;
    --rounds) ROUNDS="$2"; shift ;;
    --first-round) FIRST="$2"; shift ;;
    --modes) MODES="$2"; shift ;;
    --max-size | --reps | --only | --memset-size | --busy-us) ARGS+=("$1" "$2"); shift ;;
    --quick) ARGS+=(--quick) ;;
    --sim) MODE=sim ;;
    --gpu) MODE=gpu ;;
    --check) CHECK=1 ;;
    --bars) BARS=1 ;;
    --raw) RAW="$2"; shift ;;
    --summary) SUMMARY="$2"; shift ;;
    --from) FROM+=("$2"); shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_pattern_sweep: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "run_pattern_sweep: bad --rounds '$ROUNDS'" >&2; exit 2; }
[[ $FIRST =~ ^[1-9][0-9]*$ ]] || { echo "run_pattern_sweep: bad --first-round '$FIRST'" >&2; exit 2; }
IFS=, read -r -a MODE_LIST <<<"$MODES"
for m in "${MODE_LIST[@]}"; do
  case "$m" in
    baseline | observe | rewrite | rewrite_nocupti) ;;
    *) echo "run_pattern_sweep: unknown mode '$m' (baseline, observe, rewrite, rewrite_nocupti)" >&2; exit 2 ;;
  esac
done

SUMMARISE=(python3 "$ROOT/bench/pattern_sweep_summary.py" --modes "$MODES")
((BARS)) && SUMMARISE+=(--bars)
[[ -n $SUMMARY ]] && SUMMARISE+=(--summary "$SUMMARY")

if ((${#FROM[@]})); then
  ((CHECK)) && SUMMARISE+=(--check)
  exec "${SUMMARISE[@]}" "${FROM[@]}"
fi

if [[ $MODE == auto ]]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then MODE=gpu; else MODE=sim; fi
fi
if [[ $MODE == sim ]]; then
  BIN="$BUILD/bench/pattern_sweep-sim"
  echo "*** SIMULATED CUDA (tests/simcuda): the numbers say nothing about CUDA or the rewrite's speed ***"
else
  BIN="$BUILD/bench/pattern_sweep"
  nvidia-smi -L 2>/dev/null | head -1 || true
fi
SHIM="$BUILD/lib/libcuxfer.so"
HOOKS="$BUILD/lib/libcuxfer_memhooks.so"
[[ -x "$BIN" ]] || { echo "run_pattern_sweep: $BIN not built (ninja -C $BUILD $(basename "$BIN") cuxfer_shim cuxfer_memhooks)" >&2; exit 1; }
for lib in "$SHIM" "$HOOKS"; do
  [[ -f "$lib" ]] || { echo "run_pattern_sweep: $lib not built" >&2; exit 1; }
done

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
RESULTS="$TMP/results.txt"
: >"$RESULTS"
"$BIN" --list "${ARGS[@]}" >"$TMP/expected" || { echo "run_pattern_sweep: $BIN --list ${ARGS[*]} failed" >&2; exit 2; }
NCELLS=$(grep -c '^cell ' "$TMP/expected" || true)
sed 's/^/mode=expected round=0 /' "$TMP/expected" >>"$RESULTS"

FAILED=0
run_mode() {
  local mode="$1" round="$2"
  local env=()
  case "$mode" in
    baseline) ;;
    observe) env+=(LD_PRELOAD="$SHIM" CUXFER_CUPTI=off) ;;
    rewrite) env+=(LD_PRELOAD="$SHIM:$HOOKS" CUXFER_REWRITE=pin) ;;
    rewrite_nocupti) env+=(LD_PRELOAD="$SHIM:$HOOKS" CUXFER_REWRITE=pin CUXFER_CUPTI=off) ;;
  esac
  [[ $mode != baseline ]] && env+=(CUXFER_OUTPUT_DIR="$TMP/traces")
  mkdir -p "$TMP/traces"
  local rc=0 t0=$SECONDS
  env "${env[@]}" "$BIN" "${ARGS[@]}" >"$TMP/out" 2>"$TMP/stderr" || rc=$?
  sed "s/^/mode=$mode round=$round /" "$TMP/out" >>"$RESULTS"
  if ((rc == 77)); then
    cat "$TMP/out"
    echo "run_pattern_sweep: no GPU ($mode)" >&2
    exit 77
  fi
  if ((rc != 0)); then
    echo "run_pattern_sweep: $mode round $round exited $rc" >&2
    grep '^mismatch ' "$TMP/out" | head -5 >&2 || true
    tail -20 "$TMP/stderr" >&2
    FAILED=1
  fi
  echo "  round $round $mode: rc=$rc, $(grep -c '^cell ' "$TMP/out" || true) cells, $((SECONDS - t0)) s"
  # Anything the shim said (once per mode) is worth seeing.
  if [[ -s "$TMP/stderr" && ! -e "$TMP/said.$mode" ]]; then
    grep -v '^pattern_sweep: data mismatch' "$TMP/stderr" | sed "s/^/[$mode] /" | head -5 >&2 || true
    touch "$TMP/said.$mode"
  fi
  rm -rf "$TMP/traces"
}

echo "pattern_sweep: $NCELLS cells, $ROUNDS round(s), modes ${MODE_LIST[*]} interleaved${ARGS:+ (${ARGS[*]})}"
for ((r = FIRST; r < FIRST + ROUNDS; r++)); do
  for mode in "${MODE_LIST[@]}"; do
    run_mode "$mode" "$r"
  done
done
[[ -n $RAW ]] && cp "$RESULTS" "$RAW"

SUMMARISE+=(--first-round "$FIRST" --rounds "$ROUNDS" --expected "$TMP/expected")
((CHECK)) && SUMMARISE+=(--check)
rc=0
"${SUMMARISE[@]}" "$RESULTS" || rc=$?
if ((FAILED && rc == 0)); then rc=1; fi
exit "$rc"
