#!/usr/bin/env python3
"""Programs behave under the shim as without it (stdlib only).

  run_compare.py --shim B/lib/libcuxfer.so [--cuxfer B/bin/cuxfer] --workdir DIR
      --modes preload,disabled,record [--expect TEXT ...] -- CMD [ARGS...] [:: CMD [ARGS...] ...]

Runs each command (commands are separated by a lone `::`) once without the
shim, then in each mode, and compares the exit status and the standard
output with the run without it:
  preload   LD_PRELOAD=libcuxfer.so, the trace to DIR (CUXFER_OUTPUT_DIR)
  disabled  the same with CUXFER_DISABLE=1: the shim must be inert, every
            exported function behaving as if the library were not loaded
  record    cuxfer record -q
--expect TEXT: the run without the shim must print TEXT (so that a command
that stopped working everywhere does not pass as "the same"). The standard
error is shown on a difference, not compared (the shim may add its notes).
Exit 0 pass, 1 fail.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

from e2e_util import command_after_dashes, fresh_dir, verdict

fails: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        fails.append(what)
        print("FAIL: " + what, flush=True)


def commands(rest: list[str]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    for word in command_after_dashes(rest):
        if word == "::":
            out.append([])
        else:
            out[-1].append(word)
    return [c for c in out if c]


def run(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", required=True)
    ap.add_argument("--cuxfer")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--modes", default="preload,disabled,record")
    ap.add_argument("--expect", action="append", default=[])
    ap.add_argument("rest", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    work = fresh_dir(a.workdir)
    modes = [m for m in a.modes.split(",") if m]
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("CUXFER_") and k != "LD_PRELOAD"}
    for n, cmd in enumerate(commands(a.rest)):
        name = os.path.basename(cmd[0]) + (" " + " ".join(cmd[1:]) if cmd[1:] else "")
        want = run(cmd, base_env)
        print(f"+ {' '.join(cmd)}: exit {want.returncode}", flush=True)
        for text in a.expect:
            check(text in want.stdout, f"{name}: without the shim, no {text!r} in {want.stdout[-500:]!r}")
        for mode in modes:
            env = dict(base_env)
            argv = list(cmd)
            if mode in ("preload", "disabled"):
                env["LD_PRELOAD"] = a.shim
                env["CUXFER_OUTPUT_DIR"] = str(work / f"{n}.{mode}")
                if mode == "disabled":
                    env["CUXFER_DISABLE"] = "1"
            elif mode == "record":
                if not a.cuxfer:
                    ap.error("--modes record needs --cuxfer")
                argv = [a.cuxfer, "record", "-q", "--shim", a.shim, "-o", str(work / f"{n}.record"), "--", *cmd]
            else:
                ap.error(f"unknown mode {mode}")
            got = run(argv, env)
            same = got.returncode == want.returncode and got.stdout == want.stdout
            check(same, f"{name} [{mode}]: exit {got.returncode} (without the shim {want.returncode}); "
                        f"stdout {got.stdout[-800:]!r}, without the shim {want.stdout[-800:]!r}; "
                        f"stderr {got.stderr[-800:]!r}")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
