"""finalize_copies.py LIBCUDART LIBCOPY_FOREVER [THREADS] [MS]: daemon threads
copy without pause while the main thread ends the interpreter under them, for
tests/e2e/run_python_finalize.py.

Each thread calls copy_forever (testapps/python/copy_forever.c) through
ctypes, which releases the GIL for the whole call: the thread copies on, its
Python frame at that call, and never takes the GIL back. The main thread
waits until every thread has copied, lets them run MS milliseconds more,
prints "finalize_copies: OK" and returns: the interpreter finalizes (frees
the threads' states and frames) while they copy, and the process exits under
them. What the test asks of cuxfer: the process exits 0 as without it, the
trace is complete, every thread's copies are recorded, and no frame is
misread.

Why the loop is in C: a daemon thread that takes the GIL back after
finalization may crash CPython 3.10-3.13 itself (CPython gh-87135: a thread
waiting for the GIL wakes on a freed interpreter), and the more likely the
longer the exit handlers run; a 20 ms atexit handler alone, without cuxfer,
crashes this script's old Python-loop form about once in 30 runs on 3.10.

  each thread   H2D copies of 4 KiB from `copies()` (line marked "# site: copy"), until the process ends
"""
import ctypes
import sys
import threading
import time

from sim_cudart import device_buffer, load

LIB = sys.argv[1]
LOOP = ctypes.CDLL(sys.argv[2])
THREADS = int(sys.argv[3]) if len(sys.argv) > 3 else 4
MS = int(sys.argv[4]) if len(sys.argv) > 4 else 30

rt = load(LIB)
LOOP.copy_forever.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                              ctypes.POINTER(ctypes.c_int)]
started = ctypes.c_int(0)  # copy_forever adds 1 after each thread's first copy


def copies(dev, buf):
    copy = ctypes.cast(rt.cudaMemcpy, ctypes.c_void_p)
    status = LOOP.copy_forever(copy, dev, buf, 4096, ctypes.byref(started))  # site: copy
    raise SystemExit(f"finalize_copies: CUDA error {status}")


for i in range(THREADS):
    dev = device_buffer(rt, 4096, "finalize_copies")
    buf = ctypes.create_string_buffer(4096)
    threading.Thread(target=copies, args=(dev, buf), daemon=True).start()
while started.value < THREADS:
    time.sleep(0.001)
time.sleep(MS / 1000)
print("finalize_copies: OK", flush=True)
