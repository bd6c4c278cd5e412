"""finalize_copies.py LIBCUDART [THREADS] [MS]: daemon threads copy without
pause (ctypes: the GIL released in each call) while the main thread ends
the interpreter under them, for tests/e2e/run_python_finalize.py.

The main thread waits until every thread has copied, lets them run MS
milliseconds more, prints "finalize_copies: OK" and returns: the
interpreter finalizes while the daemon threads are inside copies or about to
take the GIL back. Python never joins daemon threads: each is stopped where
it stands (3.10-3.13 end it when it takes the GIL back; 3.14+ leave it
blocked there) and the process exits under them. What the test asks of
cuxfer: the process exits 0 as without it, the trace is complete, every
thread's copies are recorded, and no frame is misread.

  each thread   H2D copies of 4 KiB from `copies()` (line marked "# site: copy"), until stopped
"""
import ctypes
import sys
import threading
import time

from sim_cudart import H2D, device_buffer, load

LIB = sys.argv[1]
THREADS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
MS = int(sys.argv[3]) if len(sys.argv) > 3 else 30

rt = load(LIB)
started = threading.Barrier(THREADS + 1)


def copies(dev, buf):
    n = 0
    while True:
        if rt.cudaMemcpy(dev, buf, 4096, H2D) != 0:  # site: copy
            raise SystemExit("finalize_copies: CUDA error")
        n += 1
        if n == 1:
            started.wait()


for i in range(THREADS):
    dev = device_buffer(rt, 4096, "finalize_copies")
    buf = ctypes.create_string_buffer(4096)
    threading.Thread(target=copies, args=(dev, buf), daemon=True).start()
started.wait()
time.sleep(MS / 1000)
print("finalize_copies: OK", flush=True)
