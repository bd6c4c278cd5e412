#!/usr/bin/env bash
# Programs not written for cuxfer, on the GPU machine: NVIDIA's cuda-samples
# bandwidthTest, simpleStreams, simpleMultiCopy, simpleZeroCopy and
# UnifiedMemoryStreams, exported into the ignored .ext/ (never committed; see
# docs/gpu-validation.md, "Programs not written for cuxfer"). This script holds
# no fetched code: it builds them with .ext/build_samples.sh and runs what that built.
# `bash devtools/gpu.sh external` runs it; by hand:
#
#   bash devtools/gpu_external.sh OUTDIR [--tar FILE]
#
# 1. every sample plain, under `cuxfer record` (observe) and `cuxfer record
#    --rewrite=pin`: exit status, PASS line, wall time; reports (text and JSON);
# 2. bandwidthTest --htod --dtoh, --memory=pinned (plain), --memory=pageable (plain)
#    and --memory=pageable under --rewrite=pin, at --mode=range 4 MiB..60 MiB
#    (4, 32, 60 MiB) and at the default 32 MB (quick), static and shared cudart,
#    in $ROUNDS interleaved rounds; GB/s per size, direction and mode, and the
#    ratio rewrite/pinned; each rewritten run's report bytes against the copies
#    bandwidthTest makes (100 per size and direction + 1 initial H2D per size).
# OUTDIR gets runs.tsv, bw.tsv, summary.txt, build.log, logs/, reports/; traces
# go to $TRACES (default /tmp/cuxfer-ext-traces). --tar FILE packs OUTDIR into
# FILE at the end (the device tool brings back at most 8 files).
# OUTDIR, FILE and CUXFER are taken relative to the caller's directory.
# Env: CUXFER (build/bin/cuxfer of this checkout), ROUNDS (2), SAMPLE_TIMEOUT (120 s per program),
# DEADLINE (540 s for all the runs: later runs are skipped and listed as such),
# SKIP_GENERIC=1 / SKIP_MATRIX=1 (leave a part out).
# Exit: 0 all runs passed, 1 some failed, 2 usage/missing cuxfer, 77 no .ext or no GPU.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd) || exit 2
abspath() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }   # against the caller's cwd
OUTDIR=${1:-}
[ -n "$OUTDIR" ] || { echo "usage: $0 OUTDIR [--tar FILE]"; exit 2; }
OUTDIR=$(abspath "$OUTDIR")
shift
TAR=""
while (($#)); do
  case $1 in
    --tar) [ -n "${2:-}" ] || { echo "--tar needs a file"; exit 2; }; TAR=$(abspath "$2"); shift 2 ;;
    *) echo "unknown argument: $1"; exit 2 ;;
  esac
done
CUXFER=$(abspath "${CUXFER:-$ROOT/build/bin/cuxfer}")
cd "$ROOT" || exit 2
if [ ! -d .ext ] || [ ! -f .ext/build_samples.sh ]; then
  echo "no .ext: skipped (export the cuda-samples into .ext/ and carry it; docs/gpu-validation.md)"
  exit 77
fi
[ -x "$CUXFER" ] || { echo "no cuxfer at $CUXFER (build it first, or set CUXFER)"; exit 2; }
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "no GPU: nvidia-smi -L failed; skipped"
  exit 77
fi
ROUNDS=${ROUNDS:-2}
SAMPLE_TIMEOUT=${SAMPLE_TIMEOUT:-120}
DEADLINE=${DEADLINE:-540}
TRACES=${TRACES:-/tmp/cuxfer-ext-traces}
mkdir -p "$OUTDIR/logs" "$OUTDIR/reports" || exit 2
rm -rf "$TRACES" && mkdir -p "$TRACES"
BIN=${EXT_BIN:-$PWD/.ext/bin}   # EXT_BIN: another folder of the same binaries (tests of this script)
RUNS=$OUTDIR/runs.tsv
BW=$OUTDIR/bw.tsv
printf 'label\tsample\tlinkage\tmode\trc\twall_s\tverdict\treport\n' > "$RUNS"
printf 'round\tlinkage\tconfig\tmode\tdirection\tsize\tgbps\n' > "$BW"
T0=$SECONDS

