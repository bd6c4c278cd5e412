"""Processes that SIGTERM, SIGHUP or the app's own handler end, for
tests/e2e/run_end_signals.py (the simulated CUDA through ctypes).

  end_signal_copies.py LIBCUDART pool START_METHOD WORKERS TASKS COPIES
      a multiprocessing Pool (its exit terminates the workers with SIGTERM):
      TASKS tasks of COPIES copies each
  end_signal_copies.py LIBCUDART wait COPIES
      COPIES copies, then "ready <pid>" and a wait for a signal to end it
  end_signal_copies.py LIBCUDART wait_threads COPIES
      the same with a second thread that sleeps: a second signal to the
      process, while the first one's handler runs, reaches that thread
  end_signal_copies.py LIBCUDART handler COPIES
      COPIES copies, then the app's own SIGTERM handler, "ready <pid>", and a
      wait: the handler prints "handled" and exits with status 3
  end_signal_copies.py LIBCUDART restore COPIES
      the app's own SIGTERM handler for the copies, then the default put back
      (signal.SIG_DFL), "ready <pid>", and a wait for a signal to end it
  end_signal_copies.py LIBCUDART query
      one copy (the process records), then what libc's sigaction answers for
      SIGTERM, SIGINT and SIGHUP: "query SIGTERM=DFL ..." (DFL, IGN or OTHER),
      and whether the kernel has a handler catching SIGTERM ("caught_SIGTERM=1")
"""
import ctypes
import multiprocessing as mp
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim_cudart  # noqa: E402

LIB = sys.argv[1]


def copies(n):
    rt = sim_cudart.load(LIB)
    dev = sim_cudart.device_buffer(rt, 4096, "end_signal_copies")
    buf = ctypes.create_string_buffer(4096)
    for _ in range(n):
        assert rt.cudaMemcpy(dev, buf, 4096, sim_cudart.H2D) == 0  # site: copy


def task(n):
    copies(n)
    return n


def wait_for_signal():
    print(f"ready {os.getpid()}", flush=True)
    while True:
        time.sleep(1)


class Sigaction(ctypes.Structure):  # glibc x86-64: handler, mask (128 bytes), flags, restorer
    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16), ("flags", ctypes.c_int),
                ("restorer", ctypes.c_void_p)]


def disposition(libc, sig):
    old = Sigaction()
    assert libc.sigaction(sig, None, ctypes.byref(old)) == 0
    return {0: "DFL", 1: "IGN"}.get(old.handler or 0, "OTHER")


def main():
    mode = sys.argv[2]
    if mode == "pool":
        method, workers, tasks, n = sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
        ctx = mp.get_context(None if method == "default" else method)
        with ctx.Pool(workers) as pool:
            done = pool.map(task, [n] * tasks)
        print(f"pool {ctx.get_start_method()} done {sum(done)}", flush=True)
    elif mode == "wait":
        copies(int(sys.argv[3]))
        wait_for_signal()
    elif mode == "wait_threads":
        copies(int(sys.argv[3]))
        threading.Thread(target=lambda: time.sleep(3600), daemon=True).start()
        wait_for_signal()
    elif mode == "handler":
        copies(int(sys.argv[3]))

        def handled(sig, frame):
            print("handled", flush=True)
            sys.exit(3)
        signal.signal(signal.SIGTERM, handled)
        wait_for_signal()
    elif mode == "restore":
        previous = signal.signal(signal.SIGTERM, lambda sig, frame: None)
        copies(int(sys.argv[3]))
        signal.signal(signal.SIGTERM, previous)
        wait_for_signal()
    elif mode == "query":
        copies(1)
        libc = ctypes.CDLL(None, use_errno=True)
        answers = " ".join(f"{name}={disposition(libc, getattr(signal, name))}"
                           for name in ("SIGTERM", "SIGINT", "SIGHUP"))
        # What the kernel holds (SigCgt): whether some handler catches SIGTERM.
        caught = next(int(line.split()[1], 16) for line in open("/proc/self/status") if line.startswith("SigCgt:"))
        print(f"query {answers} caught_SIGTERM={(caught >> (signal.SIGTERM - 1)) & 1}", flush=True)
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
