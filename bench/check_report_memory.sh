#!/usr/bin/env bash
# `cuxfer report` of one big trace in bounded memory (docs/benchmarks.md,
# "Analyzer and trace size"): the peak resident set of a report of 4N events
# is about that of N events (it does not grow with the events), and the
# streamed report is byte for byte the one made holding every event (--html
# makes the report that way and still prints it), as text and as JSON. The
# same of a Python program's trace, and of traces with CUPTI's GPU records
# (one a copy, as on a real GPU), which the streamed report joins to the
# calls a block at a time. And of a trace whose threads push NVTX ranges
# (with GPU records), whose range table the streamed report sums per range
# stack, call site and class.
#   check_report_memory.sh ANALYZER_THROUGHPUT CUXFER DIR [EVENTS]
set -euo pipefail
bench=$1 cuxfer=$2 dir=$3 events=${4:-1000000}
command -v /usr/bin/time >/dev/null || { echo "SKIP: /usr/bin/time is not installed"; exit 77; }
rm -rf "$dir"
mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT

# Peak resident set in KiB of `cuxfer report` of the trace $1 (text to $2).
peak_kib() {
  /usr/bin/time -f %M -o "$dir/rss" "$cuxfer" report --no-symbols --no-profile -o "$2" "$1"
  cat "$dir/rss"
}

"$bench" --events "$events" --rounds 1 --out "$dir/small.trace" --keep >/dev/null
"$bench" --events $((4 * events)) --rounds 1 --out "$dir/big.trace" --keep >/dev/null
small=$(peak_kib "$dir/small.trace" "$dir/small.txt")
big=$(peak_kib "$dir/big.trace" "$dir/big.txt")
echo "peak resident: $events events ${small} KiB, $((4 * events)) events ${big} KiB"
# Held events would add 120 bytes each (a 64-byte event and a 56-byte call):
# 3N more events, at least 340 MiB for N = 1M. The allowance is an eighth of it.
allowance=$((3 * events * 120 / 1024 / 8))
test "$big" -le $((small + allowance)) || { echo "FAIL: memory grows with the events (allowance ${allowance} KiB)"; exit 1; }
test "$big" -le $((128 * 1024)) || { echo "FAIL: above 128 MiB"; exit 1; }

for format in "" "--json"; do
  "$cuxfer" report --no-symbols --no-profile $format -o "$dir/streamed" "$dir/small.trace"
  "$cuxfer" report --no-symbols --no-profile $format --html "$dir/r.html" -o "$dir/whole" "$dir/small.trace" 2>/dev/null
  cmp "$dir/streamed" "$dir/whole" || { echo "FAIL: streamed and whole reports differ (${format:-text})"; exit 1; }
done

# A Python program's trace (call sites with Python frames, one in 8 native
# only): streamed as well, with its note on copies without a Python line.
rm -f "$dir/small.trace" "$dir/big.trace"
"$bench" --events "$events" --rounds 0 --python --out "$dir/small-py.trace" --keep >/dev/null
"$bench" --events $((4 * events)) --rounds 0 --python --out "$dir/big-py.trace" --keep >/dev/null
small=$(peak_kib "$dir/small-py.trace" "$dir/small.txt")
big=$(peak_kib "$dir/big-py.trace" "$dir/big.txt")
echo "peak resident with Python frames: $events events ${small} KiB, $((4 * events)) events ${big} KiB"
test "$big" -le $((small + allowance)) || { echo "FAIL: memory grows with the events of a Python trace (allowance ${allowance} KiB)"; exit 1; }
test "$big" -le $((128 * 1024)) || { echo "FAIL: above 128 MiB with Python frames"; exit 1; }
grep -q "have no Python line" "$dir/big.txt" || { echo "FAIL: no note on copies without a Python line"; exit 1; }
for format in "" "--json"; do
  "$cuxfer" report --no-symbols --no-profile $format -o "$dir/streamed" "$dir/small-py.trace"
  "$cuxfer" report --no-symbols --no-profile $format --html "$dir/r.html" -o "$dir/whole" "$dir/small-py.trace" 2>/dev/null
  cmp "$dir/streamed" "$dir/whole" || { echo "FAIL: streamed and whole reports differ with Python frames (${format:-text})"; exit 1; }
done

# With GPU records: held, each event would add a 48-byte record too.
rm -f "$dir/small-py.trace" "$dir/big-py.trace"
"$bench" --events "$events" --rounds 0 --gpu joined --out "$dir/small-gpu.trace" --keep >/dev/null
"$bench" --events $((4 * events)) --rounds 0 --gpu joined --out "$dir/big-gpu.trace" --keep >/dev/null
small=$(peak_kib "$dir/small-gpu.trace" "$dir/small.txt")
big=$(peak_kib "$dir/big-gpu.trace" "$dir/big.txt")
echo "peak resident with GPU records: $events events ${small} KiB, $((4 * events)) events ${big} KiB"
allowance=$((3 * events * 168 / 1024 / 8))
test "$big" -le $((small + allowance)) || { echo "FAIL: memory grows with the events and records (allowance ${allowance} KiB)"; exit 1; }
test "$big" -le $((128 * 1024)) || { echo "FAIL: above 128 MiB with GPU records"; exit 1; }
grep -q "GPU records joined to calls by time" "$dir/big.txt" || { echo "FAIL: no GPU records joined"; exit 1; }
for format in "" "--json"; do
  "$cuxfer" report --no-symbols --no-profile $format -o "$dir/streamed" "$dir/small-gpu.trace"
  "$cuxfer" report --no-symbols --no-profile $format --html "$dir/r.html" -o "$dir/whole" "$dir/small-gpu.trace" 2>/dev/null
  cmp "$dir/streamed" "$dir/whole" || { echo "FAIL: streamed and whole reports differ with GPU records (${format:-text})"; exit 1; }
done

# NVTX ranges (one event in 32 a thread's range stack changing), with GPU
# records: the calls' ranges follow them through the join.
rm -f "$dir/small-gpu.trace" "$dir/big-gpu.trace"
"$bench" --events "$events" --rounds 0 --nvtx --gpu joined --out "$dir/small-nvtx.trace" --keep >/dev/null
"$bench" --events $((4 * events)) --rounds 0 --nvtx --gpu joined --out "$dir/big-nvtx.trace" --keep >/dev/null
small=$(peak_kib "$dir/small-nvtx.trace" "$dir/small.txt")
big=$(peak_kib "$dir/big-nvtx.trace" "$dir/big.txt")
echo "peak resident with NVTX ranges: $events events ${small} KiB, $((4 * events)) events ${big} KiB"
test "$big" -le $((small + allowance)) || { echo "FAIL: memory grows with the events of an NVTX trace (allowance ${allowance} KiB)"; exit 1; }
test "$big" -le $((128 * 1024)) || { echo "FAIL: above 128 MiB with NVTX ranges"; exit 1; }
grep -q "NVTX ranges" "$dir/big.txt" || { echo "FAIL: no NVTX range table"; exit 1; }
for format in "" "--json"; do
  "$cuxfer" report --no-symbols --no-profile $format -o "$dir/streamed" "$dir/small-nvtx.trace"
  "$cuxfer" report --no-symbols --no-profile $format --html "$dir/r.html" -o "$dir/whole" "$dir/small-nvtx.trace" 2>/dev/null
  cmp "$dir/streamed" "$dir/whole" || { echo "FAIL: streamed and whole reports differ with NVTX ranges (${format:-text})"; exit 1; }
done
echo ok
