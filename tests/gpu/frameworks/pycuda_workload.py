"""PyCUDA moving data both ways, for the PyCUDA trial (tests/gpu/frameworks/pycuda_trial.py):
as PyCUDA programs are written, with no knowledge of cuxfer.

Each round (round 0 creates the context's caches and is checked but not timed):
  - memcpy_htod from a REUSED pageable numpy array of --size-mib (256 MiB) into a device
    buffer, an ElementwiseKernel y = x * 3 + r, memcpy_dtoh into a reused pageable array;
  - the same from and into pagelocked_empty arrays (pinned: the reference);
  - gpuarray.to_gpu of reused pageable arrays of 64 MiB, 16 MiB, 1 MiB and 64 KiB, the same
    kernel, .get() into fresh host memory.
Deterministic: prints one line `TRIAL {json}` with a SHA-256 of every result, the bytes it
moved by its own count per direction and host memory kind, and per-copy wall times (each
copy followed by a context synchronize) of every timed round.

  pycuda_workload.py [--rounds 8] [--size-mib 256] [--context create|primary]

--context create (default) makes its own context as pycuda.autoinit does (cuCtxCreate);
primary retains the device's primary context (the runtime's). Exit 0 ok, 1 a result was
wrong, 77 skip ('pycuda not importable: ...' or 'no GPU: ...').
"""
import argparse
import ctypes
import gc
import hashlib
import json
import os
import shutil
import sys
import time
import traceback

SKIP = 77
GA_SIZES = [64 << 20, 16 << 20, 1 << 20, 64 << 10]  # gpuarray.to_gpu / .get() bytes per transfer

ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=8)
ap.add_argument("--size-mib", type=int, default=256)
ap.add_argument("--context", choices=["create", "primary"], default="create")
a = ap.parse_args()

try:
    ctypes.CDLL("libcuda.so.1")  # no driver: "no GPU", whatever else is missing
except OSError as e:
    print(f"no GPU: libcuda.so.1 cannot be loaded (no NVIDIA driver: {e})")
    sys.exit(SKIP)
try:
    import numpy as np
except Exception as e:
    print(f"numpy not importable: {type(e).__name__}: {e}")
    sys.exit(SKIP)
try:
    import pycuda
    import pycuda.driver as drv
    import pycuda.gpuarray as gpuarray
    from pycuda.elementwise import ElementwiseKernel
except Exception as e:  # ImportError, or a broken build raising something else
    print(f"pycuda not importable: {type(e).__name__}: {e} (PYTHONPATH={os.environ.get('PYTHONPATH', '')})")
    sys.exit(SKIP)

# PyCUDA compiles its kernels with nvcc from PATH (cached under ~/.cache/pycuda).
if not shutil.which("nvcc"):
    cuda_bin = os.path.join(os.environ.get("CUDA_ROOT", "/usr/local/cuda"), "bin")
    os.environ["PATH"] = cuda_bin + os.pathsep + os.environ.get("PATH", "")

try:
    drv.init()
    if drv.Device.count() < 1:
        print("no GPU: pycuda sees 0 devices")
        sys.exit(SKIP)
    dev = drv.Device(0)
    if a.context == "primary":
        ctx = dev.retain_primary_context()
        ctx.push()
    else:
        ctx = dev.make_context()
except drv.Error as e:
    print(f"no GPU: {type(e).__name__}: {e}")
    sys.exit(SKIP)

N = (a.size_mib << 20) // 4  # int32 elements of the big buffers
BIG = N * 4
kernel = ElementwiseKernel("const int *x, int *y, int r", "y[i] = x[i] * 3 + r", "cuxfer_trial_axpb")