{
echo "== $(date -u '+%F %T UTC') $(nvidia-smi -L | head -4 | tr '\n' ' ')"
echo "== driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1), nvcc: $("$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" --version 2>/dev/null | tail -1)"
echo "== cuxfer $CUXFER, commit $(git describe --always --dirty 2>/dev/null || echo '?'), ROUNDS=$ROUNDS"
echo "== .ext: $(sed -n 2,3p .ext/cuda-samples/SOURCE.txt 2>/dev/null | tr '\n' ' ')"
} | tee "$OUTDIR/summary.txt"

echo "== build (.ext/build_samples.sh)"
bash .ext/build_samples.sh > "$OUTDIR/build.log" 2>&1
echo "build_samples rc=$? ($(grep -c ' OK\| up to date' "$OUTDIR/build.log") built); $(tail -1 "$OUTDIR/build.log")"
grep FAILED "$OUTDIR/build.log"

fails=0
# run_one LABEL SAMPLE LINKAGE MODE BINARY ARGS...  (MODE: plain | observe | rewrite)
run_one() {
  local label=$1 sample=$2 linkage=$3 mode=$4 bin=$5; shift 5
  local log=$OUTDIR/logs/$label.log rep=-
  if [ ! -x "$bin" ]; then
    printf '%s\t%s\t%s\t%s\t-\t-\tNOT BUILT\t-\n' "$label" "$sample" "$linkage" "$mode" >> "$RUNS"
    fails=$((fails + 1)); return
  fi
  if ((SECONDS - T0 > DEADLINE)); then
    printf '%s\t%s\t%s\t%s\t-\t-\tSKIPPED (deadline)\t-\n' "$label" "$sample" "$linkage" "$mode" >> "$RUNS"
    return
  fi
  local cmd=("$bin" "$@")
  case $mode in
    observe) cmd=("$CUXFER" record -q -o "$TRACES/$label" --name "$label" -- "${cmd[@]}") ;;
    rewrite) cmd=("$CUXFER" record -q --rewrite=pin -o "$TRACES/$label" --name "$label" -- "${cmd[@]}") ;;
  esac
  echo "+ ${cmd[*]}" > "$log"
  local t; t=$(date +%s%N)
  timeout -k 10 "$SAMPLE_TIMEOUT" "${cmd[@]}" < /dev/null >> "$log" 2>&1
  local rc=$?
  local ms=$(( ($(date +%s%N) - t) / 1000000 ))
  local wall; wall=$(printf '%d.%02d' $((ms / 1000)) $((ms % 1000 / 10)))
  local verdict
  if ((rc == 124 || rc == 137)); then verdict="TIMEOUT (${SAMPLE_TIMEOUT} s)"
  elif grep -q "Result = FAIL" "$log"; then verdict="FAIL (Result = FAIL, rc $rc)"
  elif ((rc != 0)); then verdict="FAIL (rc $rc)"
  elif grep -q "Result = PASS" "$log"; then verdict="PASS (Result = PASS)"
  else verdict="PASS (rc 0)"; fi
  if [ "$mode" != plain ]; then
    if ls "$TRACES/$label"/*.trace >/dev/null 2>&1; then
      "$CUXFER" report --json -o "$OUTDIR/reports/$label.json" "$TRACES/$label" > /dev/null 2>> "$log" &&
        "$CUXFER" report -o "$OUTDIR/reports/$label.txt" "$TRACES/$label" > /dev/null 2>> "$log" &&
        rep=reports/$label.json
      [ "$rep" != - ] || verdict="$verdict; report failed"
    else
      verdict="$verdict; no trace"
    fi
  fi
  [[ $verdict == PASS* && $verdict != *";"* ]] || fails=$((fails + 1))
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$sample" "$linkage" "$mode" "$rc" "$wall" "$verdict" "$rep" >> "$RUNS"
  echo "  $label: $verdict, $wall s"
}

# bandwidthTest --csv lines -> bw.tsv
collect_bw() {  # ROUND LINKAGE CONFIG MODE LABEL
  [ -f "$OUTDIR/logs/$5.log" ] || return 0
  sed -n 's/^bandwidthTest-\([A-Z2]*\)-[A-Za-z-]*, Bandwidth = \([0-9.]*\) GB\/s, .*Size = \([0-9]*\) bytes.*/\1\t\3\t\2/p' \
    "$OUTDIR/logs/$5.log" | while IFS=$'\t' read -r dir size gbps; do
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$dir" "$size" "$gbps" >> "$BW"
    done
}

