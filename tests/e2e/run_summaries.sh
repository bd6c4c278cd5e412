#!/usr/bin/env bash
# cuxfer summarize and report of summaries, end to end on a generated job
# (bench/gen_rank_traces, 64 ranks on 8 nodes), as the docs' cluster recipes
# run them: a summary per node, a summary of summaries, traces and summaries
# mixed. The report of summaries equals the report of the traces (its JSON,
# notes aside); -j N changes nothing; bad input gets one line and exit 2.
#   run_summaries.sh GEN_RANK_TRACES CUXFER DIR
set -euo pipefail
gen=$1 cuxfer=$2 dir=$3
rm -rf "$dir"; mkdir -p "$dir"; cd "$dir"
fail() { echo "FAIL: $*"; exit 1; }
export COLUMNS=100
"$gen" --ranks 64 --events-per-rank 300 --seed 21 --out run >/dev/null
# The JSON of a report without its notes (a report of summaries says it was made from summaries).
same_json() {
  python3 - "$1" "$2" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for r in (a, b): r.pop("notes", None)
if a != b:
    for k in a:
        if a[k] != b.get(k): print("differs:", k)
    sys.exit(1)
PY
}
"$cuxfer" report --no-symbols --no-profile --json run > direct.json

# A summary per node (srun --ntasks-per-node=1), then a tree: nodes 0-3 merged first.
for n in 0 1 2 3 4 5 6 7; do
  "$cuxfer" summarize --no-symbols -o node$n.sum run/cuxfer-train-rank*-node0$n-*.trace 2>/dev/null
done
"$cuxfer" summarize -o half.sum node0.sum node1.sum node2.sum node3.sum 2>/dev/null
"$cuxfer" report --json node7.sum half.sum node5.sum node4.sum node6.sum > tree.json
same_json direct.json tree.json || fail "report of a tree of summaries differs from the report of the traces"
grep -q "from summaries: made from the processes' summaries" tree.json || fail "report of summaries does not say it was made from summaries"
echo "per-node summaries and a tree of them: same report"

# Summaries and traces mixed.
"$cuxfer" report --no-symbols --json node0.sum half.sum run/cuxfer-train-rank*-node0[4-7]-*.trace > mixed.json
same_json direct.json mixed.json || fail "summaries mixed with traces differ from the traces"
echo "summaries and traces mixed: same report"

# -j: the same summary file and the same report text.
"$cuxfer" summarize --no-symbols -j 1 -o j1.sum run 2>/dev/null
"$cuxfer" summarize --no-symbols -j 4 -o j4.sum run 2>/dev/null
cmp -s j1.sum j4.sum || fail "summarize -j 4 differs from -j 1"
"$cuxfer" report --no-symbols --no-profile -j 1 run > j1.txt
"$cuxfer" report --no-symbols --no-profile -j 3 run > j3.txt
cmp -s j1.txt j3.txt || fail "report -j 3 differs from -j 1"
echo "-j 1 and -j N: identical"

# A summary of another version: one line, exit 2.
sed 's#"cuxfer.summary/1"#"cuxfer.summary/9"#' j1.sum > other-version.sum
set +e
"$cuxfer" report other-version.sum > out.txt 2> err.txt; rc=$?
set -e
[ "$rc" = 2 ] || fail "another version: exit $rc, not 2"
[ "$(wc -l < err.txt)" = 1 ] && grep -q "cuxfer.summary/9" err.txt || fail "another version: $(cat err.txt)"
echo "another version refused: $(cat err.txt)"

# A summary with its own traces: each process counted once, and said.
"$cuxfer" report --no-symbols --json j1.sum run > twice.json
same_json direct.json twice.json || fail "a summary given with its own traces counted them twice"
grep -q "given more than once" twice.json || fail "a summary given with its own traces: not said"
echo "a summary with its own traces: counted once"

# Ranks missing: said with their numbers.
"$cuxfer" report node0.sum node1.sum node2.sum node3.sum node4.sum node5.sum node6.sum > missing.txt
tr -s ' \n' ' ' < missing.txt | grep -q "ranks missing: 8 of world size 64 have no trace or summary here: 56-63" ||
  fail "missing ranks not named: $(grep -A2 'ranks missing' missing.txt)"
echo "missing ranks named"

# Two jobs mixed: refused as for traces, by summarize and by report.
"$gen" --ranks 8 --events-per-rank 50 --seed 99 --out other >/dev/null
"$cuxfer" summarize --no-symbols -o other.sum other 2>/dev/null
set +e
"$cuxfer" report node0.sum other.sum > out.txt 2> err.txt; rc=$?
"$cuxfer" summarize -o both.sum node0.sum other.sum > /dev/null 2> err2.txt; rc2=$?
set -e
[ "$rc" = 2 ] && [ "$rc2" = 2 ] || fail "two jobs: report exit $rc, summarize exit $rc2 (want 2, 2)"
grep -v "warning" err.txt | grep -q . || fail "two jobs: no line said why"
[ ! -e both.sum ] || fail "summarize wrote a summary of two jobs"
echo "two jobs mixed refused: $(grep -v warning err.txt | head -1)"

# What needs the events is refused with summaries, in one line.
set +e
"$cuxfer" report --html x.html node0.sum > out.txt 2> err.txt; rc=$?
set -e
[ "$rc" = 2 ] && [ "$(wc -l < err.txt)" = 1 ] && grep -q "needs the events" err.txt || fail "--html with summaries: exit $rc, $(cat err.txt)"
echo "--html with summaries refused: $(cat err.txt)"

# --csv is the sites' tally (staged bytes included): the summaries' table is the traces'.
"$cuxfer" report --no-symbols --no-profile --csv run > traces.csv
"$cuxfer" report --csv j1.sum > summaries.csv
cmp traces.csv summaries.csv || fail "--csv of summaries differs from --csv of the traces"
echo "--csv of summaries: the traces' table"

cd /; rm -rf "$dir"
echo ok
