"""Copies from a loop hot enough for CPython's JIT (3.14+, PYTHON_JIT=1), for
tests/e2e/run_python_stacks.py: 400 copies at the "# site: hot" line, under
20 calls from the "# site: outer" line. Prints "jit_copies: OK <enabled>"
(whether the JIT ran)."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim_cudart  # noqa: E402

rt = sim_cudart.load(sys.argv[1])
dev = sim_cudart.device_buffer(rt, 4096, "jit_copies")
buf = ctypes.create_string_buffer(4096)


def hot(n):
    total = 0
    for i in range(n):
        total += i * 3 % 7
        if i % 1000 == 0:
            assert rt.cudaMemcpy(dev, buf, 16, sim_cudart.H2D) == 0  # site: hot
    return total


def outer():
    for _ in range(20):
        hot(20000)  # site: outer


outer()
jit = getattr(sys, "_jit", None)
print(f"jit_copies: OK {bool(jit and jit.is_enabled())}")
