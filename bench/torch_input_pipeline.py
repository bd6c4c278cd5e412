#!/usr/bin/env python3
"""The input pipeline users run: a PyTorch DataLoader with worker processes
feeding ~38.5 MB float32 batches (64 images 3x224x224) to a small conv net,
each batch moved with x.to("cuda", non_blocking=True). With pin_memory=False
every batch arrives in fresh shared memory from a worker, so the pinned
rewrite stages it: the floor for a rewritten .to() that keeps the call's
semantics (the source consumed before it returns) is the host memcpy of the
batch at the staging threads' rate, and nothing else. bench/run_torch_input_pipeline.sh
runs this plain, under `cuxfer record --rewrite=pin` and with pin_memory=True,
and compares (docs/benchmarks.md).

One configuration per run; after --warmup untimed steps, --steps timed steps,
each ending in loss.item() (as training loops do: it waits for the step's GPU
work). Prints one line:

  config pin_memory=P non_blocking=N workers=W batch_mb=B steps=S
      step_ms=M step_iqr=LO-HI to_ms=M to_iqr=LO-HI to_gpu_ms=M to_gpu_iqr=LO-HI wait_ms=M [label=L]

step_ms: a step from the batch in hand (after next()) to loss.item() done;
to_ms: the x.to() call itself (time.perf_counter around it); to_gpu_ms: the
stream from just before the call to its copy's end (torch.cuda.Event);
wait_ms: next() on the loader (the workers falling behind shows here, not
in step_ms). Medians and interquartile ranges over the timed steps.

--floor measures the floor instead, copying nothing to the GPU: the same loader
(pin_memory=False) and, for each batch as it arrives, its bytes copied into
one reused buffer by T threads (glibc memmove through ctypes, which releases
the GIL; contiguous pieces, the calling thread taking one, as the shim's
ParallelMemcpy does), T = CUXFER_STAGE_THREADS or the shim's default
min(8, cores/2). The first copy of each batch is the floor (it takes the
page faults of the batch's new mapping, as the staging copy does); the same
copy again right after (mapped_ms) shows what the faults cost. Python's
thread dispatch adds tens of µs to both. One line:

  floor threads=T batch_mb=B batches=N floor_ms=M floor_iqr=LO-HI floor_gbps=G mapped_ms=M mapped_gbps=G

  torch_input_pipeline.py [--pin-memory 0|1] [--blocking] [--steps 100] [--warmup 10]
                          [--batch 64] [--workers 4] [--floor [--threads T]] [--label L]
Exit 77 without torch or a GPU.
"""
import argparse
import ctypes
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

try:
    import torch
except ImportError as e:
    print(f"torch_input_pipeline: no torch ({e}): skipping")
    sys.exit(77)
if not torch.cuda.is_available():
    print("torch_input_pipeline: no GPU (torch.cuda.is_available() is False): skipping")
    sys.exit(77)

ap = argparse.ArgumentParser()
ap.add_argument("--pin-memory", type=int, choices=(0, 1), default=0)
ap.add_argument("--blocking", action="store_true", help="non_blocking=False")
ap.add_argument("--steps", type=int, default=100)
ap.add_argument("--warmup", type=int, default=10)
ap.add_argument("--batch", type=int, default=64)
ap.add_argument("--workers", type=int, default=4)
ap.add_argument("--floor", action="store_true")
ap.add_argument("--threads", type=int, default=0)
ap.add_argument("--label", default="")
a = ap.parse_args()


class RandomImages(torch.utils.data.Dataset):
    """Random float32 3x224x224 images and labels. The pixels come from one
    batch's worth made once (forked into the workers): a worker's cost is
    then what a real one's ends with, the default collate stacking the
    images into a new shared-memory batch."""

    def __init__(self, n):
        self.n = n
        g = torch.Generator().manual_seed(0)
        self.images = torch.randn(a.batch, 3, 224, 224, generator=g)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.images[i % len(self.images)], i % 10


