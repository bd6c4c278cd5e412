#!/usr/bin/env python3
"""The examples in `cuxfer help` work as they are written.

  run_help_examples.py --cuxfer B/bin/cuxfer --shim B/lib/libcuxfer.so
      --libcudart B/simcuda/lib/libcudart.so --workdir DIR

Reads the "Example(s):" block of `cuxfer help` and runs its command lines, in
order, with bash in a fresh directory, as a user would paste them: `cuxfer`
is the cuxfer under test (first in PATH), `python` is this interpreter (a
link named python, so the traces are named after the interpreter's real
executable, python3.N, as on a user's machine), and train.py is a small
script that copies host->device through the simulated CUDA. Every line must
exit 0; a `report` must print a report of the script's copies. Exit 0 pass,
1 fail.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from e2e_util import fresh_dir, recorded_python_app_args, verdict

TRAIN_PY = """\
import ctypes, os
rt = ctypes.CDLL(os.environ["SIM_LIBCUDART"])
rt.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
N = 2 << 20
dev = ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(dev), N) == 0
buf = ctypes.create_string_buffer(N)
for _ in range(4):
    assert rt.cudaMemcpy(dev, buf, N, 1) == 0
print("train: OK")
"""


def example_lines(help_text: str) -> list[str]:
    """The command lines of the overview's Example(s) block: indented lines up to the next blank one."""
    lines, on = [], False
    for line in help_text.splitlines():
        if line.startswith("Example"):
            on = True
        elif on and not line.strip():
            break
        elif on:
            lines.append(line.strip())
    return lines


def main() -> int:
    a = recorded_python_app_args()
    fails: list[str] = []
    work = fresh_dir(a.workdir)
    bin_dir = work / "bin"
    bin_dir.mkdir()
    (bin_dir / "cuxfer").symlink_to(Path(a.cuxfer).resolve())
    (bin_dir / "python").symlink_to(Path(sys.executable).resolve())
    (work / "train.py").write_text(TRAIN_PY)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ.get('PATH', '')}", CUXFER_SHIM=str(Path(a.shim).resolve()),
               SIM_LIBCUDART=str(Path(a.libcudart).resolve()))
    help_text = subprocess.run([a.cuxfer, "help"], capture_output=True, text=True, timeout=30).stdout
    examples = example_lines(help_text)
    if not any(e.startswith("cuxfer record") for e in examples) or not any(e.startswith("cuxfer report") for e in examples):
        fails.append(f"'cuxfer help' has no record and report example: {examples}")
    for line in examples:
        print("+ " + line, flush=True)
        r = subprocess.run(["bash", "-c", line], cwd=work, env=env, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            fails.append(f"'{line}': exit {r.returncode}, stderr {r.stderr[-600:]!r}")
            break
        if line.startswith("cuxfer report") and "Findings" not in r.stdout:
            fails.append(f"'{line}': no report on stdout: {r.stdout[-600:]!r}")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
