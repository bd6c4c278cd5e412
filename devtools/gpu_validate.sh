#!/usr/bin/env bash
# Developer run on the GPU machine: GPU tier, overhead benchmark, demo and the
# frameworks, with libdw carried in .debs/ (the image lacks it) so that call
# sites are symbolized. Everything lands in $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; B=/tmp/b
source devtools/gpu_env.sh
{
echo "== $(date -u) $(nvidia-smi -L)"
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUXFER_GPU_TESTS=ON -DPython3_EXECUTABLE=$(command -v python3) > $OUT/configure.log 2>&1 || tail -30 $OUT/configure.log
grep -i "libdw" $OUT/configure.log
cmake --build $B -j16 > $OUT/build.log 2>&1 || grep -E "error|FAILED" -A5 $OUT/build.log | head -40
echo "== ctest -L gpu"
(cd $B && ctest -L gpu --output-on-failure -j4 > $OUT/ctest.log 2>&1); echo "ctest rc=$?"
grep -E "tests passed|Failed|\*\*\*|Not Run|Skipped" $OUT/ctest.log | head -40
echo "== bench (stack depth 0 and 16)"
bash bench/run_call_overhead.sh --gpu --build-dir $B 2>&1 | tail -14
echo "== bench: shim cost split (CUPTI off/on x stack depth 0/16), 5 interleaved rounds"
for r in 1 2 3 4 5; do
  $B/bench/call_overhead -n 20000 --label baseline 2>&1 | grep "case="
  for cupti in off auto; do for d in 0 16; do
    CUXFER_CUPTI=$cupti CUXFER_STACK_DEPTH=$d LD_PRELOAD=$B/lib/libcuxfer.so $B/bench/call_overhead -n 20000 --label cupti_${cupti}_d$d 2>&1 | grep "case="
  done; done
done > $OUT/bench_split.log
grep -c case= $OUT/bench_split.log
echo "== demo"
bash scripts/demo.sh --build-dir $B --skip-deps 2>&1 | tail -70
echo "== frameworks with CUPTI join"
C=$B/bin/cuxfer; mkdir -p /tmp/t
python3 - > /tmp/fw.py <<'PY'
print('''import numpy as np, torch
x = np.ones(256 << 20, dtype=np.uint8)
t = torch.from_numpy(x).cuda(); torch.cuda.synchronize()
y = t.cpu()
print("torch ok", int(y[:1024].sum()))''')
PY
$C record -q -o /tmp/t --name torch -- python3 /tmp/fw.py
$C report /tmp/t/cuxfer-torch-*.trace | head -40
$C report --json /tmp/t/cuxfer-torch-*.trace > $OUT/torch.json
python3 -c "import json; r=json.load(open('$OUT/torch.json')); p=r['processes'][0]; print('gpu_records', p.get('gpu_records'), 'joined_by_time', p.get('gpu_records_joined_by_time'), 'notes', p.get('notes'))"
} 2>&1 | tee $OUT/log
