#!/usr/bin/env python3
"""The trace says what cuxfer's own work cost the program it recorded.

  run_overhead_note.py --cuxfer B/bin/cuxfer --sim B/testapps/sim --workdir DIR

The shim times about one intercepted call in 64 whole (random gaps) and subtracts the real call's
own time; at shutdown the trace's notes carry the count, the mean and the
share of the time recorded (Recorder::hook_time_summary). Checks, on the
simulated CUDA:

  - four threads of copies: one overhead note per process in the documented
    form, its call count equal to the report's event count (every event here
    is a call), a number of timed calls near calls / 64, a positive
    mean, a median bucket no longer than the longest call;
  - a program with fewer than 64 calls: no overhead note (nothing was timed,
    so nothing is said, rather than a guess);
  - CUXFER_CUPTI=off and on (no difference on the simulated CUDA: it has no
    CUPTI) both carry it.

Exit status: 0 pass, 1 fail.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

from e2e_util import fresh_dir, verdict

DUR = r"([\d.]+) (ns|us|ms|s)"
NOTE = re.compile(rf"^overhead: cuxfer's own work in (\d+) intercepted calls took {DUR} a call on average "
                  rf"\(median {DUR}-{DUR}, 99th percentile {DUR}-{DUR}, longest {DUR}; (\d+) calls timed whole\), "
                  rf"{DUR} in all, ([\d.]+) % of the ([\d.]+) s recorded \(summed over threads\)"
                  rf"(?:, of it capturing call stacks {DUR} a call \(Python frames {DUR}, native frames {DUR}, "
                  rf"matching and interning {DUR}\))?; ")
UNIT = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}


def ns(value: str, unit: str) -> float:
    return float(value) * UNIT[unit]


def record(cuxfer: str, workdir, name: str, app: list[str], env: dict) -> list[dict]:
    out = workdir / name
    r = subprocess.run([cuxfer, "record", "-q", "-o", str(out), "--", *app], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"{name}: record exited {r.returncode}: {r.stdout[-500:]}")
    rep = subprocess.run([cuxfer, "report", "--json", str(out)], stdout=subprocess.PIPE, text=True, timeout=120)
    return json.loads(rep.stdout)["processes"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--sim", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    workdir = fresh_dir(a.workdir)
    fails: list[str] = []
    for cupti in ("off", "auto"):
        env = dict(os.environ, CUXFER_CUPTI=cupti)
        procs = record(a.cuxfer, workdir, f"threads.{cupti}", [f"{a.sim}/threads-simshared", "4", "200", "4K"], env)
        for p in procs:
            notes = [n for n in p.get("notes", []) if n.startswith("overhead:")]
            if len(notes) != 1:
                fails.append(f"threads ({cupti}), pid {p['pid']}: {len(notes)} overhead notes, expected 1: {notes}")
                continue
            m = NOTE.match(notes[0])
            if not m:
                fails.append(f"threads ({cupti}): note not in the documented form: {notes[0]!r}")
                continue
            calls, mean = int(m[1]), ns(m[2], m[3])
            median_lo, median_hi = ns(m[4], m[5]), ns(m[6], m[7])
            longest, timed = ns(m[12], m[13]), int(m[14])
            total, share = ns(m[15], m[16]), float(m[17])
            print(f"threads ({cupti}): {calls} calls, {timed} timed, {mean:.0f} ns a call, median "
                  f"{median_lo:.0f}-{median_hi:.0f} ns, longest {longest:.0f} ns, {total / 1e6:.3f} ms, {share} %")
            if not median_lo < median_hi <= 2 * longest + 1:
                fails.append(f"threads ({cupti}): median {median_lo}-{median_hi} ns against a longest of {longest}")
            if calls != p["events"]:
                fails.append(f"threads ({cupti}): the note counts {calls} calls, the report {p['events']} events")
            # About one call in 64, at random gaps of 1-127 (mean 64): ~25 here,
            # a spread of ~3; outside calls/128 .. calls/32 the sampling is broken.
            if not calls // 128 <= timed <= calls // 32:
                fails.append(f"threads ({cupti}): {timed} calls timed of {calls}: expected "
                             f"{calls // 128}..{calls // 32}")
            # The stacks' part: part of the whole, measured on the same calls
            # (the sim app's stacks are native, 16 frames deep: never free).
            if m[19] is None:
                fails.append(f"threads ({cupti}): no call-stack part in the note: {notes[0]!r}")
            elif not 0 < ns(m[19], m[20]) <= mean:
                fails.append(f"threads ({cupti}): call stacks {m[19]} {m[20]} a call against {mean:.0f} ns in all")
            elif not 0 < ns(m[23], m[24]) <= ns(m[19], m[20]) * 1.01:
                # No Python in the app: its walk returns at once; the native walk is there and within the whole.
                fails.append(f"threads ({cupti}): native frames {m[23]} {m[24]} against call stacks {m[19]} {m[20]}")
            if mean <= 0 or total <= 0 or share <= 0:
                fails.append(f"threads ({cupti}): a cost of zero is not a measurement: {notes[0]!r}")
    procs = record(a.cuxfer, workdir, "few", [f"{a.sim}/pinned_loop-simshared"], dict(os.environ))
    for p in procs:
        if p["events"] >= 64:
            fails.append(f"pinned_loop made {p['events']} calls: the few-calls case needs fewer than 64")
        notes = [n for n in p.get("notes", []) if n.startswith("overhead:")]
        if notes:
            fails.append(f"pinned_loop ({p['events']} calls, none timed): an overhead note anyway: {notes}")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
