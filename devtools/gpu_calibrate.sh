#!/usr/bin/env bash
# Developer run on the GPU machine: cuxfer calibrate (timed), the profile's
# modelled staging thresholds used by record --rewrite=pin, and the libc hook
# overhead benchmark. Everything lands in $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; B=/tmp/b
source devtools/gpu_env.sh
{
echo "== $(date -u) $(nvidia-smi -L)"
gpu_configure_build
export CUXFER_PROFILE_DIR=$OUT/profiles
echo "== time cuxfer calibrate"
/usr/bin/time -f "calibrate wall %e s" $B/bin/cuxfer calibrate
cp $CUXFER_PROFILE_DIR/*.json $OUT/ 2>/dev/null
echo "== record --rewrite=pin with the profile"
$B/bin/cuxfer record -o /tmp/cal --rewrite=pin -- $B/testapps/gpu/pageable_loop-cudart_shared 4 16M 2>&1 | head -3
$B/bin/cuxfer report /tmp/cal | grep -A3 "estimates:" | head -4
echo "== libc hooks"
bash bench/run_libc_hook_overhead.sh --build-dir $B --rounds 7
echo "== cli.calibrate-sim on this machine (real program must find the GPU)"
(cd $B && ctest -R "calibrate|MachineProfile" --output-on-failure 2>&1 | tail -3)
} 2>&1 | tee $OUT/log
