#!/usr/bin/env python3
"""Processes that replace their image, or try to (stdlib only).

  run_exec.py --cuxfer B/bin/cuxfer --shim B/lib/libcuxfer.so
      --libcudart B/simcuda/lib/libcudart.so --workdir DIR

Runs testapps/python/exec_copies.py under `cuxfer record` on the simulated
CUDA in each of its modes and checks, from `cuxfer report --json`:
  - execv, execvp (PATH's misses first), execl, execle: two complete traces
    for the one pid, the first image's 3 copies with the note that it
    replaced its image through execve, the second image's 5 copies. Before
    the exec hooks, the first image's copies were lost and its trace was
    reported as killed or crashed.
  - eacces (the exec cannot start: no execute permission): one complete
    trace with all 5 copies, no execve note, nothing said on stderr.
  - enoexec (an executable file the kernel cannot run: the exec fails after
    cuxfer finished the trace): one complete trace with the 3 copies made
    before it and the note, one stderr line saying the later calls are not
    recorded, and the program itself unharmed (its 2 copies more, exit 0).

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
APP = ROOT / "testapps" / "python" / "exec_copies.py"
N = 64 << 10
NOTE = "the process replaced its image through execve ("
fails: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        fails.append(what)


def run(a, work: Path, mode: str) -> None:
    out = work / mode
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUXFER_")}
    cmd = [a.cuxfer, "record", "-q", "--shim", a.shim, "-o", str(out), "--",
           sys.executable, str(APP), a.libcudart, mode, str(work)]
    print("+ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    print(r.stdout, r.stderr, sep="\n")
    check(r.returncode == 0 and "exec_copies: OK" in r.stdout,
          f"{mode}: the app under cuxfer record: exit {r.returncode}, {r.stdout[-300:]!r} {r.stderr[-600:]!r}")
    traces = sorted(out.glob("cuxfer-*.trace"))
    rep = subprocess.run([a.cuxfer, "report", "--json", *map(str, traces)], capture_output=True, text=True,
                         timeout=120)
    check(rep.returncode == 0, f"{mode}: cuxfer report --json: exit {rep.returncode}: {rep.stderr[-400:]}")
    procs = json.loads(rep.stdout)["processes"] if rep.returncode == 0 else []
    for p in procs:
        check(p["complete"], f"{mode}: pid {p['pid']}: trace complete, got cut: {p.get('cut_reason')}")
    said = [l for l in r.stderr.splitlines() if "failed (errno" in l and "not recorded" in l]
    noted = [p for p in procs if any(n.startswith(NOTE) for n in p.get("notes", []))]
    if mode in ("eacces", "enoexec"):
        check(len(procs) == 1, f"{mode}: one trace, got {len(procs)}")
        want = 5 if mode == "eacces" else 3
        check(sum(p["copies"] for p in procs) == want and sum(p["bytes"] for p in procs) == want * N,
              f"{mode}: {want} copies recorded, got {[(p['copies'], p['bytes']) for p in procs]}")
        check(len(noted) == (mode == "enoexec"), f"{mode}: the execve note {'wanted' if mode == 'enoexec' else 'not wanted'}")
        check(len(said) == (mode == "enoexec"), f"{mode}: the stderr line of a failed exec: {said}")
        return
    check(len(procs) == 2 and len({p["pid"] for p in procs}) == 1, f"{mode}: two traces of one pid, got "
          f"{[(p['pid'], p['copies']) for p in procs]}")
    first = [p for p in procs if p in noted]
    second = [p for p in procs if p not in noted]
    check(len(first) == 1 and first[0]["copies"] == 3 and first[0]["bytes"] == 3 * N,
          f"{mode}: the first image's trace: its 3 copies and the execve note, got "
          f"{[(p['copies'], p.get('notes')) for p in procs]}")
    check(len(second) == 1 and second[0]["copies"] == 5, f"{mode}: the second image's 5 copies")
    check(not said, f"{mode}: nothing said of a failed exec: {said}")


def main() -> int:
    a = recorded_python_app_args()
    work = fresh_dir(a.workdir)
    for mode in ("execv", "execvp", "execl", "execle", "eacces", "enoexec"):
        run(a, work, mode)
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
