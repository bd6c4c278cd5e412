#!/usr/bin/env bash
# `cuxfer report` of one big trace in bounded memory (docs/benchmarks.md,
# "Analyzer and trace size"): the peak resident set of a report of 4N events
# is about that of N events (it does not grow with the events), and the
# streamed report is byte for byte the one made holding every event
# (--no-stream), as text, JSON, both CSV tables and HTML; and
# `report --csv --html` stays within the same bound (the HTML plots are
# gathered as the trace streams, GPU records included). The
# same of a Python program's trace, and of traces with CUPTI's GPU records
# (one a copy, as on a real GPU), which the streamed report joins to the
# calls a block at a time. And of a trace whose threads push NVTX ranges
# (with GPU records), whose range table the streamed report sums per range
# stack, call site and class. And of a trace with content fingerprints (and
# GPU records), whose fingerprinted copies the streamed report keeps, 64
# bytes each (analyses/duplicates.h), for duplicate_uploads and round_trips:
# its memory grows with them, not with the events. And of a trace whose CUPTI
# governor turned the GPU records off for most of it, whose join's second
# pass (copies racing the switch to on) the streamed report makes too. And of
# a trace with managed allocations and CUPTI's unified-memory records (and GPU
# records), which the streamed report attributes as they are read. And of a
# trace with CUPTI's kernel records on two devices (and GPU records), whose
# copies the streamed report measures against the kernels as both are read.
#   check_report_memory.sh ANALYZER_THROUGHPUT CUXFER DIR [EVENTS [KIND]]
# KIND: only the kinds whose name holds it (e.g. "kernels").
set -euo pipefail
bench=$1 cuxfer=$2 dir=$3 events=${4:-1000000} only=${5:-}
command -v /usr/bin/time >/dev/null || { echo "SKIP: /usr/bin/time is not installed"; exit 77; }
rm -rf "$dir"
mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT

# Peak resident set in KiB of `cuxfer report` of the trace $1 (text to $2),
# with the options after them.
peak_kib() {
  local trace=$1 out=$2
  shift 2
  /usr/bin/time -f %M -o "$dir/rss" "$cuxfer" report --no-symbols --no-profile "${report_args[@]}" "$@" -o "$out" "$trace" 2>/dev/null
  cat "$dir/rss"
}

# The options every report below is made with (--range for one kind).
report_args=()

# Traces of N and 4N events, written with the options after the first five
# ($1 names their kind): the report's peak resident set may grow by an eighth
# of what holding 3N more events would add ($3 bytes each: a 64-byte event and
# a 56-byte call, and a 48-byte GPU record where there are records), plus
# what the streamed report keeps of them by design ($4 bytes an event), at
# most 128 MiB in all, and so does `report --csv --html` where $6 is "plots"
# (each kind here); the report says $2 (unless empty); and
# the streamed report is byte for byte the one made holding the events, as
# text, JSON, both CSV tables and HTML.
check_kind() {
  local kind=$1 says=$2 bytes_per_event=$3 kept_per_event=$4 rounds=$5 plots=$6
  shift 6
  [[ -z $only || $kind == *"$only"* ]] || return 0
  "$bench" --events "$events" --rounds "$rounds" "$@" --out "$dir/small.trace" --keep >/dev/null
  "$bench" --events $((4 * events)) --rounds "$rounds" "$@" --out "$dir/big.trace" --keep >/dev/null
  local small big allowance=$((3 * events * bytes_per_event / 1024 / 8 + 3 * events * kept_per_event / 1024))
  small=$(peak_kib "$dir/small.trace" "$dir/small.txt")
  big=$(peak_kib "$dir/big.trace" "$dir/big.txt")
  echo "peak resident ($kind): $events events ${small} KiB, $((4 * events)) events ${big} KiB"
  test "$big" -le $((small + allowance)) || { echo "FAIL: memory grows with the events ($kind, allowance ${allowance} KiB)"; exit 1; }
  test "$big" -le $((128 * 1024)) || { echo "FAIL: above 128 MiB ($kind)"; exit 1; }
  [[ -z $says ]] || grep -q -e "$says" "$dir/big.txt" || { echo "FAIL: the report ($kind) does not say \"$says\""; exit 1; }
  if [[ $plots == plots ]]; then
    small=$(peak_kib "$dir/small.trace" "$dir/small.csv" --csv --html "$dir/small.html")
    big=$(peak_kib "$dir/big.trace" "$dir/big.csv" --csv --html "$dir/big.html")
    echo "peak resident ($kind, --csv --html): $events events ${small} KiB, $((4 * events)) events ${big} KiB"
    test "$big" -le $((small + allowance)) || { echo "FAIL: --html memory grows with the events ($kind)"; exit 1; }
    test "$big" -le $((128 * 1024)) || { echo "FAIL: --html above 128 MiB ($kind)"; exit 1; }
  fi
  for format in "" "--json" "--csv" "--ranges-csv"; do
    local streamed_html=() whole_html=()
    [[ $plots == plots ]] && streamed_html=(--html "$dir/streamed.html") whole_html=(--html "$dir/whole.html")
    "$cuxfer" report --no-symbols --no-profile "${report_args[@]}" $format "${streamed_html[@]}" -o "$dir/streamed" "$dir/small.trace" 2>/dev/null
    "$cuxfer" report --no-symbols --no-profile "${report_args[@]}" $format --no-stream "${whole_html[@]}" -o "$dir/whole" "$dir/small.trace" 2>/dev/null
    cmp "$dir/streamed" "$dir/whole" || { echo "FAIL: streamed and whole reports differ ($kind, ${format:-text})"; exit 1; }
    [[ $plots != plots ]] || cmp "$dir/streamed.html" "$dir/whole.html" || { echo "FAIL: streamed and whole HTML reports differ ($kind)"; exit 1; }
  done
  rm -f "$dir/small.trace" "$dir/big.trace"
}

