"""CuPy: cp.asarray(x) (H2D) and .get() (D2H). CuPy reaches the driver layer only.

Expected at least: H2D SIZE bytes, D2H SIZE bytes."""
import sys

from common import SIZE, need, no_gpu

np = need("numpy")
cp = need("cupy")
try:
    if cp.cuda.runtime.getDeviceCount() < 1:
        no_gpu("cupy sees 0 devices")
except Exception as e:  # cudaErrorNoDevice / InsufficientDriver surface as exceptions
    no_gpu(f"{type(e).__name__}: {e}")

x = np.arange(SIZE // 4, dtype=np.float32)
a = cp.asarray(x)  # H2D
cp.cuda.Device().synchronize()
y = a.get()  # D2H
ok = np.array_equal(x, y)
print("cupy transfers", "OK" if ok else "MISMATCH")
sys.exit(0 if ok else 1)
