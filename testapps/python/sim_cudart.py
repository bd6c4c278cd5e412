"""The CUDA runtime through ctypes, for the test scripts beside this file that
copy from Python (ctypes releases the GIL around each call, as PyTorch's
copies do): the library with the argument types of the calls they make, and a
device buffer."""
import ctypes

H2D, D2H = 1, 2


def load(path):
    rt = ctypes.CDLL(path)
    rt.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    return rt


def device_buffer(rt, n, who):
    """n bytes of device memory; exits with `who`'s name if cudaMalloc fails."""
    dev = ctypes.c_void_p()
    status = rt.cudaMalloc(ctypes.byref(dev), n)
    if status != 0:
        raise SystemExit(f"{who}: cudaMalloc failed: {status}")
    return dev
