#!/usr/bin/env python3
"""A fork after an exec that failed once CUPTI's last flush was given up on (stdlib only).

testapps/python/exec_copies.py enoexec_fork, under `cuxfer record` with the
stand-in CUPTI whose forced flush takes SIMCUPTI_FORCED_FLUSH_DELAY_US (3 s):
the exec can start a program, so the shim finishes the trace first; the last
flush, on a thread of its own, has not returned when the finish gives up on it
(it keeps CUPTI's locks while it runs); the exec then fails (ENOEXEC) and the
program forks. The recording has ended, so the fork child records nothing
whatever the fork handler waits for: the fork must not wait the handler's
bounded 250 ms for the locks the flush thread holds (it did: the fork took
250 ms and more). Checked: the app's own checks (exit 0, "exec_copies: OK"),
the fork under 150 ms, one complete trace of the 3 copies before the exec with
the note that the last flush had not returned, and the failed exec's stderr line.

  run_fork_after_stuck_flush.py --cuxfer B/bin/cuxfer --shim B/lib/libcuxfer.so \\
      --libcudart B/simcuda/lib/libcudart.so.13 --cupti B/simcuda/lib/libcupti.so --workdir DIR
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from e2e_util import fresh_dir, verdict

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "testapps" / "python" / "exec_copies.py"
N = 64 << 10
FORK_LIMIT_MS = 150.0  # the handler's bounded wait is 250 ms


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for opt in ("--cuxfer", "--shim", "--libcudart", "--cupti", "--workdir"):
        ap.add_argument(opt, required=True)
    a = ap.parse_args()
    work = fresh_dir(a.workdir)
    out = work / "trace"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUXFER_", "SIMCUPTI_"))}
    env.update(CUXFER_CUPTI_LIB=a.cupti, SIMCUPTI_FORCED_FLUSH_DELAY_US="3000000")
    cmd = [a.cuxfer, "record", "-q", "--shim", a.shim, "-o", str(out), "--",
           sys.executable, str(APP), a.libcudart, "enoexec_fork", str(work)]
    print("+ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    print(r.stdout, r.stderr, sep="\n")
    fails: list[str] = []
    if r.returncode != 0 or "exec_copies: OK" not in r.stdout:
        fails.append(f"the app under cuxfer record: exit {r.returncode}, {r.stdout[-300:]!r} {r.stderr[-600:]!r}")
    took = re.search(r"fork took ([0-9.]+) ms", r.stdout)
    if not took:
        fails.append("the app did not say how long its fork took")
    elif float(took.group(1)) >= FORK_LIMIT_MS:
        fails.append(f"the fork after the failed exec took {took.group(1)} ms (limit {FORK_LIMIT_MS}): its handler "
                     "waited for the locks of CUPTI's last flush, which the finish had given up on")
    if not any("failed (errno" in l and "not recorded" in l for l in r.stderr.splitlines()):
        fails.append("no stderr line of the failed exec")
    traces = sorted(out.glob("cuxfer-*.trace"))
    rep = subprocess.run([a.cuxfer, "report", "--json", *map(str, traces)], capture_output=True, text=True,
                         timeout=120)
    procs = json.loads(rep.stdout)["processes"] if rep.returncode == 0 else []
    if len(procs) != 1:
        fails.append(f"one trace expected, got {len(procs)} ({rep.stderr[-300:]})")
    for p in procs:
        if not p["complete"] or p["copies"] != 3 or p["bytes"] != 3 * N:
            fails.append(f"the trace: complete {p['complete']}, {p['copies']} copies, {p['bytes']} bytes "
                         f"(want complete, 3, {3 * N})")
        if not any("its last flush of GPU records had not returned" in n for n in p.get("notes", [])):
            fails.append(f"no note that the last flush had not returned: {p.get('notes')}")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
