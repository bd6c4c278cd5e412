#!/usr/bin/env python3
"""The .eh_frame walk gives libunwind's stacks, in other people's layouts too.

  run_unwind_verify.py --cuxfer B/bin/cuxfer --shim B/lib/libcuxfer.so
      --sim B/testapps/sim --libcudart B/simcuda/lib/libcudart.so --workdir DIR
      [--only apps|python]

Runs simulated apps (threads, streams, fork, the static runtime, a driver
unloaded and loaded again with dlclose) and testapps/python/python_copies.py
under every CPython 3.10-3.15 found, each under `cuxfer record` with
CUXFER_UNWINDER=verify: every captured stack is taken by both unwinders, and
the trace's notes say how many were compared and how many differed. Checks,
for every process of every run:

  - the note is there, with at least one stack compared;
  - none differed;
  - none had to be taken from the fallback (simulated apps and CPython are
    ordinary compiled code: the walk must follow all of it).

Exit status: 0 pass, 1 fail.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from e2e_util import find_python, fresh_dir, verdict

ROOT = Path(__file__).resolve().parents[2]
PY_APP = ROOT / "testapps" / "python" / "python_copies.py"
NOTE = re.compile(r"(\d+) stacks taken from the fallback unwinder(?: \(.*\))?; verify: (\d+) stacks compared with it, (\d+) differed")

APPS = [
    ("threads-simshared", ["4", "20", "64K"]),
    ("threads-simstatic", ["4", "20", "64K"]),
    ("async_streams-simshared", ["4", "1M"]),
    ("async_streams-simstatic", ["4", "1M"]),
    ("mixed-simshared", ["2", "1M"]),
    ("fork_app-simshared", []),
    ("ptds_streams-simstatic", ["3", "256K"]),
    ("tiny_storm-simshared", ["2000", "64"]),
    ("managed-simshared", ["2", "1M"]),
    ("driver_reload-sim", []),
    ("driver_dlsym-sim", []),
]


def pythons() -> list[str]:
    return [p for v in ("3.10", "3.11", "3.12", "3.13", "3.14", "3.15") if (p := find_python(v))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--sim", required=True)
    ap.add_argument("--libcudart", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--only", choices=["apps", "python"],
                    help="just the simulated apps (a ThreadSanitizer pass cannot run Python) or just Python")
    a = ap.parse_args()
    work = fresh_dir(a.workdir)
    fails: list[str] = []
    env = dict(os.environ, CUXFER_UNWINDER="verify", SIMCUDA_DEVICE_COUNT="2")
    runs = [(name, [str(Path(a.sim) / name)] + args) for name, args in APPS] if a.only != "python" else []
    pys = pythons() if a.only != "apps" else []
    if not pys and a.only != "apps":
        fails.append("no CPython 3.10-3.15 found: the Python frames' native stacks were not checked")
    for py in pys:
        runs.append((f"python-{py.replace('/', '_').strip('_')}", [py, str(PY_APP), a.libcudart, "2", "10"]))
    compared_total = 0
    for name, cmd in runs:
        out = work / name
        r = subprocess.run([a.cuxfer, "record", "-q", "--shim", a.shim, "-o", str(out), "--"] + cmd, env=env,
                           capture_output=True, text=True, timeout=240)
        if r.returncode != 0:
            fails.append(f"{name}: exit {r.returncode}: {r.stderr[-400:]!r}")
            continue
        if "unwinder verify:" in r.stderr:
            fails.append(f"{name}: {r.stderr.strip().splitlines()[-1]}")
        rep = subprocess.run([a.cuxfer, "report", "--json", str(out)], capture_output=True, text=True, timeout=120)
        if rep.returncode != 0:
            fails.append(f"{name}: report exit {rep.returncode}: {rep.stderr[-300:]!r}")
            continue
        procs = json.loads(rep.stdout).get("processes", [])
        if not procs:
            fails.append(f"{name}: no process in the report")
        for i, p in enumerate(procs):
            notes = [m for n in p.get("notes", []) if (m := NOTE.search(n))]
            if len(notes) != 1:
                fails.append(f"{name}: process {i}: {len(notes)} unwinder notes, expected 1 ({p.get('notes')})")
                continue
            fallback, compared, differed = (int(x) for x in notes[0].groups())
            compared_total += compared
            print(f"{name} process {i}: {compared} stacks compared, {differed} differed, {fallback} fell back")
            if compared == 0:
                fails.append(f"{name}: process {i}: no stack compared")
            if differed:
                fails.append(f"{name}: process {i}: {differed} of {compared} stacks differed from libunwind's")
            if fallback:
                fails.append(f"{name}: process {i}: {fallback} stacks fell back to libunwind")
    print(f"{len(runs)} runs, {compared_total} stacks compared")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
