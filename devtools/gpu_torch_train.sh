#!/usr/bin/env bash
# Developer run on the GPU machine (issue 6): the PyTorch training loop with a
# DataLoader (workers, pin_memory=False) plain, observed, rewritten, and with
# PyTorch's own profiler on; identical losses/weights, and the report's H2D
# bytes against PyTorch's own count.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; B=/tmp/b
source devtools/gpu_env.sh
{
echo "== $(date -u) $(nvidia-smi -L)"
gpu_configure_build cuxfer_cli cuxfer_shim cuxfer_memhooks
X=$B/bin/cuxfer; S="python3 tests/gpu/frameworks/torch_train.py"
cd tests/gpu/frameworks && S="python3 torch_train.py"
echo "plain:   $($S | tail -1)"
echo "observe: $($X record -q -o $OUT/obs -- $S | tail -1)"
echo "rewrite: $($X record -q --rewrite=pin -o $OUT/pin -- $S | tail -1)"
echo "profile plain:   $($S --profile | tail -2 | tr '\n' ' ')"
echo "profile observe: $($X record -q -o $OUT/prof -- $S --profile 2>&1 | tail -3 | tr '\n' ' ')"
for d in obs pin prof; do
  $X report --json $OUT/$d | python3 -c "
import json,sys; j=json.load(sys.stdin)
h2d=sum(c['bytes'] for c in j['classes'] if c['direction']=='H2D'); d2h=sum(c['bytes'] for c in j['classes'] if c['direction']=='D2H')
print('$d', 'processes', len(j['processes']), 'H2D', h2d, 'D2H', d2h, 'cupti', [p['cupti']['state'] if isinstance(p.get('cupti'),dict) else p.get('cupti_state') for p in j['processes']], 'rewrite', {k:j['rewrite'][k] for k in ('staged_calls','registered_calls')})"
done
$X report $OUT/prof | grep -iE "cupti|subscriber" | head -5
} 2>&1 | tee $OUT/log
