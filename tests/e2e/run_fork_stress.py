#!/usr/bin/env python3
"""Forks against the shim's locks under `cuxfer record --rewrite=pin` (stdlib only).

testapps/fork_stress forks in a loop while other threads hold and nest the
shim's locks (NVTX name interning that grows and frees storage through the
libc hooks; in mode `all` copies, registration, allocation too). The fork
handlers take those locks: the run must end (a hang is a lock-order
deadlock; the stacks are printed), exit 0, say "fork_stress: OK" (every
copy's data was checked), and in mode `all` the report must hold every copy
the parent made.

  run_fork_stress.py --cuxfer build/bin/cuxfer --shim build/lib/libcuxfer.so --mode nvtx \\
      --workdir DIR -- build/testapps/sim/fork_stress-simshared nvtx 400000

Exit status: 0 pass, 1 fail, 77 skip (the app printed "no GPU" and exited 77).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

from e2e_util import command_after_dashes, fresh_dir, run_diagnosed, verdict

SKIP = 77


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--mode", choices=["nvtx", "all"], required=True)
    ap.add_argument("--timeout", type=float, default=90)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- APP MODE [ARG]")
    a = ap.parse_args()
    app = command_after_dashes(a.command)
    if not app:
        ap.error("no app given")
    work = fresh_dir(a.workdir)
    out = work / "trace"
    env = dict(os.environ)
    for k in ("CUXFER_REWRITE", "CUXFER_REGISTER", "CUXFER_POLICY", "LD_PRELOAD"):
        env.pop(k, None)
    env.setdefault("CUXFER_PROFILE_DIR", "/nonexistent/cuxfer-test-profiles")
    cmd = [a.cuxfer, "record", "-q", "--rewrite=pin", "--shim", a.shim, "-o", str(out), "--", *app]
    try:
        run = run_diagnosed(cmd, a.timeout, env=env)
    except subprocess.TimeoutExpired:
        return verdict([f"hung for {a.timeout:.0f} s: a fork handler and another thread wait on each other's "
                        "locks (stacks above)"])
    print(run.stdout, run.stderr, sep="\n")
    if run.returncode == SKIP and "no GPU" in run.stdout:
        return SKIP
    fails = []
    if run.returncode != 0:
        fails.append(f"exit status {run.returncode}")
    if "fork_stress: OK" not in run.stdout:
        fails.append("the app did not say OK")
    m = re.search(r"forks=(\d+) names=(\d+)(?: copies=(\d+))?", run.stdout)
    if not m or int(m[1]) == 0:
        return verdict(fails + [f"no forks made: {m and m[0]}"])
    if a.mode == "all":
        copies = int(m[3])
        r = subprocess.run([a.cuxfer, "report", "--json", str(out)], capture_output=True, text=True, timeout=120)
        rep = json.loads(r.stdout) if r.returncode == 0 else None
        calls = rep["totals"]["calls"] if rep else None
        if calls != copies:
            fails.append(f"report: {rep and rep['totals']}, want the parent's {copies} copies")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
