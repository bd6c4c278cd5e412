#!/usr/bin/env python3
"""Two recordings of a program are never read as one run.

  run_separate_runs.py --cuxfer B/bin/cuxfer --workdir DIR -- APP ARGS...

In a fresh directory:
  - `cuxfer record -- APP` twice, without -o: each run gets its own folder,
    cuxfer-<app>-1/ and cuxfer-<app>-2/, holding that run's trace, and says
    `cuxfer report cuxfer-<app>-N/`; `cuxfer report` on each works.
  - `cuxfer record -o same -- APP` twice: `cuxfer report same/` (and the two
    traces named one by one) says first, on stderr, that both traces are
    from different runs and are added up as one job, then reports (exit 0);
    `export` and `policy` alike.
  - a record whose program writes no trace (`true`) leaves no empty folder.
Exit 0 pass, 1 fail.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from e2e_util import command_after_dashes, fresh_dir, verdict


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    app = command_after_dashes(a.command)
    work = fresh_dir(a.workdir)
    fails: list[str] = []

    def cuxfer(*args: str) -> subprocess.CompletedProcess:
        print("+ cuxfer " + " ".join(args), flush=True)
        return subprocess.run([a.cuxfer, *args], cwd=work, capture_output=True, text=True, timeout=120)

    name = Path(app[0]).name
    for n in (1, 2):
        r = cuxfer("record", "--", *app)
        folder = work / f"cuxfer-{name}-{n}"
        traces = sorted(folder.glob("cuxfer-*.trace")) if folder.is_dir() else []
        if r.returncode != 0 or len(traces) != 1:
            fails.append(f"record #{n}: exit {r.returncode}, traces in {folder.name}/: {traces}; stderr {r.stderr[-400:]!r}")
        if f"cuxfer report cuxfer-{name}-{n}/" not in r.stderr:
            fails.append(f"record #{n} does not say to report its folder: {r.stderr[-400:]!r}")
        rep = cuxfer("report", f"cuxfer-{name}-{n}/")
        if rep.returncode != 0:
            fails.append(f"report of run {n}: exit {rep.returncode}, {rep.stderr[-400:]!r}")
    if list(work.glob("cuxfer-*.trace")):
        fails.append("a trace was written into the current directory without -o")

    for _ in range(2):
        cuxfer("record", "-q", "-o", "same", "--", *app)
    traces = sorted(str(p.relative_to(work)) for p in (work / "same").glob("cuxfer-*.trace"))
    if len(traces) != 2:
        fails.append(f"two records into same/ wrote {traces}")
    for args in (["report", "same/"], ["report", *traces], ["export", "--perfetto", "p.json", "same/"],
                 ["policy", "-o", "p-policy.json", "same/"]):
        r = cuxfer(*args)
        lines = r.stderr.strip().splitlines()
        if r.returncode != 0 or not lines or "warning:" not in lines[0] or "different runs" not in lines[0]:
            fails.append(f"'cuxfer {' '.join(args)}' on two runs: exit {r.returncode} (want 0), first stderr line "
                         f"{lines[:1]!r} (want the different-runs warning)")

    r = cuxfer("record", "-q", "--", "true")
    if r.returncode != 0 or list(work.glob("cuxfer-true-*")):
        fails.append(f"record of a program that wrote no trace: exit {r.returncode}, left {list(work.glob('cuxfer-true-*'))}")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
