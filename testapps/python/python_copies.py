"""python_copies.py LIBCUDART [THREADS] [COPIES]: host<->device copies made
from Python, for the Python call-site tests (tests/e2e/run_python_stacks.py).

The runtime is called through ctypes, which releases the GIL around every
foreign call: the shim reads each thread's Python stack without it. Every line
that makes copies ends with a "# site: NAME" marker; the test reads the markers
to know which line of this file each copy must be reported at, and how many.

  upload      3 H2D from main() through upload(), 1 more through Loader.batch
  download    1 D2H from main(), 1 from a threading.Thread
  worker      THREADS threads x COPIES H2D each, all at once
  memset      1 cudaMemset from main(): a memset's site is its calling
              function only, unless CUXFER_MEMSET_STACKS=1 (not a copy: the
              report's call sites leave it out; the Perfetto export shows it)
  framework   1 H2D made inside fakeframework (a package under site-packages/):
              reported at the line of this file that called into it
              (--python-frames=user), or at the package's own line (all)
  generator   3 H2D from a generator, one before each yield (its frame is
              the generator's, linked to main() while it runs)
  coroutine   2 D2H from two coroutines asyncio.run gathers (their frames
              resumed by the event loop, C code between them and main())
"""
import asyncio
import ctypes
import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))
import fakeframework  # noqa: E402

H2D, D2H = 1, 2
rt = ctypes.CDLL(sys.argv[1])
rt.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
rt.cudaMemset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
THREADS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
COPIES = int(sys.argv[3]) if len(sys.argv) > 3 else 20
N = 256 << 10


def check(status):
    if status != 0:
        raise SystemExit("python_copies: CUDA error %d" % status)


def upload(dev, buf):
    check(rt.cudaMemcpy(dev, buf, N, H2D))  # site: upload


def download(buf, dev):
    check(rt.cudaMemcpy(buf, dev, N, D2H))  # site: download


class Loader:
    def batch(self, dev, buf):
        upload(dev, buf)


def uploads(dev, buf, n):
    for _ in range(n):
        check(rt.cudaMemcpy(dev, buf, N, H2D))  # site: generator
        yield


async def fetch(buf, dev):
    await asyncio.sleep(0)
    check(rt.cudaMemcpy(buf, dev, N, D2H))  # site: coroutine


async def fetch_both(buf, dev):
    await asyncio.gather(fetch(buf, dev), fetch(buf, dev))


def worker(dev, start):
    buf = ctypes.create_string_buffer(N)
    start.wait()
    for _ in range(COPIES):
        check(rt.cudaMemcpy(dev, buf, N, H2D))  # site: worker


def main():
    dev = ctypes.c_void_p()
    check(rt.cudaMalloc(ctypes.byref(dev), N))
    check(rt.cudaMemset(dev, 0, N))  # site: memset
    buf = ctypes.create_string_buffer(b"x" * N, N)
    for _ in range(3):
        upload(dev, buf)
    Loader().batch(dev, buf)
    download(buf, dev)
    t = threading.Thread(target=download, args=(buf, dev))
    t.start()
    t.join()
    start = threading.Barrier(THREADS)
    workers = [threading.Thread(target=worker, args=(dev, start)) for _ in range(THREADS)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    fakeframework.copy_to_device(rt, dev, buf, N)  # site: framework
    for _ in uploads(dev, buf, 3):
        pass
    asyncio.run(fetch_both(buf, dev))
    print("python_copies: OK")


main()
