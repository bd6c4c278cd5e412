#!/usr/bin/env bash
# Where a recorded copy's time goes, phase by phase, on the GPU machine
# (docs/benchmarks.md, "Sixteenth session"): builds the shim with
# -DCUXFER_PHASE_PROBE=ON (and the lfence reads unless PROBE_LFENCE=0) in $PB
# (default /tmp/pb), then runs bench/call_overhead's PROBE_CASES (default
# htod_pinned) under the capture range, recorded and unrecorded blocks of one
# process, PROBE_ROUNDS times (default 2), and prints the probe's table.
# Usage: export OUT; bash devtools/gpu_phase_probe.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PB=${PB:-/tmp/pb}
source devtools/gpu_env.sh
lfence=ON; [ "${PROBE_LFENCE:-1}" = 0 ] && lfence=OFF
cmake -S . -B "$PB" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUXFER_BUILD_TESTS=OFF -DCUXFER_PHASE_PROBE=ON \
  -DCUXFER_PHASE_PROBE_LFENCE=$lfence > "$OUT/probe_configure.log" 2>&1 &&
  cmake --build "$PB" -j16 --target cuxfer_shim call_overhead > "$OUT/probe_build.log" 2>&1 ||
  { echo "gpu_phase_probe: build failed"; tail -20 "$OUT/probe_build.log"; exit 1; }
traces=$(mktemp -d)
for r in $(seq "${PROBE_ROUNDS:-2}"); do
  for c in ${PROBE_CASES:-htod_pinned}; do
    echo "== round $r, $c (lfence $lfence)"
    taskset -c "${PROBE_CPUS:-2-9}" env LD_PRELOAD="$PB/lib/libcuxfer.so" CUXFER_CAPTURE_RANGE=cudaProfilerApi \
      CUXFER_OUTPUT_DIR="$traces" "$PB/bench/call_overhead" --case "$c" -n "${PROBE_N:-100000}" --toggle 5000 2>&1 |
      grep -E "^case=|^phase_probe" | sed 's/ pair_ratios=.*//'
    rm -rf "${traces:?}"/*
  done
done
rm -rf "$traces"
