#!/usr/bin/env python3
"""CUPTI detached and attached again under copying threads, on the real CUDA.

  check_cupti_cycle.py --cuxfer CUXFER --workdir DIR -- APP [CYCLES PHASE_MS THREADS]

Records testapps/cupti_cycle.cpp with the default --cupti=auto and checks:
the app ran to its PASS line (every copy read back right), every copy is in
the trace, CUPTI was active and governed, it was detached at least once a
cycle and attached again at least once a cycle after the first, the copies
made after an attach got their GPU records (no more than one copy per change
of the records counted as missing one), and some copies have GPU time. With
CUXFER_CUPTI_DETACH=0 (--no-detach) no detach is noted. Exit 0 pass, 1 fail,
77 no GPU.
"""
import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from e2e_util import command_after_dashes, fresh_dir, verdict  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--no-detach", action="store_true")
    ap.add_argument("app", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    app = command_after_dashes(a.app)
    out = fresh_dir(a.workdir)
    env = dict(os.environ)
    if a.no_detach:
        env["CUXFER_CUPTI_DETACH"] = "0"
    run = subprocess.run([a.cuxfer, "record", "-o", str(out), "--", *app], env=env,
                         capture_output=True, text=True, timeout=300)
    print(run.stdout, run.stderr, sep="\n")
    if run.returncode == 77 or "no GPU" in run.stdout:
        print("no GPU: skipping")
        return 77
    fails = []
    if run.returncode != 0 or "cupti_cycle: OK" not in run.stdout:
        fails.append(f"the app failed (exit {run.returncode})")
        return verdict(fails)
    m = re.search(r"cycles=(\d+) calls=(\d+)", run.stdout)
    cycles, calls = int(m[1]), int(m[2])
    rep = json.loads(subprocess.run([a.cuxfer, "report", "--json", str(out)], capture_output=True,
                                    text=True, check=True).stdout)
    p = rep["processes"][0]
    cupti = p.get("cupti", {})
    g = cupti.get("copy_records") or {}
    print("cupti:", json.dumps(cupti))
    print("notes:", *p.get("notes", []), sep="\n  ")
    if cupti.get("state") != "active":
        fails.append(f"CUPTI not active: {cupti}")
    if g.get("governed") is not True:
        fails.append("copy records not governed")
    if g.get("copies") != calls:
        fails.append(f"{g.get('copies')} copies in the trace, the app made {calls}")
    changes = g.get("changes", 0)
    missing = p.get("events_without_gpu_record", 0)
    if missing > changes:
        fails.append(f"{missing} copies expected a GPU record and got none (more than the {changes} changes "
                     "can explain): records lost across a detach or attach")
    if g.get("copies_with_gpu_time", 0) == 0:
        fails.append("no copy has GPU time")
    note = next((n for n in p.get("notes", []) if n.startswith("cupti: detached")), None)
    if a.no_detach:
        if note:
            fails.append(f"CUXFER_CUPTI_DETACH=0, yet: {note}")
        return verdict(fails)
    d = re.match(r"cupti: detached (\d+) times .* attached again (\d+) times", note or "")
    if not d:
        fails.append("no note of CUPTI detached while its records were off")
    elif int(d[1]) < cycles or int(d[2]) < cycles - 1:
        fails.append(f"detached {d[1]} times and attached again {d[2]} times over {cycles} cycles; want at least "
                     f"{cycles} and {cycles - 1}")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
