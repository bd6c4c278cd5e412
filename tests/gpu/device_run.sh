#!/usr/bin/env bash
# Builds what the GPU tier needs and runs `ctest -L gpu` on a machine with a
# GPU (the device tool's H200, or any CUDA 13 box). Logs go to $OUT (or ./out).
#   bash tests/gpu/device_run.sh [ctest -R regex]
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${OUT:-$ROOT/out}"
B="${CUXFER_GPU_BUILD_DIR:-/tmp/cuxfer-gpu-build}"
mkdir -p "$OUT"
{
  nvidia-smi -L || true
  nvcc --version | tail -1 || true
  python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.device_count())' 2>&1 | tail -1
} 2>&1 | tee "$OUT/env.log"
cmake -S "$ROOT" -B "$B" -G Ninja -DCUXFER_GPU_TESTS=ON -DCUXFER_BUILD_BENCH=OFF \
  -DPython3_EXECUTABLE="$(command -v python3)" > "$OUT/configure.log" 2>&1 \
  || { tail -40 "$OUT/configure.log"; exit 1; }
cmake --build "$B" -j"$(nproc)" --target testapps cuxfer_shim cuxfer_cli simcuda simcuda_selftest \
  > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -60; exit 1; }
cd "$B" || exit 1
if [ $# -gt 0 ]; then
  ctest -L gpu -R "$1" --output-on-failure > "$OUT/ctest.log" 2>&1
else
  ctest -L gpu --output-on-failure > "$OUT/ctest.log" 2>&1
fi
rc=$?
grep -E "Test +#|tests passed|FAIL|  - |SKIP|no GPU" "$OUT/ctest.log" | tail -150
exit $rc
