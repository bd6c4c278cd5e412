#!/usr/bin/env python3
"""What cuxfer's own work costs a copy made the way a training step makes
them, read from the trace's own account (the `overhead:` note).

  python_step_pattern.py --cuxfer B/bin/cuxfer --libcudart CUDART
      [--steps N] [--depth D] [--bytes B] [--sites 1|3|5] [--thrash MIB] [--rounds R] [--env K=V ...]

A child interpreter (stdlib and ctypes only) runs N steps from D nested
Python frames; each step uploads two host buffers from a ring of eight (the
inputs and the labels of a batch) and reads 4 bytes back (the loss), as
bench/torch_step.py does with PyTorch. --sites 3: the three copies from three
lines (a real step); --sites 1: from one line (one call site, the best case
for the shim's per-thread stack cache); --sites 5: also two memsets from two more
lines, the five calls of bench/torch_step.py's step (two uploads, cuBLAS's two
memsets, the loss). --bytes: the upload size (4 or 1M:
1 MiB copies are fingerprinted, CUXFER_FINGERPRINT_MIN). Each round records
the child with `cuxfer record` (CUPTI off: the shim's CPU work only) and
prints the note's mean and median; then the median of the rounds' means.
--thrash: the child writes MIB mebibytes of other memory between steps, as a
real step's kernels launches, autograd and optimizer do between its copies:
the shim's tables, rings and the stack's rule cache are then cold at each
copy, which a tight loop never shows (on the H200 a PyTorch copy cost the
shim ~10x what it costs here without it).
CUDART: the simulated runtime measures the shim alone.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import ctypes, sys
rt = ctypes.CDLL(sys.argv[1])
rt.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
rt.cudaMemset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
steps, depth, size, sites, thrash = (int(a) for a in sys.argv[2:7])
other = ctypes.create_string_buffer(max(thrash, 1))
dev = ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(dev), ctypes.c_size_t(2 * size + 64)) == 0
batches = [(ctypes.create_string_buffer(size), ctypes.create_string_buffer(size)) for _ in range(8)]
loss = ctypes.create_string_buffer(64)
def upload(buf, offset): rt.cudaMemcpy(dev.value + offset, buf, size, 1)
def read_back(): rt.cudaMemcpy(loss, dev.value, 4, 2)
def step3(i):
    x, y = batches[i % 8]
    upload(x, 0)
    upload(y, size)
    read_back()
def step5(i):
    x, y = batches[i % 8]
    upload(x, 0)
    upload(y, size)
    rt.cudaMemset(dev, 0, 16)
    rt.cudaMemset(dev.value + 16, 1, 16)
    read_back()
def step1(i):
    x, y = batches[i % 8]
    for buf in (x, y, x):
        upload(buf, 0)
def nest(d, f):
    return f() if d == 0 else nest(d - 1, f)
step = {1: step1, 3: step3, 5: step5}[sites]
def loop():
    for i in range(steps):
        step(i)
        if thrash:
            ctypes.memset(other, i & 0xff, thrash)
nest(depth, loop)
"""

NOTE = re.compile(r"took ([\d.]+) (ns|us|ms) a call on average \(median ([^,]+),")
UNIT = {"ns": 1, "us": 1e3, "ms": 1e6}


def size_arg(text: str) -> int:
    m = re.fullmatch(r"(\d+)([KM]?)", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (4, 64K, 1M)")
    return int(m[1]) * {"": 1, "K": 1 << 10, "M": 1 << 20}[m[2]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--libcudart", required=True)
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--depth", type=int, default=20)
    ap.add_argument("--bytes", type=size_arg, default=4)
    ap.add_argument("--sites", type=int, choices=(1, 3, 5), default=3)
    ap.add_argument("--thrash", type=int, default=0, metavar="MIB",
                    help="MiB of other memory written between steps (cold caches at each copy)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--env", action="append", default=[], help="K=V for the recorded child (repeatable)")
    a = ap.parse_args()
    env = dict(os.environ, CUXFER_CUPTI="off")
    for kv in a.env:
        k, _, v = kv.partition("=")
        env[k] = v
    lib = str(Path(a.libcudart).resolve().parent)
    env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    means = []
    with tempfile.TemporaryDirectory() as tmp:
        child = Path(tmp) / "child.py"
        child.write_text(CHILD)
        for r in range(1, a.rounds + 1):
            out = Path(tmp) / f"r{r}"
            cmd = [a.cuxfer, "record", "-q", "-o", str(out), "--", sys.executable, str(child), a.libcudart,
                   str(a.steps), str(a.depth), str(a.bytes), str(a.sites), str(a.thrash << 20)]
            rec = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if rec.returncode != 0:
                print(f"python_step_pattern: the child failed ({rec.returncode}): {rec.stdout[-400:]}", file=sys.stderr)
                return 1
            rep = subprocess.run([a.cuxfer, "report", "--json", str(out)], stdout=subprocess.PIPE, text=True)
            notes = [n for p in json.loads(rep.stdout)["processes"] for n in p.get("notes", [])
                     if n.startswith("overhead:")]
            m = NOTE.search(notes[0]) if notes else None
            if not m:
                print(f"python_step_pattern: no overhead note in round {r}: {notes}", file=sys.stderr)
                return 1
            means.append(float(m[1]) * UNIT[m[2]])
            print(f"round {r}: {means[-1]:.0f} ns a call on average, median {m[3]}")
    print(f"steps={a.steps} depth={a.depth} bytes={a.bytes} sites={a.sites} thrash={a.thrash}MiB env={a.env}: "
          f"median of {a.rounds} rounds' means {statistics.median(means):.0f} ns a call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
