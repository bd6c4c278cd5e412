"""Copies from the main interpreter and from a subinterpreter (3.14's
concurrent.interpreters), on the main thread and on a thread of its own, for
tests/e2e/run_python_stacks.py.

  python3.14 subinterpreter_copies.py LIBCUDART

Makes 3 + 3 copies in the main interpreter (at the "# site:" lines) and
5 + 5 in a subinterpreter; prints "subinterpreter_copies: OK"."""
import os
import sys
import threading
from concurrent import interpreters

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim_cudart  # noqa: E402

LIB = sys.argv[1]
SUB = f"""
import sys
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
import ctypes, sim_cudart
rt = sim_cudart.load({LIB!r})
dev = sim_cudart.device_buffer(rt, 4096, "subinterpreter")
buf = ctypes.create_string_buffer(4096)
for _ in range(5):
    assert rt.cudaMemcpy(dev, buf, 4096, sim_cudart.H2D) == 0
"""

rt = sim_cudart.load(LIB)
dev = sim_cudart.device_buffer(rt, 4096, "subinterpreter_copies")
import ctypes  # noqa: E402

buf = ctypes.create_string_buffer(4096)


def before():
    for _ in range(3):
        assert rt.cudaMemcpy(dev, buf, 4096, sim_cudart.H2D) == 0  # site: before


def after():
    for _ in range(3):
        assert rt.cudaMemcpy(dev, buf, 4096, sim_cudart.H2D) == 0  # site: after


before()
interp = interpreters.create()
interp.exec(SUB)
t = threading.Thread(target=interp.exec, args=(SUB,))
t.start()
t.join()
interp.close()
after()
print("subinterpreter_copies: OK")