check_kind plain "" 120 0 1 plots
# A Python program's trace (call sites with Python frames, one in 8 native
# only), with its note on copies without a Python line.
check_kind "Python frames" "have no Python line" 120 0 0 plots --python
# CUPTI's GPU records, joined to the calls a block at a time.
check_kind "GPU records" "GPU records joined to calls by time" 168 0 0 plots --gpu joined
# NVTX ranges (one event in 32 a thread's range stack changing), with GPU
# records: the calls' ranges follow them through the join.
check_kind "NVTX ranges, GPU records" "NVTX ranges" 168 0 0 plots --nvtx --gpu joined
# Content fingerprints (each copy the shim would fingerprint followed by its
# fingerprint: 28 events in 100 are such copies in this mix), with GPU
# records: the report keeps each fingerprinted copy, 24 bytes for its
# fingerprint and 40 for the copy, about 18 bytes an event.
check_kind "content fingerprints, GPU records" "duplicate_uploads" 168 18 0 plots --fingerprints --gpu joined
# GPU records the CUPTI governor turned off and sampled back on (one event in
# 16 with them on), copies racing each change to on: the join's second pass
# is made in its window too.
check_kind "governed GPU records" "GPU time: .* copies and memsets" 168 0 0 plots --gpu joined --governor
# Managed allocations (one event in 1024) and their buffers' unified-memory
# records (256 each: a quarter of a record, 12 bytes, an event), with GPU
# records: the report keeps the allocations and each site's on-demand
# intervals, not the records.
check_kind "managed memory, GPU records" "Managed memory" 180 0 0 plots --managed --gpu joined
# CUPTI's kernel records on two devices (about one per 4 events: 12 bytes an
# event), written in buffer batches after the events they overlap, with GPU
# records: the report measures each copy against the kernels in a window
# (analyses/overlap.h) and keeps neither.
check_kind "kernels, GPU records" "Copy/compute overlap" 180 0 0 plots --kernels --gpu joined
# --range: the calls inside one NVTX range (a name at any depth, then a
# nested path), chosen as they stream, with GPU records, kernel records and fingerprints
# beside them: the references, tally, overlap and duplicates of the kept calls only.
# (Not with --html, which reads whole; nor with managed allocations left out
# whose unified-memory records a later allocation would take: read whole,
# said in one line.)
for range in forward "train_step / backward"; do
  report_args=(--range "$range")
  check_kind "--range '$range'" "--range $range: .* calls ran inside it" 180 18 0 noplots --nvtx --fingerprints --kernels --gpu joined
done
report_args=()
echo ok
