"""mp_fork_copies.py LIBCUDART [CHILDREN] [COPIES]: copies from the children of
Python's multiprocessing with the fork start method, for the _exit test
(tests/e2e/run_python_exit.py).

multiprocessing ends a forked child through os._exit, after the child's own
cleanup: no C exit handler runs there. The parent makes no CUDA call before
the children end (CUDA cannot be used in a child forked after that), then
makes its own copies; each child also makes one copy from a second thread
that is still alive (blocked) when the child exits.

  each child   COPIES H2D of N bytes from its main thread, 1 D2H from a thread
  the parent   COPIES H2D of N bytes, after every child has ended
"""
import ctypes
import multiprocessing
import sys
import threading

from sim_cudart import D2H, H2D, device_buffer, load

N = 64 << 10
LIB = sys.argv[1]
CHILDREN = int(sys.argv[2]) if len(sys.argv) > 2 else 3
COPIES = int(sys.argv[3]) if len(sys.argv) > 3 else 5


def check(status):
    if status != 0:
        raise SystemExit("mp_fork_copies: CUDA error %d" % status)


def copies(rt):
    dev = device_buffer(rt, N, "mp_fork_copies")
    buf = ctypes.create_string_buffer(N)
    for _ in range(COPIES):
        check(rt.cudaMemcpy(dev, buf, N, H2D))
    return dev, buf


def child():
    rt = load(LIB)
    dev, buf = copies(rt)
    done, never = threading.Event(), threading.Event()

    def download():
        check(rt.cudaMemcpy(buf, dev, N, D2H))
        done.set()
        never.wait()  # still alive when the child ends

    threading.Thread(target=download, daemon=True).start()
    done.wait()


if __name__ == "__main__":
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=child) for _ in range(CHILDREN)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit("mp_fork_copies: a child exited %s" % p.exitcode)
    copies(load(LIB))
    print("mp_fork_copies: OK")
