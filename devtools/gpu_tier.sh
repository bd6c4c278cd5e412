#!/usr/bin/env bash
# The GPU tier alone, as fast as possible: configure, build, ctest -L gpu.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; B=/tmp/b
{
echo "== $(date -u) $(nvidia-smi -L)"
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUXFER_GPU_TESTS=ON -DCUXFER_BUILD_BENCH=OFF -DPython3_EXECUTABLE=$(command -v python3) > $OUT/configure.log 2>&1 || tail -20 $OUT/configure.log
cmake --build $B -j16 > $OUT/build.log 2>&1 || grep -E "error|FAILED" -A5 $OUT/build.log | head -30
(cd $B && ctest -L gpu --output-on-failure -j4 > $OUT/ctest.log 2>&1); echo "ctest rc=$?"
grep -E "tests passed|\*\*\*|Failed" $OUT/ctest.log | head -20
} 2>&1 | tee $OUT/log
