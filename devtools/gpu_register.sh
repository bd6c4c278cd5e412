#!/usr/bin/env bash
# Developer run on the GPU machine for the pinned rewrite's registration:
# GPU tier (rewrite differential tests included, case j of rewrite_exactness
# shown), reused/first-use bandwidth, an example report, and PyTorch without
# the shim / observe only / --rewrite=pin, interleaved round by round.
# Everything lands in $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; B=/tmp/b
source devtools/gpu_env.sh
{
echo "== $(date -u) $(nvidia-smi -L)"
gpu_configure_build
echo "== ctest -L gpu"
(cd $B && timeout ${CTEST_TIMEOUT:-200} ctest -L gpu --output-on-failure -j3 > $OUT/ctest.log 2>&1); echo "ctest rc=$?"
grep -E "tests passed|\*\*\*|Skipped" $OUT/ctest.log | head -20
echo "== rewrite_exactness (rewrite variant) output"
grep -E "^\+ \[|case j|rewrite_exactness: checksum" $B/Testing/Temporary/LastTest.log | head -24
echo "== example: cuxfer record --rewrite=pin -- pageable_loop 8 64M"
$B/bin/cuxfer record -q -o /tmp/ex --rewrite=pin -- $B/testapps/gpu/pageable_loop-cudart_shared 8 64M
$B/bin/cuxfer report /tmp/ex | sed -n '/^Rewrite/,/^$/p;/^Classes/,/^$/p' | head -40
if [ "${BANDWIDTH:-1}" = 1 ]; then
echo "== rewrite bandwidth"
timeout 200 bash bench/run_rewrite_bandwidth.sh --gpu --build-dir $B --rounds ${ROUNDS:-3} --max-size 256M --raw $OUT/bw_raw.log 2>&1 | tail -30
fi
if [ "${CALIBRATE:-0}" = 1 ]; then
echo "== cuxfer calibrate (timed), then record --rewrite=pin with its thresholds"
export CUXFER_PROFILE_DIR=$OUT/profiles
/usr/bin/time -f "calibrate wall %e s" $B/bin/cuxfer calibrate
$B/bin/cuxfer record -q -o /tmp/cal --rewrite=pin -- $B/testapps/gpu/pageable_loop-cudart_shared 4 16M
CUXFER_PROFILE_DIR=$OUT/profiles $B/bin/cuxfer record -o /tmp/cal2 --rewrite=pin -- $B/testapps/gpu/pageable_loop-cudart_shared 2 1M 2>&1 | head -1
unset CUXFER_PROFILE_DIR
echo "== libc hooks"
bash bench/run_libc_hook_overhead.sh --build-dir $B --rounds 7
fi
echo "== PyTorch: none / observe / pin, interleaved x3"
for r in $(seq ${TORCH_ROUNDS:-3}); do
  echo "-- round $r none";    timeout 60 python3 devtools/torch_feed.py
  echo "-- round $r observe"; CUXFER_CUPTI=off CUXFER_REWRITE=off LD_PRELOAD=$B/lib/libcuxfer.so CUXFER_OUTPUT_DIR=/tmp timeout 60 python3 devtools/torch_feed.py
  echo "-- round $r pin";     CUXFER_CUPTI=off CUXFER_REWRITE=pin LD_PRELOAD=$B/lib/libcuxfer.so:$B/lib/libcuxfer_memhooks.so CUXFER_OUTPUT_DIR=/tmp timeout 60 python3 devtools/torch_feed.py
done
} 2>&1 | tee $OUT/log