# name|binary|args
SAMPLES=(
  "bandwidthTest|bandwidthTest|"
  "simpleStreams|simpleStreams|"
  "simpleMultiCopy|simpleMultiCopy|"
  "simpleZeroCopy|simpleZeroCopy|"
  "simpleZeroCopy-generic|simpleZeroCopy|--use_generic_memory"
  "UnifiedMemoryStreams|UnifiedMemoryStreams|"
)
if [ "${SKIP_GENERIC:-0}" != 1 ]; then
  echo "== each sample plain, observed, rewritten"
  for s in "${SAMPLES[@]}"; do
    IFS='|' read -r name bin args <<<"$s"
    for linkage in static shared; do
      b=$BIN/$bin; [ "$linkage" = shared ] && b=$BIN/$bin-shared
      [ "$linkage" = shared ] && [ ! -e "$b" ] && continue   # -shared only for bandwidthTest, simpleStreams
      for mode in plain observe rewrite; do
        # shellcheck disable=SC2086
        run_one "$name.$linkage.$mode" "$name" "$linkage" "$mode" "$b" $args
      done
    done
  done
fi

if [ "${SKIP_MATRIX:-0}" != 1 ]; then
  echo "== bandwidthTest: pinned / pageable / pageable rewritten, $ROUNDS interleaved rounds"
  RANGE=(--mode=range --start=4194304 --end=71303168 --increment=29360128)
  for round in $(seq 1 "$ROUNDS"); do
    for linkage in static shared; do
      b=$BIN/bandwidthTest; [ "$linkage" = shared ] && b=$BIN/bandwidthTest-shared
      for config in range quick; do
        cfg=(); [ "$config" = range ] && cfg=("${RANGE[@]}")
        for mode in pinned pageable rewrite; do
          mem=pageable; [ "$mode" = pinned ] && mem=pinned
          how=plain; [ "$mode" = rewrite ] && how=rewrite
          label=bw.$linkage.$config.$mode.r$round
          run_one "$label" "bandwidthTest-$config-$mode" "$linkage" "$how" "$b" \
            --memory=$mem "${cfg[@]}" --htod --dtoh --csv
          collect_bw "$round" "$linkage" "$config" "$mode" "$label"
        done
      done
    done
  done
fi

python3 - "$OUTDIR" >> "$OUTDIR/summary.txt" <<'PY'
import csv, json, statistics, sys
from collections import defaultdict
from pathlib import Path
out = Path(sys.argv[1])
runs = list(csv.DictReader(open(out / "runs.tsv"), delimiter="\t"))
bw = list(csv.DictReader(open(out / "bw.tsv"), delimiter="\t"))

def rep(r):
    if r["report"] in ("-", ""):
        return None
    try:
        return json.loads((out / r["report"]).read_text())
    except Exception:
        return None

def dirs(j):
    d = defaultdict(int)
    for c in j.get("classes", []):
        d[c["direction"]] += c["bytes"]
    return d

print("\n== Runs: verdict (* = no trace or no report), wall time (s); observe/rewrite: report H2D/D2H bytes, "
      "rewrite staged/registered bytes")
print(f"{'sample':24s} {'linkage':7s} {'plain':22s} {'observe':22s} {'rewrite':22s}  report")
by = defaultdict(dict)
for r in runs:
    if r["label"].startswith("bw."):
        continue
    by[(r["sample"], r["linkage"])][r["mode"]] = r
