"""JAX: jax.device_put(x) (H2D) and np.asarray(y) (D2H). XLA reaches the driver through dlsym.

Expected at least: H2D SIZE bytes, D2H SIZE bytes."""
import os
import sys

from common import SIZE, need, no_gpu

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
np = need("numpy")
jax = need("jax")
try:
    gpus = jax.devices("gpu")
except Exception as e:
    no_gpu(f"{type(e).__name__}: {e}")
if not gpus:
    no_gpu("jax sees no GPU")

x = np.arange(SIZE // 4, dtype=np.float32)
y = jax.device_put(x, gpus[0])  # H2D
y.block_until_ready()
z = np.asarray(y)  # D2H
ok = np.array_equal(x, z)
print("jax transfers", "OK" if ok else "MISMATCH")
sys.exit(0 if ok else 1)
