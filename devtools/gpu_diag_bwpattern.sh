#!/usr/bin/env bash
# Where the time of a registered copy goes under bandwidthTest's pattern
# (issue 12): devtools/probe_bwtest_pattern.cpp plain, with the app's own
# registration, and under the shim in several configurations; per-copy times
# of the first 10 copies and the median of the rest. GPU machine, $OUT set.
set -u
B=${B:-/tmp/b}
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUXFER_BUILD_TESTS=OFF -DCUXFER_BUILD_BENCH=OFF \
  -DCUXFER_GPU_TESTS=OFF > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
cmake --build "$B" -j16 --target cuxfer_cli cuxfer_shim cuxfer_memhooks > "$OUT/build.log" 2>&1 ||
  { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -40; exit 1; }
g++ -O2 -std=c++17 -I/usr/local/cuda/include devtools/probe_bwtest_pattern.cpp -L/usr/local/cuda/lib64 -lcudart \
  -Wl,-rpath,/usr/local/cuda/lib64 -o "$B/probe" || exit 1
SIZES=${SIZES:-4M 32M 68M}
SHIM="$B/lib/libcuxfer.so"
HOOKS="$B/lib/libcuxfer_memhooks.so"
run() {  # label env...
  local label=$1; shift
  echo "== $label"
  env "$@" timeout 300 "$B/probe" $SIZES 2>&1 | sed "s/^/$label /"
}
for round in 1 2; do
  run plain
  echo "== appreg"; timeout 300 "$B/probe" --appreg $SIZES | sed "s/^/appreg /"
  run observe LD_PRELOAD="$SHIM" CUXFER_OUTPUT_DIR=/tmp
  run rewrite LD_PRELOAD="$SHIM:$HOOKS" CUXFER_REWRITE=pin CUXFER_OUTPUT_DIR=/tmp
  run rewrite_nocupti LD_PRELOAD="$SHIM:$HOOKS" CUXFER_REWRITE=pin CUXFER_CUPTI=off CUXFER_OUTPUT_DIR=/tmp
  run rewrite_bare LD_PRELOAD="$SHIM:$HOOKS" CUXFER_REWRITE=pin CUXFER_CUPTI=off CUXFER_FINGERPRINT=0 \
    CUXFER_STACK_DEPTH=0 CUXFER_OUTPUT_DIR=/tmp
  run stage_only LD_PRELOAD="$SHIM" CUXFER_REWRITE=pin CUXFER_REGISTER=off CUXFER_CUPTI=off CUXFER_OUTPUT_DIR=/tmp
done
mkdir -p /tmp/tr && rm -f /tmp/tr/*
LD_PRELOAD="$SHIM:$HOOKS" CUXFER_REWRITE=pin CUXFER_OUTPUT_DIR=/tmp/tr "$B/probe" 4M 68M > /dev/null
"$B/bin/cuxfer" report /tmp/tr/*.trace > "$OUT/rewrite_report.txt" 2>&1
"$B/bin/cuxfer" report --json -o "$OUT/rewrite_report.json" /tmp/tr/*.trace
cp /tmp/tr/*.trace "$OUT/" 2>/dev/null