def loader(pin_memory):
    ds = RandomImages((a.warmup + a.steps) * a.batch)
    return torch.utils.data.DataLoader(ds, batch_size=a.batch, num_workers=a.workers,
                                       pin_memory=pin_memory, drop_last=True)


def med_iqr(v, scale=1e3):
    v = [x * scale for x in v]
    q = statistics.quantiles(v, n=4) if len(v) >= 2 else [v[0], v[0], v[0]]
    return f"{statistics.median(v):.3f}", f"{q[0]:.3f}-{q[2]:.3f}"


BATCH_BYTES = a.batch * 3 * 224 * 224 * 4
label = f" label={a.label}" if a.label else ""


def floor():
    cores = os.cpu_count() or 2
    threads = a.threads or int(os.environ.get("CUXFER_STAGE_THREADS", 0)) or min(8, max(1, cores // 2))
    pool = ThreadPoolExecutor(threads - 1) if threads > 1 else None
    piece = ((BATCH_BYTES + threads - 1) // threads + 63) // 64 * 64  # one per thread, 64-byte aligned

    def copy(dst, src, n):
        jobs = []
        for off in range(piece, n, piece):
            jobs.append(pool.submit(ctypes.memmove, dst + off, src + off, min(piece, n - off)))
        ctypes.memmove(dst, src, min(piece, n))
        for j in jobs:
            j.result()

    dst = torch.zeros(BATCH_BYTES, dtype=torch.uint8)  # reused and touched, as the staging buffers are
    first, again = [], []
    for i, (x, _) in enumerate(loader(False)):
        assert x.is_contiguous() and x.nbytes == BATCH_BYTES
        t0 = time.perf_counter()
        copy(dst.data_ptr(), x.data_ptr(), BATCH_BYTES)
        t1 = time.perf_counter()
        copy(dst.data_ptr(), x.data_ptr(), BATCH_BYTES)
        t2 = time.perf_counter()
        if i >= a.warmup:
            first.append(t1 - t0)
            again.append(t2 - t1)
    fm, fiqr = med_iqr(first)
    am, _ = med_iqr(again)
    print(f"floor threads={threads} batch_mb={BATCH_BYTES / 1e6:.1f} batches={len(first)} floor_ms={fm} "
          f"floor_iqr={fiqr} floor_gbps={BATCH_BYTES / statistics.median(first) / 1e9:.2f} mapped_ms={am} "
          f"mapped_gbps={BATCH_BYTES / statistics.median(again) / 1e9:.2f}{label}", flush=True)


def pipeline():
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10)).cuda()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    nb = not a.blocking
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    step, to, to_gpu, wait = [], [], [], []
    it = iter(loader(bool(a.pin_memory)))
    for i in range(a.warmup + a.steps):
        tw = time.perf_counter()
        x, y = next(it)
        ev0.record()
        t0 = time.perf_counter()
        xg = x.to("cuda", non_blocking=nb)
        t1 = time.perf_counter()
        ev1.record()
        yg = y.to("cuda", non_blocking=nb)
        loss = torch.nn.functional.cross_entropy(net(xg), yg)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()
        t2 = time.perf_counter()
        if i >= a.warmup:
            step.append(t2 - t0)
            to.append(t1 - t0)
            to_gpu.append(ev0.elapsed_time(ev1) / 1e3)  # complete: loss.item() waited for the stream
            wait.append(t0 - tw)
    sm, siqr = med_iqr(step)
    tm, tiqr = med_iqr(to)
    gm, giqr = med_iqr(to_gpu)
    wm, _ = med_iqr(wait)
    print(f"config pin_memory={a.pin_memory} non_blocking={int(nb)} workers={a.workers} "
          f"batch_mb={BATCH_BYTES / 1e6:.1f} steps={len(step)} step_ms={sm} step_iqr={siqr} to_ms={tm} "
          f"to_iqr={tiqr} to_gpu_ms={gm} to_gpu_iqr={giqr} wait_ms={wm}{label}", flush=True)


if a.steps < 1 or a.warmup < 0:
    ap.error("--steps must be >= 1 and --warmup >= 0")
if a.floor:
    floor()
else:
    pipeline()
