#!/usr/bin/env python3
"""The capture range end to end (testapps/capture_range.cpp on the simulated CUDA).

  run_capture_range.py --cuxfer CUXFER --workdir DIR -- APP

Records the app under `cuxfer record --capture-range=cudaProfilerApi` and
checks, exactly: only the 9 copies made inside its two profiler ranges are in
the report (per class: the pinned buffer allocated outside a range is still
pinned inside one; the second thread's copies are there), and the trace's note
says 2 ranges. Then: the same app without the option (all 15 copies, no
note); the app that never starts a range (no copy, the note says why);
with the rewrite on (still 9, the note says calls outside were rewritten);
a bad --capture-range (exit 2, one line) and a bad CUXFER_CAPTURE_RANGE
(one warning, the whole run recorded). Exit 0 pass, 1 fail, 77 no GPU.
"""
import argparse
import json
import os
import re
import subprocess
import sys

from e2e_util import command_after_dashes, fresh_dir, verdict

K = 64 << 10
# (direction, memory) -> (copies, bytes) inside the ranges
INSIDE = {("H2D", "pageable"): (3, 3 * 2 * K), ("D2H", "pageable"): (2, 2 * K + K), ("H2D", "pinned"): (4, 4 * K)}
ALL_COPIES = 15
NOTE = re.compile(r"capture range \(cudaProfilerApi\): 2 ranges, [\d.]+ s of the [\d.]+ s the shim ran; "
                  r"calls outside them were (passed through unrecorded|rewritten as configured but not recorded)$")


def record(cuxfer, out, app, env, *options):
    run = subprocess.run([cuxfer, "record", "-q", "-o", str(out), *options, "--", *app], env=env,
                         capture_output=True, text=True, timeout=120)
    print(" ".join(options), run.stdout, run.stderr, sep="\n")
    return run


def report(cuxfer, out):
    r = subprocess.run([cuxfer, "report", "--json", str(out)], capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 else None


def notes_of(rep):
    return [n for p in rep["processes"] for n in p.get("notes", [])]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("app", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    app = command_after_dashes(a.app)
    work = fresh_dir(a.workdir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUXFER_")}
    fails = []

    out = work / "ranges"
    run = record(a.cuxfer, out, app, env, "--capture-range=cudaProfilerApi")
    if run.returncode == 77:
        print("no GPU: skipping")
        return 77
    if run.returncode != 0 or "capture_range: OK" not in run.stdout:
        return verdict([f"the app failed under cuxfer record --capture-range (exit {run.returncode})"])
    rep = report(a.cuxfer, out)
    if not rep:
        return verdict(["report --json failed"])
    got = {(c["direction"], c["memory"]): (c["calls"], c["bytes"]) for c in rep["classes"]}
    if got != INSIDE:
        fails.append(f"classes inside the ranges {got}, want {INSIDE}")
    notes = [n for n in notes_of(rep) if n.startswith("capture range")]
    if len(notes) != 1 or not NOTE.match(notes[0]) or "passed through" not in notes[0]:
        fails.append(f"capture-range note {notes}")

    whole = work / "whole"
    record(a.cuxfer, whole, app, env)
    rep = report(a.cuxfer, whole)
    if not rep or rep["totals"]["calls"] != ALL_COPIES or any(n.startswith("capture range") for n in notes_of(rep)):
        fails.append(f"without --capture-range: {rep and rep['totals']}, notes {rep and notes_of(rep)}; want "
                     f"{ALL_COPIES} copies and no capture-range note")

    nostart = work / "nostart"
    run = record(a.cuxfer, nostart, [*app, "nostart"], env, "--capture-range=cudaProfilerApi")
    rep = report(a.cuxfer, nostart)
    want = ("capture range (cudaProfilerApi): the program never called cudaProfilerStart or cuProfilerStart, so "
            "nothing was recorded: its calls were passed through unrecorded")
    if run.returncode != 0 or not rep or rep["totals"]["calls"] != 0 or want not in notes_of(rep):
        fails.append(f"never started: exit {run.returncode}, {rep and rep['totals']}, notes {rep and notes_of(rep)}")
    if want not in run.stderr:
        fails.append("never started: the warning was not printed")

    rewrite = work / "rewrite"
    run = record(a.cuxfer, rewrite, app, {**env, "CUXFER_REGISTER": "off"}, "--capture-range=cudaProfilerApi",
                 "--rewrite=pin")
    rep = report(a.cuxfer, rewrite)
    notes = [n for n in notes_of(rep) if n.startswith("capture range")] if rep else []
    if run.returncode != 0 or not rep or rep["totals"]["calls"] != 9 or len(notes) != 1 or \
            "rewritten as configured" not in notes[0]:
        fails.append(f"with --rewrite=pin: exit {run.returncode}, {rep and rep['totals']}, notes {notes}")

    bad = subprocess.run([a.cuxfer, "record", "--capture-range=nvtx", "--", *app], env=env, capture_output=True,
                         text=True)
    if bad.returncode != 2 or bad.stderr.strip().splitlines() != [
            "cuxfer record: --capture-range is cudaProfilerApi or none, got 'nvtx'"]:
        fails.append(f"--capture-range=nvtx: exit {bad.returncode}, stderr {bad.stderr!r}")

    badenv = work / "badenv"
    run = record(a.cuxfer, badenv, app, {**env, "CUXFER_CAPTURE_RANGE": "yes"})
    rep = report(a.cuxfer, badenv)
    said = [l for l in run.stderr.splitlines() if "CUXFER_CAPTURE_RANGE" in l]
    if not rep or rep["totals"]["calls"] != ALL_COPIES or len(said) != 1:
        fails.append(f"CUXFER_CAPTURE_RANGE=yes: {rep and rep['totals']}, lines about it {said}; want the whole run "
                     "and one line")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
