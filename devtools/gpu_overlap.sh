#!/usr/bin/env bash
# Developer run on the GPU machine: kernel records (cuxfer record --kernels),
# the overlap report and the sync_copy_idle finding on a testapp made to show
# it (kernel_loop: synchronous pageable copies between kernels) and on its
# clean twin (overlap_kernel: async pinned copies under a kernel); HTML reports
# and traces come back in $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; B=/tmp/b
source devtools/gpu_env.sh
{
echo "== $(date -u) $(nvidia-smi -L)"
gpu_configure_build cuxfer_cli cuxfer_shim cuxfer_memhooks kernel_loop-nvcc_shared overlap_kernel-nvcc_shared
X=$B/bin/cuxfer
for app in "kernel_loop-nvcc_shared 20 64M" "overlap_kernel-nvcc_shared 8 64M"; do
  name=${app%% *}
  echo "== $app with --kernels"
  $X record -q --kernels -o $OUT/t-$name -- $B/testapps/gpu/$app
  $X report --html $OUT/$name.html -o $OUT/$name.txt $OUT/t-$name
  sed -n '/^Findings/,$p' $OUT/$name.txt | grep -E "^\s+[0-9]+\. |recoverable|Copy/compute|pid .* GPU" | head -20
  $X report --json $OUT/t-$name | python3 -c "import json,sys; j=json.load(sys.stdin); print('overlap', json.dumps(j['overlap'])); print('findings', [f['kind'] for f in j['findings']])"
done
echo "== kernel_loop without --kernels: no overlap analysis"
$X record -q -o /tmp/nok -- $B/testapps/gpu/kernel_loop-nvcc_shared 4 16M
$X report --json /tmp/nok | python3 -c "import json,sys; j=json.load(sys.stdin); print('overlap', json.dumps(j['overlap'])); print('findings', [f['kind'] for f in j['findings']])"
} 2>&1 | tee $OUT/log
