#!/usr/bin/env python3
"""What reading the Python stack adds to one copy call (stdlib only).

  python_stacks.py --shim B/lib/libcuxfer.so --libcudart CUDART [--python PY]
                   [--calls N] [--depth D] [--rounds R] [--check]

Runs a child interpreter that makes N 4-byte cudaMemcpy calls through ctypes
from D nested Python frames, under the
shim preloaded with CUXFER_PYTHON_STACKS=1 and =0, timing it with the
thread's own CPU clock (the hook's cost, not the scheduler's) (everything else at its
defaults, CUPTI off so that only the shim's CPU work is compared), the two
interleaved for R rounds. Prints per round the ns per call of each and their
difference, then the median difference per call and per Python frame.
CUDART: the simulated runtime (B/simcuda/lib/libcudart.so) measures the
shim's cost alone; the real one (libcudart.so.13) a GPU machine's.
--check: exit 1 unless both modes ran and every call was recorded.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import ctypes, sys, time
rt = ctypes.CDLL(sys.argv[1])
rt.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
n, depth = int(sys.argv[2]), int(sys.argv[3])
dev = ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(dev), ctypes.c_size_t(64)) == 0
buf = ctypes.create_string_buffer(64)
copy = rt.cudaMemcpy
def loop():
    d = dev.value
    for _ in range(n):
        copy(d, buf, 4, 1)
def nest(k):
    if k <= 1:
        loop()
        return
    nest(k - 1)
nest(max(depth - 2, 1))  # warm: the code objects are met once
t0 = time.thread_time_ns()  # this thread's CPU time: the hook's cost, not the scheduler's
nest(max(depth - 2, 1))
print((time.thread_time_ns() - t0) / n)
"""


def run_child(args, mode: str, out: Path) -> float | None:
    env = dict(os.environ, LD_PRELOAD=args.shim, CUXFER_PYTHON_STACKS=mode, CUXFER_CUPTI="off",
               CUXFER_OUTPUT_DIR=str(out), CUXFER_LOG_LEVEL="error")
    r = subprocess.run([args.python, "-c", CHILD, args.libcudart, str(args.calls), str(args.depth)],
                       capture_output=True, text=True, env=env, timeout=300)
    if r.returncode != 0:
        print(f"python_stacks: the child (CUXFER_PYTHON_STACKS={mode}) failed: {r.stderr[-400:]}")
        return None
    return float(r.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", required=True)
    ap.add_argument("--libcudart", required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--calls", type=int, default=200000)
    ap.add_argument("--depth", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    diffs, ok = [], True
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            on = run_child(args, "1", Path(tmp) / f"on{r}")
            off = run_child(args, "0", Path(tmp) / f"off{r}")
            if on is None or off is None:
                ok = False
                break
            diffs.append(on - off)
            print(f"round {r + 1}: python stacks on {on:.0f} ns/call, off {off:.0f} ns/call, +{on - off:.0f} ns")
    if not diffs:
        return 1
    med = statistics.median(diffs)
    spread = (max(diffs) - min(diffs)) / 2 if len(diffs) > 1 else 0
    print(f"python_stacks: {args.calls} calls x {args.rounds} rounds, {args.depth} Python frames deep: "
          f"median +{med:.0f} ns a call (+-{spread:.0f} over rounds), {med / args.depth:.1f} ns a frame")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
