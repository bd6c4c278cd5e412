#!/usr/bin/env python3
"""Processes that end through _exit, from Python (stdlib only).

  run_python_exit.py --cuxfer B/bin/cuxfer --shim B/lib/libcuxfer.so
      --libcudart B/simcuda/lib/libcudart.so --workdir DIR

Runs testapps/python/mp_fork_copies.py under `cuxfer record` on the simulated
CUDA: three children of multiprocessing's fork start method copy and end
through os._exit (no C exit handler runs), one with a thread still blocked;
then the parent copies. Checks from `cuxfer report --json` that every
process has a complete trace (its End block: the shim finished it at the
_exit), that each child's trace says it ended through _exit(0), and that the
copies are exact per process: 5 H2D + 1 D2H in each child, 5 H2D in the
parent. Before the _exit hook the children's traces were cut short with
none of their copies in them.

Exit status: 0 pass, 1 fail.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from e2e_util import fresh_dir, recorded_python_app_args, verdict

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "testapps" / "python" / "mp_fork_copies.py"
CHILDREN, COPIES, N = 3, 5, 64 << 10
fails: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        fails.append(what)


def main() -> int:
    a = recorded_python_app_args()
    out = fresh_dir(a.workdir)
    cmd = [a.cuxfer, "record", "-q", "--shim", a.shim, "-o", str(out), "--",
           sys.executable, str(APP), a.libcudart, str(CHILDREN), str(COPIES)]
    print("+ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=dict(os.environ))
    check(r.returncode == 0 and "mp_fork_copies: OK" in r.stdout,
          f"the script under cuxfer record: exit {r.returncode}, stdout {r.stdout[-300:]!r}, stderr {r.stderr[-600:]!r}")
    traces = sorted(out.glob("cuxfer-*.trace"))
    check(len(traces) == CHILDREN + 1, f"{CHILDREN + 1} traces, got {[t.name for t in traces]}")
    rep = subprocess.run([a.cuxfer, "report", "--json", *map(str, traces)], capture_output=True, text=True, timeout=120)
    check(rep.returncode == 0, f"cuxfer report --json: exit {rep.returncode}: {rep.stderr[-400:]}")
    procs = json.loads(rep.stdout)["processes"] if rep.returncode == 0 else []
    parent_pid = min((p["pid"] for p in procs), default=0)
    children = [p for p in procs if p["ppid"] == parent_pid]
    parents = [p for p in procs if p["pid"] == parent_pid]
    check(len(children) == CHILDREN and len(parents) == 1,
          f"one parent and {CHILDREN} children, got pids {[(p['pid'], p['ppid']) for p in procs]}")
    for p in procs:
        who = f"pid {p['pid']} ({'parent' if p in parents else 'child'})"
        check(p["complete"], f"{who}: trace complete, got cut: {p.get('cut_reason')}")
        child = p in children
        want_copies = COPIES + 1 if child else COPIES
        check(p["copies"] == want_copies and p["bytes"] == want_copies * N,
              f"{who}: {want_copies} copies of {N} bytes, got {p['copies']} copies, {p['bytes']} bytes")
        ended = [n for n in p.get("notes", []) if "ended through _exit(0)" in n]
        check(bool(ended) == child, f"{who}: the note of an _exit {'wanted' if child else 'not wanted'}: {p.get('notes')}")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
