"""PyTorch, unmodified: .cuda()/.cpu() of 256 MiB and a training-style loop fed
pageable batches (`devtools/gpu.sh torch-feed` runs it with and without cuxfer;
the `install` step records it with the installed wheel)."""
import hashlib
import sys
import time

import numpy as np
import torch

x = np.random.default_rng(1).integers(0, 255, 256 << 20, dtype=np.uint8)
torch.cuda.init()
torch.empty(1, device="cuda")


def timed(f):
    torch.cuda.synchronize()
    t = time.perf_counter()
    r = f()
    torch.cuda.synchronize()
    return r, time.perf_counter() - t


LOOP_ONLY = "--loop-only" in sys.argv
ts = [] if not LOOP_ONLY else [(1, 1)] * 3
for rep in range(0 if LOOP_ONLY else 3):
    g, t1 = timed(lambda: torch.from_numpy(x).cuda())
    y, t2 = timed(lambda: g.cpu())
    ts.append((t1, t2))
t1 = sorted(a for a, b in ts)[1]
t2 = sorted(b for a, b in ts)[1]
if not LOOP_ONLY:
  print(f"cuda(): {x.nbytes / t1 / 1e9:.2f} GB/s  cpu(): {x.nbytes / t2 / 1e9:.2f} GB/s  "
      f"sha={hashlib.sha256(y.numpy().tobytes()).hexdigest()[:16]} equal={bool((y.numpy() == x).all())}")
torch.manual_seed(0)
w = torch.randn(4096, 1024, device="cuda")
batches = [np.random.default_rng(i).standard_normal((512, 4096), dtype=np.float32) for i in range(8)]


def loop(steps):
    acc = 0.0
    for step in range(steps):
        b = torch.from_numpy(batches[step % 8]).cuda()
        acc += float((b @ w).sum().cpu())
    return acc


loop(8)
times = []
for rep in range(5):
    torch.cuda.synchronize()
    t = time.perf_counter()
    acc = loop(100)
    torch.cuda.synchronize()
    times.append(time.perf_counter() - t)
print(f"loop: median {sorted(times)[2] * 1e3:.1f} ms per 100 steps  result={acc!r}")
if not LOOP_ONLY:
  print(f"is_pinned after reuse: batch={torch.from_numpy(batches[0]).is_pinned()} x={torch.from_numpy(x).is_pinned()}")
