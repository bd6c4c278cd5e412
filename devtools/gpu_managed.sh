#!/usr/bin/env bash
# Developer run on the GPU machine: CUPTI unified-memory records and the
# managed_migrations finding on managed_faults (pages moved by faults) and its
# clean twin (prefetched), plus the app's own step times with and without the
# shim, side by side. Reports, a Perfetto export and traces come back in $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; B=/tmp/b
source devtools/gpu_env.sh
{
echo "== $(date -u) $(nvidia-smi -L) commit $(git rev-parse --short HEAD 2>/dev/null)"
gpu_configure_build cuxfer_cli cuxfer_shim cuxfer_memhooks managed_faults-nvcc_shared managed-cudart_shared
X=$B/bin/cuxfer
APP=$B/testapps/gpu/managed_faults-nvcc_shared
for mode in faults prefetch; do
  echo "== $mode: no shim, then recorded (x3 each, interleaved)"
  for i in 1 2 3; do $APP $mode 6 256M | grep median; $X record -q -o $OUT/t-$mode-$i -- $APP $mode 6 256M | grep median; done
  $X report -o $OUT/$mode.txt $OUT/t-$mode-1
  sed -n '/^Managed memory/,/^$/p' $OUT/$mode.txt
  sed -n '/^Findings/,$p' $OUT/$mode.txt | head -30
  $X report --json $OUT/t-$mode-1 | python3 -c "import json,sys; j=json.load(sys.stdin); print('managed', json.dumps(j['managed'])); print('findings', [f['kind'] for f in j['findings']])"
done
$X export --perfetto $OUT/faults.perfetto.json $OUT/t-faults-1 && python3 -c "
import json; j=json.load(open('$OUT/faults.perfetto.json')); import collections
print(collections.Counter(e['name'] for e in j['traceEvents'] if e.get('cat')=='gpu'))"
$X report --html $OUT/faults.html $OUT/t-faults-1
echo "== managed testapp (cudaMemcpy on managed memory) under CUXFER_CUPTI_UM=0 and default"
CUXFER_CUPTI_UM=0 $X record -q -o $OUT/t-um0 -- $B/testapps/gpu/managed-cudart_shared 2 16M
$X report $OUT/t-um0 | sed -n '/^Managed memory/,/^$/p'
$X record -q -o $OUT/t-um1 -- $B/testapps/gpu/managed-cudart_shared 2 16M
$X report $OUT/t-um1 | sed -n '/^Managed memory/,/^$/p'
echo "== GPU tests"
cmake --build $B -j16 > $OUT/build-all.log 2>&1 || tail -20 $OUT/build-all.log
ctest --test-dir $B -R "gpu.finding|gpu.managed|gpu.rewrite_diff.managed" --output-on-failure 2>&1 | tail -40
} 2>&1 | tee $OUT/log
