"""stamped_copies.py LIBCUDART [COPIES]: copies bracketed by the app's own
CLOCK_MONOTONIC reads, for the event-stamp test (tests/e2e/run_event_stamps.py).

Each copy is a 64 KiB H2D through the runtime (ctypes), with
time.monotonic_ns() read right before and right after it, 20 ms of sleep
between copies (so that the writer converts stamps between several of its
pairs). Prints one line a copy, "copy I BEFORE AFTER", then
"stamped_copies: OK".
"""
import ctypes
import sys
import time

from sim_cudart import H2D, device_buffer, load

N = 64 << 10
rt = load(sys.argv[1])
copies = int(sys.argv[2]) if len(sys.argv) > 2 else 8
dev = device_buffer(rt, N, "stamped_copies")
host = ctypes.create_string_buffer(N)
for i in range(copies):
    before = time.monotonic_ns()
    status = rt.cudaMemcpy(dev, host, N, H2D)
    after = time.monotonic_ns()
    if status != 0:
        raise SystemExit("stamped_copies: cudaMemcpy failed: %d" % status)
    print("copy", i, before, after, flush=True)
    time.sleep(0.02)
print("stamped_copies: OK", flush=True)