for (s, l), m in by.items():
    cells, notes = [], []
    for mode in ("plain", "observe", "rewrite"):
        r = m.get(mode)
        cells.append("-" if not r else f"{r['verdict'].split(' (')[0]}{'*' if ';' in r['verdict'] else ''} {r['wall_s']}")
        j = rep(r) if r else None
        if j:
            d = dirs(j)
            rw = j.get("rewrite", {})
            extra = (f" staged {rw.get('staged_bytes', 0)} reg {rw.get('registered_bytes', 0)}"
                     if mode == "rewrite" else "")
            cupti = ",".join(sorted({(p.get("cupti") or {}).get("state", "?") for p in j.get("processes", [])}))
            notes.append(f"{mode}: H2D {d['H2D']} D2H {d['D2H']} cupti {cupti}{extra}")
    print(f"{s:24s} {l:7s} {cells[0]:22s} {cells[1]:22s} {cells[2]:22s}  {'; '.join(notes)}")
bad = [r for r in runs if not r["verdict"].startswith("PASS") or ";" in r["verdict"]]
print(f"\n{len(runs)} runs, {len(runs) - len(bad)} passed" + (":" if bad else ""))
for r in bad:
    print(f"  {r['label']}: {r['verdict']} (logs/{r['label']}.log)")

if bw:
    print("\n== bandwidthTest GB/s (median over rounds; rewrite = --memory=pageable under cuxfer record --rewrite=pin)")
    g = defaultdict(list)
    for b in bw:
        g[(b["linkage"], b["config"], b["direction"], int(b["size"]), b["mode"])].append(float(b["gbps"]))
    keys = sorted({k[:4] for k in g}, key=lambda k: (k[0] != "static", k[1] != "range", k[3], k[2] != "H2D"))
    print(f"{'linkage':7s} {'config':6s} {'dir':4s} {'size':>10s} {'pinned':>8s} {'pageable':>9s} {'rewrite':>8s} "
          f"{'rw/pinned':>9s} {'rw/pageable':>11s}  rounds (rewrite)")
    for k in keys:
        med = {m: (statistics.median(g[k + (m,)]) if g.get(k + (m,)) else float("nan"))
               for m in ("pinned", "pageable", "rewrite")}
        print(f"{k[0]:7s} {k[1]:6s} {k[2]:4s} {k[3]:10d} {med['pinned']:8.1f} {med['pageable']:9.1f} {med['rewrite']:8.1f} "
              f"{med['rewrite'] / med['pinned']:9.2f} {med['rewrite'] / med['pageable']:11.2f}  "
              f"{', '.join(f'{v:.1f}' for v in g.get(k + ('rewrite',), []))}")
    print("\n== bandwidthTest under --rewrite=pin: report bytes vs the copies it makes "
          "(H2D 101 x size, D2H 100 x size per size)")
    sizes = {"range": [4194304, 33554432, 62914560], "quick": [32000000]}
    for r in runs:
        if not (r["label"].startswith("bw.") and r["mode"] == "rewrite"):
            continue
        j = rep(r)
        cfg = r["label"].split(".")[2]
        want_h2d = sum(101 * s for s in sizes[cfg]); want_d2h = sum(100 * s for s in sizes[cfg])
        if not j:
            print(f"  {r['label']}: no report"); continue
        d = dirs(j); rw = j.get("rewrite", {})
        ok = "exact" if (d["H2D"], d["D2H"]) == (want_h2d, want_d2h) else "DIFFERENT"
        print(f"  {r['label']}: H2D {d['H2D']} (want {want_h2d}) D2H {d['D2H']} (want {want_d2h}) {ok}; "
              f"staged {rw.get('staged_calls', 0)} calls, registered {rw.get('registered_calls', 0)} calls, "
              f"{rw.get('registrations', 0)} registrations, {rw.get('registrations_refused', 0)} refused")
PY
echo "summary python rc=$?" >> "$OUTDIR/summary.txt"
sed -n '/^== Runs/,$p' "$OUTDIR/summary.txt"
echo "== $((SECONDS - T0)) s; files in $OUTDIR (runs.tsv bw.tsv summary.txt build.log logs/ reports/)"
if [ -n "$TAR" ]; then
  tar czf "$TAR" -C "$(dirname "$OUTDIR")" "$(basename "$OUTDIR")" && echo "packed into $TAR ($(du -h "$TAR" | cut -f1))"
fi
((fails == 0)) || { echo "gpu_external: $fails run(s) did not pass"; exit 1; }
echo "gpu_external: all runs passed"
exit 0
