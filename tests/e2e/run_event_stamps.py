#!/usr/bin/env python3
"""Event times land where the app's own clock says the calls were (stdlib only).

  run_event_stamps.py --cuxfer B/bin/cuxfer --shim B/lib/libcuxfer.so
      --libcudart B/simcuda/lib/libcudart.so --workdir DIR

Runs testapps/python/stamped_copies.py (8 copies, each between two reads of
CLOCK_MONOTONIC by the app, 20 ms apart) under `cuxfer record` on the
simulated CUDA, with the default stamps and with CUXFER_TSC=0, and checks
from `cuxfer export --sqlite` that every copy's recorded start and end lie
inside the app's bracket for it, start before end, in the app's order. With
the default, the shim stamps events with the time-stamp counter where the
kernel's clocksource is tsc, and its writer converts them to CLOCK_MONOTONIC
(shim/core/event_clock.h): a wrong rate, unit or pair would put them outside
by far more than the slack. The test says which stamps each run used (the
shim's debug line), and fails if the default run used the clock on a machine
whose clocksource is tsc and whose counter is invariant.

Exit status: 0 pass, 1 fail.
"""
from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from e2e_util import fresh_dir, recorded_python_app_args, verdict

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "testapps" / "python" / "stamped_copies.py"
COPIES = 8
# The converter's pairs are each read to well under a microsecond (a few on a
# loaded machine); a wrong rate is off by tens of microseconds between pairs
# 20 ms apart, a ticks-for-nanoseconds mistake by seconds.
SLACK_NS = 10_000
fails: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        fails.append(what)


def tsc_expected() -> bool:
    try:
        source = Path("/sys/devices/system/clocksource/clocksource0/current_clocksource").read_text().split()[0]
        flags = next(l for l in open("/proc/cpuinfo") if l.startswith("flags")).split()
    except (OSError, IndexError, StopIteration):
        return False
    return source == "tsc" and "constant_tsc" in flags and "nonstop_tsc" in flags


def run(a, out: Path, tsc_off: bool) -> None:
    label = "CUXFER_TSC=0" if tsc_off else "default"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUXFER_")}
    env["CUXFER_LOG_LEVEL"] = "debug"
    if tsc_off:
        env["CUXFER_TSC"] = "0"
    cmd = [a.cuxfer, "record", "-q", "--shim", a.shim, "-o", str(out), "--",
           sys.executable, str(APP), a.libcudart, str(COPIES)]
    print(f"+ ({label}) " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    if r.returncode != 0 or "stamped_copies: OK" not in r.stdout:
        check(False, f"{label}: the app under cuxfer record: exit {r.returncode}: {r.stdout[-300:]!r} {r.stderr[-600:]!r}")
        return
    stamps = re.findall(r"event stamps: [^\n]*", r.stderr)
    print(f"  {label}: {stamps[0] if stamps else 'no event-stamps line'}")
    check(bool(stamps), f"{label}: the shim's debug log names the event stamps")
    if stamps:
        uses_tsc = "time-stamp counter" in stamps[0]
        if tsc_off:
            check(not uses_tsc and "CUXFER_TSC=0" in stamps[0], f"{label}: stamps from the clock, said why: {stamps[0]}")
        elif tsc_expected():
            check(uses_tsc, f"{label}: clocksource tsc and an invariant counter, yet: {stamps[0]}")
        else:
            print(f"  {label}: this machine's stamps are the clock (no tsc clocksource or invariant counter):"
                  " only the clock's path is tested here")
    brackets = [tuple(map(int, m)) for m in re.findall(r"^copy \d+ (\d+) (\d+)$", r.stdout, re.M)]
    check(len(brackets) == COPIES, f"{label}: {COPIES} bracketed copies printed, got {len(brackets)}")
    db = out / "calls.sqlite"
    e = subprocess.run([a.cuxfer, "export", "--sqlite", str(db), *map(str, sorted(out.glob("cuxfer-*.trace")))],
                       capture_output=True, text=True, timeout=120)
    if e.returncode != 0:
        check(False, f"{label}: cuxfer export --sqlite: exit {e.returncode}: {e.stderr[-400:]}")
        return
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT start_ns, end_ns FROM calls WHERE kind = 'copy' ORDER BY start_ns").fetchall()
    check(len(rows) == COPIES, f"{label}: {COPIES} copies in the trace, got {len(rows)}")
    for i, ((before, after), (start, end)) in enumerate(zip(brackets, rows)):
        print(f"  {label} copy {i}: app [{before}, {after}] trace [{start}, {end}]"
              f" ({start - before:+d} / {after - end:+d} ns inside)")
        check(before - SLACK_NS <= start <= end <= after + SLACK_NS,
              f"{label} copy {i}: recorded [{start}, {end}] outside the app's [{before}, {after}] by more than {SLACK_NS} ns")


def main() -> int:
    a = recorded_python_app_args()
    work = fresh_dir(a.workdir)
    run(a, work / "default", tsc_off=False)
    run(a, work / "clock", tsc_off=True)
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
