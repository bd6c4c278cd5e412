#!/usr/bin/env python3
"""The shim when no thread can be started (stdlib only).

  run_thread_faults.py --cuxfer B/bin/cuxfer --shim B/lib/libcuxfer.so
      --fail-lib B/.../libcuxfer_fail_pthread_create.so --app B/testapps/sim/pageable_loop-simshared
      --workdir DIR

With every pthread_create failing (a preloaded stand-in), `cuxfer record`
observed and with --rewrite=pin: the app prints OK and exits 0 (its copies
checked by itself), the shim says once, on stderr and in the trace's notes,
that the process is not recorded, and the trace still reads (End present).

Exit status: 0 pass, 1 fail.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from e2e_util import fresh_dir, verdict

fails: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        fails.append(what)
        print("FAIL: " + what, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    for a in ("--cuxfer", "--shim", "--fail-lib", "--app", "--workdir"):
        ap.add_argument(a, required=True)
    args = ap.parse_args()
    work = fresh_dir(args.workdir)
    for rewrite in ("off", "pin"):
        out = work / rewrite
        env = dict(os.environ, LD_PRELOAD=args.fail_lib)
        cmd = [args.cuxfer, "record", "--rewrite=" + rewrite, "--shim", args.shim, "-o", str(out), "--",
               args.app, "8", "2M"]
        print("+ LD_PRELOAD=" + args.fail_lib + " " + " ".join(cmd), flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        print(r.stdout + r.stderr)
        check(r.returncode == 0 and "pageable_loop: OK" in r.stdout,
              f"--rewrite={rewrite}: the app ran as without cuxfer (exit {r.returncode})")
        said = [l for l in r.stderr.splitlines() if "cannot start the trace writer's thread" in l]
        check(len(said) == 1, f"--rewrite={rewrite}: said once on stderr, got {len(said)}")
        traces = sorted(out.glob("cuxfer-*.trace"))
        check(len(traces) == 1, f"--rewrite={rewrite}: one trace, got {len(traces)}")
        if traces:
            rep = subprocess.run([args.cuxfer, "report", "--json", str(traces[0])], capture_output=True, text=True)
            check(rep.returncode == 0, f"--rewrite={rewrite}: the trace reads: {rep.stderr[-300:]}")
            if rep.returncode == 0:
                d = json.loads(rep.stdout)
                notes = [n for p in d["processes"] for n in p["notes"]]
                check(any("not recorded" in n for n in notes), f"--rewrite={rewrite}: the note is in the trace: {notes}")
                check(all(p["complete"] for p in d["processes"]), f"--rewrite={rewrite}: the trace has its End")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