base = np.arange(max(N, max(GA_SIZES) // 4), dtype=np.int32)
host_in = np.empty(N, dtype=np.int32)  # reused pageable buffers (a loader's)
host_out = np.empty(N, dtype=np.int32)
pin_in = drv.pagelocked_empty(N, np.int32)   # the pinned reference
pin_out = drv.pagelocked_empty(N, np.int32)
d_in = drv.mem_alloc(BIG)
d_out = drv.mem_alloc(BIG)
ga_inputs = {s: np.empty(s // 4, dtype=np.int32) for s in GA_SIZES}

digest = hashlib.sha256()
times = {k: [] for k in ("htod_pageable", "dtoh_pageable", "htod_pinned", "dtoh_pinned",
                         "to_gpu", "get")}
moved = {"H2D/pageable": 0, "H2D/pinned": 0, "D2H/pageable": 0, "D2H/pinned": 0}
bad = []


def timed(fn):
    t = time.perf_counter()
    fn()
    ctx.synchronize()
    return time.perf_counter() - t


def fill(dst, r, salt):
    # Distinct data every round; x * 3 + r stays within int32 at any round count.
    np.multiply(base[:dst.size], r % 8 + 1, out=dst)
    dst += salt


def run_round(r):
    keep = r > 0
    t_ga_h2d = t_ga_d2h = 0.0

    # 1. memcpy_htod / memcpy_dtoh with reused pageable numpy arrays
    fill(host_in, r, 7)
    dt_h = timed(lambda: drv.memcpy_htod(d_in, host_in))
    kernel(g_in, g_out, np.int32(r))
    ctx.synchronize()
    dt_d = timed(lambda: drv.memcpy_dtoh(host_out, d_out))
    moved["H2D/pageable"] += BIG
    moved["D2H/pageable"] += BIG
    digest.update(host_out.tobytes())
    if not np.array_equal(host_out, host_in * 3 + r):
        bad.append(f"round {r}: memcpy_dtoh result wrong")

    # 2. the same from pagelocked_empty (pinned), other data
    fill(pin_in, r, 11)
    dt_hp = timed(lambda: drv.memcpy_htod(d_in, pin_in))
    kernel(g_in, g_out, np.int32(r))
    ctx.synchronize()
    dt_dp = timed(lambda: drv.memcpy_dtoh(pin_out, d_out))
    moved["H2D/pinned"] += BIG
    moved["D2H/pinned"] += BIG
    if not np.array_equal(pin_out, pin_in * 3 + r):
        bad.append(f"round {r}: pinned memcpy_dtoh result wrong")
    digest.update(pin_out.tobytes())

    # 3. gpuarray.to_gpu (reused pageable arrays) and .get() (fresh host memory)
    for s in GA_SIZES:
        x = ga_inputs[s]
        fill(x, r, s)
        t = time.perf_counter()
        g = gpuarray.to_gpu(x)
        ctx.synchronize()
        t_ga_h2d += time.perf_counter() - t
        y = gpuarray.empty_like(g)
        kernel(g, y, np.int32(r))
        ctx.synchronize()
        t = time.perf_counter()
        h = y.get()
        t_ga_d2h += time.perf_counter() - t
        moved["H2D/pageable"] += s
        moved["D2H/pageable"] += s
        digest.update(h.tobytes())
        if not np.array_equal(h, x * 3 + r):
            bad.append(f"round {r}: gpuarray {s} B result wrong")
        del g, y

    if keep:
        times["htod_pageable"].append(dt_h)
        times["dtoh_pageable"].append(dt_d)
        times["htod_pinned"].append(dt_hp)
        times["dtoh_pinned"].append(dt_dp)
        times["to_gpu"].append(t_ga_h2d)
        times["get"].append(t_ga_d2h)


g_in = gpuarray.GPUArray((N,), np.int32, gpudata=d_in)  # views of the device buffers
g_out = gpuarray.GPUArray((N,), np.int32, gpudata=d_out)
try:
    for r in range(a.rounds):
        run_round(r)
except Exception:  # leave the context before exiting: PyCUDA aborts on a non-empty stack
    traceback.print_exc()
    ctx.pop()
    sys.exit(1)

# Release every CUDA object while the context is current, then leave it as
# pycuda.autoinit does (pop), or release the primary context.
del g_in, g_out, pin_in, pin_out, kernel
gc.collect()
d_in.free()
d_out.free()
ctx.pop()
if a.context == "primary":
    ctx.detach()


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if v else float("nan")


print("TRIAL " + json.dumps({
    "framework": "pycuda", "pycuda": pycuda.VERSION_TEXT, "context": a.context,
    "sha256": digest.hexdigest(),
    "h2d_bytes": moved["H2D/pageable"] + moved["H2D/pinned"],
    "d2h_bytes": moved["D2H/pageable"] + moved["D2H/pinned"],
    "classes": moved, "big_bytes": BIG, "rounds": a.rounds,
    "median_s": {k: median(v) for k, v in times.items()},
    "times_s": times, "errors": bad}), flush=True)
if bad:
    print("\n".join(bad))
sys.exit(1 if bad else 0)
