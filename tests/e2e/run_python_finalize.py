#!/usr/bin/env python3
"""The interpreter finalizes while daemon threads copy (stdlib only).

  run_python_finalize.py --cuxfer B/bin/cuxfer --shim B/lib/libcuxfer.so
      --libcudart B/simcuda/lib/libcudart.so
      --copy-forever B/testapps/sim/libcopy_forever.so --python 3.12 --workdir DIR

Runs testapps/python/finalize_copies.py under `cuxfer record` with that
interpreter on the simulated CUDA, ROUNDS times with 4 daemon threads and a
different time before the main thread returns (0 to 45 ms): finalization
lands at a different point of the threads' copies each time. Each round:
the process exits 0 and prints its OK line, as without cuxfer; its trace is
complete; the report has copies from every thread, the ones made while
Python ran at the script's line, any others counted by the note on copies
with no Python line; and no note says a frame did not read as its layout
says (a walk that met a frame being torn down and took it for a bad
layout). Exit 0 pass, 1 fail, 77 skip (no CPython of that version here).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from e2e_util import find_python, fresh_dir, site_markers, verdict

SKIP = 77
ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "testapps" / "python" / "finalize_copies.py"
THREADS, ROUNDS = 4, 10
fails: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        fails.append(what)
        print("FAIL: " + what, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    for k in ("--cuxfer", "--shim", "--libcudart", "--copy-forever", "--python", "--workdir"):
        ap.add_argument(k, required=True)
    a = ap.parse_args()
    python = find_python(a.python)
    if not python:
        print(f"CPython {a.python}: not found here (PATH, pyenv, /usr/bin): skipping")
        return SKIP
    work = fresh_dir(a.workdir)
    line = site_markers(APP)["copy"]
    for rnd in range(ROUNDS):
        out = work / f"round{rnd}"
        ms = rnd * 5
        cmd = [a.cuxfer, "record", "-q", "--shim", a.shim, "-o", str(out), "--", python, str(APP), a.libcudart,
               a.copy_forever, str(THREADS), str(ms)]
        print("+ " + " ".join(cmd), flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        who = f"round {rnd} ({ms} ms)"
        check(r.returncode == 0 and "finalize_copies: OK" in r.stdout,
              f"{who}: exit {r.returncode}, stdout {r.stdout[-200:]!r}, stderr {r.stderr[-600:]!r}")
        rep_run = subprocess.run([a.cuxfer, "report", "--json", str(out)], capture_output=True, text=True,
                                 timeout=120)
        check(rep_run.returncode == 0, f"{who}: cuxfer report --json: exit {rep_run.returncode}: "
              f"{rep_run.stderr[-400:]}")
        if rep_run.returncode != 0:
            continue
        rep = json.loads(rep_run.stdout)
        procs = rep["processes"]
        check(len(procs) == 1 and procs[0]["complete"], f"{who}: one complete trace, got "
              f"{[(p['pid'], p['complete'], p['cut_reason']) for p in procs]}")
        notes = [n for p in procs for n in p["notes"]] + rep.get("notes", [])
        check(not any("did not read as its layout says" in n for n in notes),
              f"{who}: a frame was misread during finalization: {notes}")
        check(any(f"Python frames in call stacks: CPython {a.python}" in n for n in notes),
              f"{who}: the note naming CPython {a.python}: {notes}")
        at_line = sum(s["calls"] for s in rep["callsites"]
                      if os.path.realpath(s["file"] or "/") == str(APP.resolve()) and s["line"] == line)
        total = rep["totals"]["calls"]
        check(at_line >= THREADS and rep["calls_without_callsite"] == 0,
              f"{who}: at least one copy per thread at finalize_copies.py:{line}, every copy at a site; got "
              f"{at_line} of {total}, {rep['calls_without_callsite']} without a site")
        if at_line != total:
            without = [n for n in rep.get("notes", []) if "have no Python line" in n]
            m = re.match(r"([\d,]+) of the ([\d,]+) copies", without[0]) if without else None
            check(m is not None and int(m.group(1).replace(",", "")) == total - at_line,
                  f"{who}: {total - at_line} copies away from the script's line, counted by the note: {without}")
        print(f"{who}: {total} copies, {at_line} at the script's line", flush=True)
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
