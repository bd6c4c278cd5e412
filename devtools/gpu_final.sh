#!/usr/bin/env bash
# Developer run on the GPU machine: the whole GPU tier, and what a content
# fingerprint costs per copy (from the trace's cuxfer:fingerprint events).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; B=/tmp/b
source devtools/gpu_env.sh
{
echo "== $(date -u) $(nvidia-smi -L)"
gpu_configure_build
echo "== ctest -L gpu"
(cd $B && timeout ${CTEST_TIMEOUT:-300} ctest -L gpu --output-on-failure -j3 > $OUT/ctest.log 2>&1); echo "ctest rc=$?"
grep -E "tests passed|\*\*\*|Skipped" $OUT/ctest.log | head -20
echo "== fingerprint cost per copy (us), pageable_loop"
for s in 1M 16M 256M; do
  $B/bin/cuxfer record -q -o /tmp/fp$s -- $B/testapps/gpu/pageable_loop-cudart_shared 8 $s
  $B/bin/cuxfer export --perfetto /tmp/fp$s.json /tmp/fp$s
  python3 -c "
import json,statistics,sys; j=json.load(open('/tmp/fp$s.json')); ev=j['traceEvents'] if isinstance(j,dict) else j
d=sorted(e['dur'] for e in ev if e.get('name')=='cuxfer:fingerprint'); c=[e['dur'] for e in ev if e.get('name','').startswith('cudaMemcpy')]
print('$s', 'fingerprints', len(d), 'median_us', statistics.median(d) if d else None, 'max_us', max(d) if d else None, 'copy_median_us', statistics.median(c) if c else None)"
done
} 2>&1 | tee $OUT/log
