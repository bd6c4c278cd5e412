#!/usr/bin/env bash
# Second call of the issue-6 run (see gpu_trials.sh): the rest of the GPU tier
# while the soak finishes, then the soak's samples, report and verdict.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; B=/tmp/b
{
echo "== $(date -u) rest of the GPU tier (without tune and the trials run before)"
(cd $B && timeout ${CTEST_TIMEOUT:-300} ctest -L gpu -LE tune \
  -E "gpu\.(trial|two_process|peer_app|multi_device|rewrite\.multi_device|driver_reload|rewrite\.driver_reload|reset_app|rewrite\.reset)" \
  --output-on-failure > $OUT/ctest_rest.log 2>&1); echo "ctest rc=$?"
grep -E "tests passed|\*\*\*|Skipped" $OUT/ctest_rest.log | head -40
echo "== waiting for the soak"
for i in $(seq 1 ${SOAK_WAIT:-240}); do grep -q "SOAK DONE" /tmp/soak/log 2>/dev/null && break; sleep 1; done
tail -25 /tmp/soak/log
cp /tmp/soak/*.csv /tmp/soak/*.txt /tmp/soak/*.json $OUT/ 2>/dev/null
ls $OUT
} 2>&1 | tee $OUT/log2
