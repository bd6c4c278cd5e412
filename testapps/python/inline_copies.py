"""inline_copies.py: host->device copies from Python code given as text, for
tests/e2e/run_python_inline.py, which runs this file's text as `python -c
TEXT LIBCUDART SITE_PACKAGES` (code object file "<string>") and on stdin as
`python - LIBCUDART SITE_PACKAGES` ("<stdin>"), never as a file. Each line
that makes copies ends with a "# site: NAME" marker; the test reads the
markers to know which line of the text each copy must be reported at.

  direct      2 H2D from the text's own line
  framework   3 H2D made inside fakeframework (under site-packages/): the
              user's line is the text's that called it
  function    1 H2D from a function the text defines
"""
import ctypes
import sys

sys.path.insert(0, sys.argv[2])
import fakeframework  # noqa: E402

rt = ctypes.CDLL(sys.argv[1])
rt.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
N = 64 << 10
dev = ctypes.c_void_p()
if rt.cudaMalloc(ctypes.byref(dev), N) != 0:
    raise SystemExit("inline_copies: cudaMalloc failed")
buf = ctypes.create_string_buffer(N)


def load():
    if rt.cudaMemcpy(dev, buf, N, 1) != 0:  # site: function
        raise SystemExit("inline_copies: CUDA error")


for _ in range(2):
    if rt.cudaMemcpy(dev, buf, N, 1) != 0:  # site: direct
        raise SystemExit("inline_copies: CUDA error")
for _ in range(3):
    fakeframework.copy_to_device(rt, dev, buf, N)  # site: framework
load()
print("inline_copies: OK")
