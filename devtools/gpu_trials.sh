#!/usr/bin/env bash
# Developer run on nvidia-h200-x2 (issue 6, production trials), first of two
# calls: builds, starts the >= 10 minute soak in its own session on GPU 1
# (devtools/gpu_soak.sh, it outlives this call; gpu_trials_collect.sh picks it
# up), then runs the trial tests: frameworks plain/observed/rewritten (torch
# with its profiler), two processes on two GPUs, peer copies, device
# switching, driver reload, cudaDeviceReset.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; B=/tmp/b
source devtools/gpu_env.sh
{
echo "== $(date -u) $(nvidia-smi -L | tr '\n' ' ')"
echo "== commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
gpu_configure_build
ls $B/bin/cuxfer $B/testapps/gpu/soak-cudart_shared || exit 1
rm -rf /tmp/soak; mkdir -p /tmp/soak
B=$B SOAK_SECONDS=${SOAK_SECONDS:-630} CUDA_VISIBLE_DEVICES=1 SOAK_DIR=/tmp/soak SOAK_LOG=/tmp/soak/log \
  setsid nohup bash devtools/gpu_soak.sh > /tmp/soak/stdout 2>&1 < /dev/null &
echo "== soak started in the background on GPU 1 ($(date -u +%T))"
echo "== ctest trials"
(cd $B && timeout ${CTEST_TIMEOUT:-420} ctest -R "${TRIALS:-gpu\.(trial|two_process|peer_app|multi_device|rewrite\.multi_device|driver_reload|rewrite\.driver_reload|reset_app|rewrite\.reset)}" \
  --output-on-failure > $OUT/ctest_trials.log 2>&1); echo "ctest rc=$?"
grep -E "tests passed|\*\*\*|Skipped|Passed|Failed" $OUT/ctest_trials.log | head -60
for f in $B/tests/gpu/work/trial_*.json; do [ -f "$f" ] && cp "$f" $OUT/; done
echo "== soak so far"; tail -3 /tmp/soak/log 2>/dev/null
} 2>&1 | tee $OUT/log
