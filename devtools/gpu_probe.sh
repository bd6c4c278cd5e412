#!/usr/bin/env bash
# Developer probe on the GPU machine: build the shim + CLI, record a small app
# (static and shared cudart) and the three frameworks, keep every report.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/t"
log() { echo "== $*"; }
{
log "machine"; nvidia-smi -L; nvcc --version | tail -1
for p in libdw-dev nlohmann-json3-dev libunwind-dev libspdlog-dev libfmt-dev libzstd-dev libgtest-dev libbenchmark-dev; do dpkg -s $p >/dev/null 2>&1 && echo "have $p" || echo "MISSING $p"; done
ls /usr/local/cuda/extras/CUPTI/lib64 2>/dev/null | head -3; ldconfig -p | grep -i cupti | head -3
log "build"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUXFER_BUILD_TESTS=OFF -DCUXFER_BUILD_BENCH=OFF > $OUT/cmake.log 2>&1 || tail -30 $OUT/cmake.log
cmake --build build-gpu --target cuxfer_shim cuxfer_cli 2>&1 | tail -5
C=build-gpu/bin/cuxfer
nvcc -O2 -g -o /tmp/app_static devtools/probe_app.cpp
nvcc -O2 -g -cudart=shared -o /tmp/app_shared devtools/probe_app.cpp
for a in app_static app_shared; do
  log "record $a"; $C record -o $OUT/t --name $a -- /tmp/$a; echo "exit $?"
  $C report $OUT/t/cuxfer-$a-*.trace 2>&1 | head -60
  $C report --json $OUT/t/cuxfer-$a-*.trace > $OUT/$a.json
done
log "overhead probe: same app without shim"; time /tmp/app_shared
cat > /tmp/fw_torch.py <<'PY'
import numpy as np, torch, time
x = np.ones(64 << 20, dtype=np.uint8)
t = torch.from_numpy(x).cuda(); torch.cuda.synchronize()
y = t.cpu()
print("torch ok", int(y.sum()))
PY
cat > /tmp/fw_cupy.py <<'PY'
import numpy as np, cupy as cp
x = np.ones(16 << 20, dtype=np.uint8)
g = cp.asarray(x); h = g.get()
print("cupy ok", int(h.sum()))
PY
cat > /tmp/fw_jax.py <<'PY'
import numpy as np, jax
x = np.ones(16 << 20, dtype=np.uint8)
g = jax.device_put(x); h = np.asarray(g)
print("jax ok", int(h.sum()))
PY
for f in torch cupy jax; do
  log "record $f"; timeout 300 $C record -o $OUT/t --name fw_$f -- python3 /tmp/fw_$f.py 2>&1 | tail -15; echo "exit $?"
  $C report $OUT/t/cuxfer-fw_$f-*.trace 2>&1 | head -45
done
} 2>&1 | tee $OUT/log
