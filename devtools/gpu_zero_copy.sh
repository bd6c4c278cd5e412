#!/usr/bin/env bash
# Developer run on the GPU machine: the policy file and the zero-copy path.
# zc_params recorded (tiny copies carry their device pointer), `cuxfer policy`
# proposes zero_copy for its buffers; then plain / observe / policy runs
# interleaved, median step times and checksums side by side. Policies,
# reports and logs come back in $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; B=/tmp/b
source devtools/gpu_env.sh
{
echo "== $(date -u) $(nvidia-smi -L) commit $(git rev-parse --short HEAD 2>/dev/null)"
gpu_configure_build
X=$B/bin/cuxfer; G=$B/testapps/gpu
step() { grep -o 'median_step_us=[0-9.]*' | cut -d= -f2; }
sum() { grep -o 'checksum=[0-9a-f]*'; }
echo "== zc_params: observe (fingerprints from 64 B), then cuxfer policy"
CUXFER_FINGERPRINT_MIN=64 $X record -q -o $OUT/zc-observe -- $G/zc_params-nvcc_shared 2000 256 | tail -3
$X policy -o $OUT/zc_params.policy.json $OUT/zc-observe
cat $OUT/zc_params.policy.json | python3 -c "import json,sys; [print(e['path'], e['site'].get('source', e['site']['offset']), e.get('estimated_gain_ns')) for e in json.load(sys.stdin)['entries']]"
for i in 1 2 3; do
  echo "plain  $($G/zc_params-nvcc_shared 2000 256 | tee /tmp/p.txt | step) $(sum </tmp/p.txt)"
  echo "observe $($X record -q -o /tmp/zo$i -- $G/zc_params-nvcc_shared 2000 256 | tee /tmp/o.txt | step) $(sum </tmp/o.txt)"
  echo "policy $($X record -q -o $OUT/zc-policy-$i --policy $OUT/zc_params.policy.json -- $G/zc_params-nvcc_shared 2000 256 | tee /tmp/z.txt | step) $(sum </tmp/z.txt)"
done
$X report $OUT/zc-policy-1 > $OUT/zc-policy.txt; sed -n '/^Rewrite/,/^$/p' $OUT/zc-policy.txt
grep -A3 "shim: policy" $OUT/zc-policy.txt | head -8
$X diff $OUT/zc-observe $OUT/zc-policy-1 > $OUT/zc-diff.txt 2>&1; head -40 $OUT/zc-diff.txt
echo "== static cudart under the policy (the policy names the shared build's sites: expect unbound)"
$X record -q -o /tmp/zs --policy $OUT/zc_params.policy.json -- $G/zc_params-nvcc_static 200 256 | tail -2
echo "== GPU tests (subset)"
ctest --test-dir $B -R "gpu\.(zc_|pageable_pipeline|finding|rewrite_exactness|kernel_loop|rewrite_diff\.(pageable_loop|managed)|torch)" --output-on-failure 2>&1 | tail -25
} 2>&1 | tee $OUT/log
