#!/usr/bin/env bash
# `cuxfer report` of traces with CUPTI's GPU records is streamed, their
# records joined to the calls a block at a time (model::StreamedGpuJoin), and
# is byte for byte the report made holding the events (--no-stream makes it
# that way), as text, as JSON and as HTML (whose timeline colours each
# record by the call it joined): records late, early, out of
# order, missing or fitting no call (analyzer_throughput --gpu joined); with
# another process's trace beside it (the notes' order); and where the first
# cycle's records come only at the end of the trace, past the window
# (--gpu late), the report is still the same, made holding the events, and
# says so in one line that names the trace and why.
#   check_report_streamed_gpu.sh ANALYZER_THROUGHPUT CUXFER DIR
set -euo pipefail
bench=$1 cuxfer=$2 dir=$3
rm -rf "$dir"
mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$bench" --events 150000 --rounds 1 --gpu joined --out "$dir/joined.trace" --keep >/dev/null
"$bench" --events 150000 --threads 3 --rounds 1 --gpu late --out "$dir/late.trace" --keep >/dev/null
"$bench" --events 20000 --rounds 1 --out "$dir/cpu.trace" --keep >/dev/null
# A hundred allocations and frees to a copy: more calls than the window holds
# between records joined, streamed all the same (the joined copies hold none
# behind them); a thousand to a copy: a copy whose record never came holds
# its look-back's copies and all the calls among them, past the window.
"$bench" --events 600000 --rounds 1 --gpu joined --allocs 100 --out "$dir/allocs.trace" --keep >/dev/null
"$bench" --events 1500000 --rounds 1 --gpu joined --allocs 1000 --out "$dir/allocs-many.trace" --keep >/dev/null

# same LINES TRACE...: the streamed and whole reports are the same, and the
# streamed one said LINES lines on stderr.
same() {
  local lines=$1
  shift
  for format in "" "--json"; do
    "$cuxfer" report --no-symbols --no-profile $format -o "$dir/streamed" "${@/#/$dir/}" 2>"$dir/err"
    "$cuxfer" report --no-symbols --no-profile $format --no-stream -o "$dir/whole" "${@/#/$dir/}" 2>/dev/null
    cmp "$dir/streamed" "$dir/whole" || fail "streamed and whole reports differ (${format:-text}): $*"
    test "$(wc -l <"$dir/err")" -eq "$lines" || { cat "$dir/err"; fail "expected $lines lines on stderr: $*"; }
  done
  "$cuxfer" report --no-symbols --no-profile --html "$dir/streamed.html" -o /dev/null "${@/#/$dir/}" 2>/dev/null
  "$cuxfer" report --no-symbols --no-profile --no-stream --html "$dir/whole.html" -o /dev/null "${@/#/$dir/}" 2>/dev/null
  cmp "$dir/streamed.html" "$dir/whole.html" || fail "streamed and whole HTML reports differ: $*"
}
same 0 joined.trace
grep -q "GPU records joined to calls by time, size and kind" "$dir/streamed" || fail "no GPU records joined"
same 0 joined.trace cpu.trace
same 0 cpu.trace joined.trace
same 1 late.trace
grep -q "too far from their calls" "$dir/err" || fail "the fallback is not said"
grep -q "^cuxfer report: $dir/late.trace (pid " "$dir/err" || fail "the fallback does not name the trace"
same 1 cpu.trace late.trace
same 0 allocs.trace
grep -q "GPU records joined to calls by time, size and kind" "$dir/streamed" || fail "no GPU records joined (allocs)"
same 1 allocs-many.trace
grep -q "calls wait for the GPU records" "$dir/err" || fail "the held calls' fallback is not said"

# Streamed, not read whole: a fraction of the memory of the report that holds
# the events (of a million: the join's window alone is about that of 150,000).
if [ -x /usr/bin/time ]; then
  "$bench" --events 1000000 --rounds 0 --gpu joined --out "$dir/joined-big.trace" --keep >/dev/null
  /usr/bin/time -f %M -o "$dir/rss" "$cuxfer" report --no-symbols --no-profile -o "$dir/streamed" "$dir/joined-big.trace"
  /usr/bin/time -f %M -o "$dir/rss-whole" "$cuxfer" report --no-symbols --no-profile --no-stream \
    -o "$dir/whole" "$dir/joined-big.trace" 2>/dev/null
  echo "peak resident: streamed $(cat "$dir/rss") KiB, whole $(cat "$dir/rss-whole") KiB"
  test "$(cat "$dir/rss")" -lt $(($(cat "$dir/rss-whole") * 2 / 3)) || fail "the report with GPU records was not streamed"
fi
echo ok
