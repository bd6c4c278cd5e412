"""A framework moving data both ways, for the production trials (issue 6):
rounds of pageable host arrays to the GPU, a small integer computation there,
and the result back into fresh host memory, at several sizes. Deterministic:
prints one line `TRIAL {json}` with a SHA-256 of every result, the bytes the
workload moved by its own count, and the wall time of its transfers after
the first round (which creates the CUDA context), which
tests/gpu/frameworks/trial.py compares across plain, observed and rewritten runs.

  trial_workload.py torch|cupy|jax [--rounds 8] [--profile]

--profile (torch only) runs PyTorch's own profiler (CUPTI, kineto) over every
round but the first (a profiler started after the first steps, as in training)
and adds its count of memcpy events to the line.
"""
import argparse
import hashlib
import json
import os
import sys
import time

from common import need, no_gpu

SIZES = [64 << 20, 16 << 20, 1 << 20, 64 << 10]  # bytes per transfer, each direction

ap = argparse.ArgumentParser()
ap.add_argument("framework", choices=["torch", "cupy", "jax"])
ap.add_argument("--rounds", type=int, default=8)
ap.add_argument("--profile", action="store_true")
a = ap.parse_args()
np = need("numpy")


def host_input(size: int, r: int):
    # Reused host arrays refilled each round (a loader's buffers): the rewrite
    # can register them in place. Results come back into fresh memory.
    arr = inputs.setdefault(size, np.empty(size // 4, dtype=np.int32))
    arr[:] = np.arange(size // 4, dtype=np.int32) * (r + 1) + size
    return arr


inputs = {}
if a.framework == "torch":
    torch = need("torch")
    if not torch.cuda.is_available():
        no_gpu("torch.cuda.is_available() is False")

    def to_device(x):
        return torch.from_numpy(x).to("cuda")

    def compute(g, r):
        return g * 3 + r

    def to_host(g):
        return g.cpu().numpy()

    def sync():
        torch.cuda.synchronize()
elif a.framework == "cupy":
    cp = need("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            no_gpu("cupy sees 0 devices")
    except Exception as e:
        no_gpu(f"{type(e).__name__}: {e}")

    def to_device(x):
        return cp.asarray(x)

    def compute(g, r):
        return g * 3 + r

    def to_host(g):
        return cp.asnumpy(g)

    def sync():
        cp.cuda.Device().synchronize()
else:
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax = need("jax")
    try:
        if not jax.devices("gpu"):
            no_gpu("jax sees no GPU")
    except Exception as e:
        no_gpu(f"{type(e).__name__}: {e}")
    f = jax.jit(lambda g, r: g * 3 + r)

    def to_device(x):
        return jax.device_put(x).block_until_ready()

    def compute(g, r):
        return f(g, np.int32(r)).block_until_ready()

    def to_host(g):
        return np.asarray(g)

    def sync():
        pass


class Totals:
    def __init__(self):
        self.digest = hashlib.sha256()
        self.h2d_s = self.d2h_s = 0.0
        self.per_round = []


def run(tot, rounds):
    for r in rounds:
        # Round 0 warms up (the first .to("cuda") creates the CUDA context,
        # allocators fill their caches): it is checked but not timed.
        timed = r > 0
        round_s = 0.0
        for size in SIZES:
            x = host_input(size, r)
            t = time.perf_counter()
            g = to_device(x)
            sync()
            dt = time.perf_counter() - t
            tot.h2d_s += dt if timed else 0.0
            round_s += dt
            y = compute(g, r)
            sync()
            t = time.perf_counter()
            h = to_host(y)
            dt = time.perf_counter() - t
            tot.d2h_s += dt if timed else 0.0
            round_s += dt
            tot.digest.update(h.tobytes())
        if timed:
            tot.per_round.append(round_s)


tot = Totals()
extra = {}
if a.profile:
    if a.framework != "torch":
        sys.exit("--profile is for torch")
    # As in training, the profiler starts after the first steps: by then the
    # shim holds CUPTI and must hand it over.
    run(tot, range(1))
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run(tot, range(1, a.rounds))
    memcpy = [e for e in prof.events() if e.name.startswith("Memcpy")]
    extra = {"profiler_memcpy_events": len(memcpy),
             "profiler_memcpy_kinds": sorted({e.name for e in memcpy}),
             "profiled_transfers": 2 * (a.rounds - 1) * len(SIZES)}
else:
    run(tot, range(a.rounds))
sha, h2d_s, d2h_s, per_round = tot.digest.hexdigest(), tot.h2d_s, tot.d2h_s, tot.per_round
moved = a.rounds * sum(SIZES)
per_round.sort()
print("TRIAL " + json.dumps({
    "framework": a.framework, "sha256": sha, "h2d_bytes": moved, "d2h_bytes": moved,
    "h2d_s": h2d_s, "d2h_s": d2h_s, "median_round_s": per_round[len(per_round) // 2],
    "transfers": 2 * a.rounds * len(SIZES), **extra}), flush=True)
