"""userproj.train LIBCUDART FRAMEWORK_DIR: copies from a user's project that is
installed (its files under site-packages/), for tests/e2e/run_python_installed.py.
Run as `python -m userproj.train`, through a console-script stub, or called
from code given as text. Each line that makes copies ends with "# site: NAME".

  upload      2 H2D from upload()
  framework   3 H2D made inside fakeframework (another installed package)
"""
import ctypes
import sys

N = 64 << 10


def upload(rt, dev, buf):
    if rt.cudaMemcpy(dev, buf, N, 1) != 0:  # site: upload
        raise SystemExit("userproj: CUDA error")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    sys.path.insert(0, argv[1])
    import fakeframework

    rt = ctypes.CDLL(argv[0])
    rt.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    dev = ctypes.c_void_p()
    if rt.cudaMalloc(ctypes.byref(dev), N) != 0:
        raise SystemExit("userproj: cudaMalloc failed")
    buf = ctypes.create_string_buffer(N)
    for _ in range(2):
        upload(rt, dev, buf)
    for _ in range(3):
        fakeframework.copy_to_device(rt, dev, buf, N)  # site: framework
    print("userproj: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
