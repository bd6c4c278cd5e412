#!/usr/bin/env python3
"""`cuxfer diff` end to end (stdlib only): records one app twice, with
--rewrite=off and --rewrite=pin, and checks `cuxfer diff --json` of the two
runs: same work at every call site, staged bytes only in the pinned run.

  run_diff.py --cuxfer build/bin/cuxfer --workdir DIR -- build/testapps/sim/pageable_loop-simshared 8 256K

Exit status: 0 pass, 1 fail, 77 skip (the app printed "no GPU" and exited 77).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SKIP = 77


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--workdir", help="output directory (recreated); default: a fresh temporary one")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- APP [ARGS...]")
    a = ap.parse_args()
    cmd = a.command[1:] if a.command and a.command[0] == "--" else a.command
    if not cmd:
        ap.error("no app given")
    out = Path(a.workdir) if a.workdir else Path(tempfile.mkdtemp(prefix="cuxfer-diff-"))
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    env = dict(os.environ)
    # Hermetic: a machine profile of the developer's own (cuxfer calibrate) would
    # change the rewrite's thresholds and the estimates; tests that want one set it.
    env.setdefault("CUXFER_PROFILE_DIR", "/nonexistent/cuxfer-test-profiles")
    env.pop("CUXFER_REWRITE", None)
    for mode in ("off", "pin"):
        run = [a.cuxfer, "record", "-q", "-o", str(out / mode), f"--rewrite={mode}", "--", *cmd]
        print("+ " + " ".join(run), flush=True)
        p = subprocess.run(run, env=env, capture_output=True, text=True, timeout=240)
        sys.stdout.write(p.stdout + p.stderr)
        if p.returncode == SKIP:
            return SKIP
        if p.returncode != 0:
            print(f"FAIL: record --rewrite={mode} exited {p.returncode}")
            return 1
    run = [a.cuxfer, "diff", "--json", str(out / "off"), str(out / "pin")]
    print("+ " + " ".join(run), flush=True)
    p = subprocess.run(run, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        print(f"FAIL: cuxfer diff exited {p.returncode}: {p.stderr.strip()}")
        return 1
    d = json.loads(p.stdout)
    text = subprocess.run([a.cuxfer, "diff", str(out / "off"), str(out / "pin")], capture_output=True,
                          text=True, timeout=120)
    sys.stdout.write(text.stdout)
    failures = []
    if d.get("schema") != "cuxfer.diff/1":
        failures.append(f"schema {d.get('schema')!r}")
    if d.get("same_work") is not True:
        failures.append(f"same_work is {d.get('same_work')!r}: {d.get('differing_sites')}")
    if d["base"]["totals"]["staged_bytes"] != 0:
        failures.append(f"base staged {d['base']['totals']['staged_bytes']} bytes")
    if not d["new"]["totals"]["staged_bytes"] > 0:
        failures.append("new run staged no bytes")
    if d["base"]["totals"]["copy_bytes"] != d["new"]["totals"]["copy_bytes"]:
        failures.append("copy bytes differ")
    if d["only_in_base"] or d["only_in_new"]:
        failures.append(f"unmatched sites: {d['only_in_base']} / {d['only_in_new']}")
    if d["time_recovered_ns"] != d["base"]["totals"]["cpu_blocked_ns"] - d["new"]["totals"]["cpu_blocked_ns"]:
        failures.append("time_recovered_ns is not base - new CPU-blocked time")
    for f in failures:
        print("FAIL: " + f)
    if not failures:
        print("PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
