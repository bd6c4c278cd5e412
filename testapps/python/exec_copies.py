"""exec_copies.py LIBCUDART MODE [DIR]: copies, then the process replaces its
image (or tries to), for the exec test (tests/e2e/run_exec.py).

Every copy is a 64 KiB H2D through the runtime (ctypes). MODE:
  execv    3 copies, os.execv of this interpreter running this script as
           "second", which makes 5 copies
  execvp   the same through os.execvp and PATH, whose first two entries hold
           no such program (Python tries them one by one through execv)
  execl    the same through libc's execl (variadic), from ctypes
  execle   the same through libc's execle, with an environment
  eacces   3 copies, os.execv of a file without execute permission (fails:
           EACCES), then 2 copies more
  enoexec  3 copies, os.execv of an empty executable file (fails: ENOEXEC),
           then 2 copies more
DIR: where the eacces and enoexec files are made. Prints "exec_copies: OK"
at the end of the run that ends normally.
"""
import ctypes
import os
import sys

from sim_cudart import H2D, device_buffer, load

N = 64 << 10
LIB, MODE = sys.argv[1], sys.argv[2]
DIR = sys.argv[3] if len(sys.argv) > 3 else "."
rt = load(LIB)
dev = device_buffer(rt, N, "exec_copies")
host = ctypes.create_string_buffer(N)


def copies(n):
    for _ in range(n):
        if rt.cudaMemcpy(dev, host, N, H2D) != 0:
            raise SystemExit("exec_copies: cudaMemcpy failed")


if MODE == "second":
    copies(5)
    print("exec_copies: OK", flush=True)
    sys.exit(0)
copies(3)
again = [sys.executable, os.path.abspath(__file__), LIB, "second"]
if MODE == "execv":
    os.execv(sys.executable, again)
elif MODE == "execvp":
    os.environ["PATH"] = os.pathsep.join(["/nonexistent/a", "/nonexistent/b", os.path.dirname(sys.executable)])
    os.execvp(os.path.basename(sys.executable), again)
elif MODE in ("execl", "execle"):
    libc = ctypes.CDLL(None, use_errno=True)
    args = [a.encode() for a in again]
    if MODE == "execl":
        libc.execl(args[0], *args, None)
    else:
        env = (ctypes.c_char_p * (len(os.environ) + 1))(*[f"{k}={v}".encode() for k, v in os.environ.items()], None)
        libc.execle(args[0], *args, None, env)
    raise SystemExit(f"exec_copies: {MODE} failed: errno {ctypes.get_errno()}")
elif MODE in ("eacces", "enoexec"):
    path = os.path.join(DIR, MODE + ".bin")
    with open(path, "w"):
        pass
    os.chmod(path, 0o644 if MODE == "eacces" else 0o755)
    try:
        os.execv(path, [path])
        raise SystemExit("exec_copies: the exec of an unrunnable file returned no error")
    except OSError as e:
        print(f"exec_copies: exec failed as expected: errno {e.errno}", flush=True)
    copies(2)
    print("exec_copies: OK", flush=True)
else:
    raise SystemExit(f"exec_copies: unknown mode {MODE}")
