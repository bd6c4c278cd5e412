#!/usr/bin/env bash
# Job summaries of traces with NVTX ranges, managed memory and content
# fingerprints (bench/analyzer_throughput --nvtx --managed --fingerprints,
# four processes of one job), end to end: the report of summaries — one of
# all, one per trace, a summary of summaries, summaries mixed with traces —
# is the report of the traces in text, JSON, --csv and --ranges-csv, but for
# the one note a report of summaries adds; an older summary without these
# parts is read and says so in one line; `check` of the summaries gives the
# traces' verdicts (NVTX range entries included).
#   run_summary_parts.sh ANALYZER_THROUGHPUT CUXFER DIR
set -euo pipefail
gen=$1 cuxfer=$2 dir=$3
rm -rf "$dir"; mkdir -p "$dir/run"; cd "$dir"
fail() { echo "FAIL: $*"; exit 1; }
export COLUMNS=100
for pid in 4242 4243 4244 4245; do
  "$gen" --events 40000 --threads 4 --sites 40 --nvtx --managed --fingerprints --pid $pid --rounds 0 --keep \
    --out run/cuxfer-app-$pid.trace >/dev/null
done

# Every output of `cuxfer report ARGS...` as NAME.txt, NAME.json, NAME.csv, NAME.ranges.csv.
outputs() {
  local name=$1; shift
  "$cuxfer" report --no-symbols "$@" > "$name.txt"
  "$cuxfer" report --no-symbols --json "$@" > "$name.json"
  "$cuxfer" report --no-symbols --csv "$@" > "$name.csv"
  "$cuxfer" report --no-symbols --ranges-csv "$@" > "$name.ranges.csv"
}
# A text report up to its notes (the last section).
before_notes() { python3 -c 'import sys; print(open(sys.argv[1]).read().split("\nNotes\n")[0].rstrip("\n"))' "$1"; }
# The outputs of summaries (NAME) equal the traces' (direct): the tables byte
# for byte, the text up to its notes, the JSON with its notes but the
# summaries' own.
same() {
  local name=$1
  cmp -s direct.csv "$name.csv" || fail "$name: --csv differs from the traces'"
  cmp -s direct.ranges.csv "$name.ranges.csv" || fail "$name: --ranges-csv differs from the traces'"
  cmp -s <(before_notes direct.txt) <(before_notes "$name.txt") ||
    { diff <(before_notes direct.txt) <(before_notes "$name.txt") | head -20; fail "$name: the text differs"; }
  python3 - direct.json "$name.json" <<'PY' || fail "$name: the JSON differs from the traces'"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
b["notes"] = [n for n in b["notes"] if not n.startswith("from summaries:")]
if a != b:
    for k in a:
        if a[k] != b.get(k): print("differs:", k)
    sys.exit(1)
PY
}

"$cuxfer" report --no-symbols --no-profile run > direct.txt
"$cuxfer" report --no-symbols --no-profile --json run > direct.json
"$cuxfer" report --no-symbols --no-profile --csv run > direct.csv
"$cuxfer" report --no-symbols --no-profile --ranges-csv run > direct.ranges.csv
for part in '"duplicate_uploads"' '"round_trips"' '"managed_migrations"' '"on_demand_ns"' 'train_step / forward'; do
  grep -q "$part" direct.json || fail "the traces' report has no $part: the test lost its point"
done
[ "$(wc -l < direct.ranges.csv)" -gt 10 ] || fail "the traces' range table is nearly empty: the test lost its point"

# One summary of all; one per trace; a summary of summaries; summaries and traces mixed.
"$cuxfer" summarize --no-symbols -o all.sum run 2>/dev/null
outputs all all.sum
same all
for pid in 4242 4243 4244 4245; do
  "$cuxfer" summarize --no-symbols -o $pid.sum run/cuxfer-app-$pid.trace 2>/dev/null
done
outputs single 4245.sum 4243.sum 4244.sum 4242.sum
same single
"$cuxfer" summarize -o tree.sum 4242.sum 4243.sum 2>/dev/null
outputs tree 4245.sum tree.sum 4244.sum
same tree
outputs mixed tree.sum run/cuxfer-app-4244.trace run/cuxfer-app-4245.trace
same mixed
echo "one summary, one per trace, a tree, mixed with traces: the traces' report"
ls -l all.sum 4242.sum | awk '{print "size:", $5, $NF}'

# A summary an older cuxfer wrote (without these parts): read, and one line says what it leaves out.
python3 - 4242.sum old.sum <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for p in s["processes"]:
    for part in ("ranges", "managed", "repeated_copies"):
        del p[part]
json.dump(s, open(sys.argv[2], "w"))
PY
"$cuxfer" report --json old.sum 4243.sum 4244.sum 4245.sum > old.json
python3 - old.json <<'PY' || fail "an older summary: its parts not said in one line"
import json, sys
notes = [n for n in json.load(open(sys.argv[1]))["notes"] if "written before they kept" in n]
want = ("summaries written before they kept these parts leave their processes out of them: NVTX ranges (1), "
        "managed memory (1), duplicate_uploads and round_trips (1) (summarize their traces again with this cuxfer)")
if notes != [want]:
    print(notes)
    sys.exit(1)
PY
echo "an older summary: read, and said"

# check: a budget written from the traces (range entries, forbidden findings) gives the
# summaries the traces' verdicts, nothing left unchecked; an older summary's range entry: one line, exit 2.
"$cuxfer" check --no-symbols --write-budget budget.json run 2>/dev/null
grep -q '"nvtx_range"' budget.json || fail "the budget has no NVTX range entry: the test lost its point"
"$cuxfer" check --no-symbols --budget budget.json run > check-traces.txt
"$cuxfer" check --budget budget.json all.sum > check-summary.txt 2> check-err.txt ||
  fail "check of the summary: $(cat check-summary.txt check-err.txt)"
cmp -s check-traces.txt check-summary.txt || fail "check of the summary differs from the traces'"
! grep -q "not checked" check-err.txt || fail "check of the summary left out: $(cat check-err.txt)"
set +e
"$cuxfer" check --budget budget.json old.sum 4243.sum 4244.sum 4245.sum > out.txt 2> err.txt; rc=$?
set -e
[ "$rc" = 2 ] && [ "$(grep -c . err.txt)" = 1 ] && grep -q "checks NVTX range" err.txt ||
  fail "check of an older summary's ranges: exit $rc, $(cat err.txt)"
echo "check of summaries: the traces' verdicts"

# --range still needs the traces: one line, exit 2.
set +e
"$cuxfer" report --range train_step all.sum > out.txt 2> err.txt; rc=$?
set -e
[ "$rc" = 2 ] && [ "$(wc -l < err.txt)" = 1 ] && grep -q "needs the events" err.txt ||
  fail "--range with summaries: exit $rc, $(cat err.txt)"

cd /; rm -rf "$dir"
echo ok
