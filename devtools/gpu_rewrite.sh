#!/usr/bin/env bash
# Developer run on the GPU machine for the pinned rewrite: GPU tier (exactness
# apps included), bandwidth with and without the rewrite, PyTorch with and
# without it. Everything lands in $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; B=/tmp/b
source devtools/gpu_env.sh
{
echo "== $(date -u) $(nvidia-smi -L) commit $(git rev-parse --short HEAD 2>/dev/null)"
gpu_configure_build
echo "== ctest -L gpu"
(cd $B && timeout 150 ctest -L gpu --output-on-failure -j3 > $OUT/ctest.log 2>&1); echo "ctest rc=$?"
grep -E "tests passed|\*\*\*|Skipped" $OUT/ctest.log | head -20
grep -E "overlap|return" $OUT/ctest.log | head -20
if [ "${BANDWIDTH:-1}" = 1 ]; then
echo "== rewrite bandwidth (default CUXFER_STAGE_MIN)"
timeout 150 bash bench/run_rewrite_bandwidth.sh --gpu --build-dir $B --rounds 2 --max-size 256M --raw $OUT/bw_raw.log 2>&1 | tail -45
fi
echo "== small copies through the runtime API: shim cost with and without stacks (5 interleaved rounds)"
for r in 1 2 3 4 5; do
  $B/bench/rewrite_bandwidth --max-size 4096 --reps 200 --label baseline
  CUXFER_CUPTI=off LD_PRELOAD=$B/lib/libcuxfer.so $B/bench/rewrite_bandwidth --max-size 4096 --reps 200 --label shim_d16
  CUXFER_CUPTI=off CUXFER_STACK_DEPTH=0 LD_PRELOAD=$B/lib/libcuxfer.so $B/bench/rewrite_bandwidth --max-size 4096 --reps 200 --label shim_d0
  CUXFER_CUPTI=off CUXFER_REWRITE=pin LD_PRELOAD=$B/lib/libcuxfer.so:$B/lib/libcuxfer_memhooks.so $B/bench/rewrite_bandwidth --max-size 4096 --reps 200 --label rewrite_d16
done 2>&1 | grep -E "mode=(pinned|pageable) " > $OUT/small.log; wc -l $OUT/small.log
echo "== PyTorch 256 MiB, without and with the rewrite"
# The PyTorch script is devtools/torch_feed.py (shared with gpu_register.sh).
for mode in off pin; do
  echo "-- rewrite=$mode"
  CUXFER_CUPTI=off CUXFER_REWRITE=$mode LD_PRELOAD=$B/lib/libcuxfer.so:$B/lib/libcuxfer_memhooks.so CUXFER_OUTPUT_DIR=/tmp timeout 60 python3 devtools/torch_feed.py
done
echo "-- no shim"; timeout 60 python3 devtools/torch_feed.py
} 2>&1 | tee $OUT/log
