"""dlopen_wrapper.py LIBWRAP LIBCUDART: a library that wraps libc through
dlsym(RTLD_NEXT), loaded as Python loads extension modules (dlopen,
RTLD_LOCAL), must find libc's functions under cuxfer as without it; then
copies through the CUDA runtime (tests/e2e/run_coexist.py)."""
import ctypes
import sys

wrap = ctypes.CDLL(sys.argv[1])
print("selftest", wrap.wrap_alloc_selftest())
rt = ctypes.CDLL(sys.argv[2])
rt.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
N = 1 << 20
dev = ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(dev), N) == 0
src = ctypes.create_string_buffer(bytes(range(256)) * (N // 256), N)
dst = ctypes.create_string_buffer(N)
for _ in range(4):
    assert rt.cudaMemcpy(dev, src, N, 1) == 0
    assert rt.cudaMemcpy(dst, dev, N, 2) == 0
print("copies", "OK" if dst.raw == src.raw else "WRONG")
