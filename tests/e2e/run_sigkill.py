#!/usr/bin/env python3
"""A signal mid-run (issue: faults and lifecycle).

SIGKILL: the shim's writer thread flushes every CUXFER_FLUSH_MS (50 ms by
default); a process killed with SIGKILL loses at most what it recorded since
the last flush. Documented bound: 100 ms of events (two flush periods: the
flush in progress and the next).

SIGTERM, SIGINT and SIGPIPE (--signal TERM|INT|PIPE), whose default action
also ends the process without an exit handler: the shim's handler (interpose/signal_hooks.cpp)
has the trace finished first, so nothing is lost while every thread copies.

  run_sigkill.py --cuxfer CUXFER [--signal KILL|TERM|INT|PIPE] [--after SECONDS]
                 [--cupti LIBCUPTI --forced-flush-delay-us N] --workdir DIR -- APP...

--cupti records with the stand-in libcupti (--cupti=on) whose forced flush
takes N us, as a real one waits for the GPU's work in flight or for a driver
lock the interrupted thread holds: the trace must still end complete, within
the shim's 2 s, without the flush's records and with a note that says so.

Runs APP (a long copy loop) under `cuxfer record`, sends the signal to the app
(not the launcher) after --after seconds, then checks: the launcher died of
that signal and said whether the trace was cut or finished first, the trace
reads and holds events; for SIGKILL it is reported
PARTIAL (no End block) and its last recorded call ended at most 100 ms before
the kill; for the others it is complete, says which signal ended the
process, and its last call ended at most 50 ms before the signal (the copies
run up to the handler). Exit 0 pass, 1 fail.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

BOUND_NS = 100_000_000
HANDLED_BOUND_NS = 50_000_000


def children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--after", type=float, default=1.0)
    ap.add_argument("--signal", choices=["KILL", "TERM", "INT", "PIPE"], default="KILL")
    ap.add_argument("--cupti", help="the stand-in libcupti, recorded with --cupti=on")
    ap.add_argument("--forced-flush-delay-us", type=int, default=0)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("app", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    app = a.app[1:] if a.app and a.app[0] == "--" else a.app
    out = Path(a.workdir)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    env = {**os.environ, "CUXFER_PROFILE_DIR": "/nonexistent/cuxfer-test-profiles"}
    cupti = []
    if a.cupti:
        env.update(CUXFER_CUPTI_LIB=a.cupti, SIMCUPTI_FORCED_FLUSH_DELAY_US=str(a.forced_flush_delay_us))
        cupti = ["--cupti=on"]
    launcher = subprocess.Popen([a.cuxfer, "record", *cupti, "-o", str(out / "t"), "--", *app], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(a.after)
    kids = children(launcher.pid)
    if not kids:
        print(f"FAIL: the app was not running after {a.after} s: {launcher.communicate()}")
        return 1
    sig = signal.Signals["SIG" + a.signal]
    killed_at = time.time_ns()
    os.kill(kids[0], sig)
    so, se = launcher.communicate(timeout=60)
    ended_s = (time.time_ns() - killed_at) / 1e9
    print(f"launcher exited {launcher.returncode} {ended_s:.2f} s after the signal; stderr: {se.strip()[-300:]}")
    rep = subprocess.run([a.cuxfer, "report", "--json", str(out / "t")], env=env, capture_output=True, text=True)
    if rep.returncode != 0:
        print(f"FAIL: report of the killed run exited {rep.returncode}: {rep.stderr}")
        return 1
    j = json.loads(rep.stdout)
    p = j["processes"][0]
    last_end = j["start_realtime_ns"] + j["span_ns"]
    lost_ns = killed_at - last_end
    print(f"events {p['events']}, complete {p['complete']} ({p.get('cut_reason')}), copies {j['totals']['calls']}; "
          f"last call ended {lost_ns / 1e6:.1f} ms before the {sig.name}")
    bad = []
    if launcher.returncode != -sig:
        bad.append(f"the launcher exited {launcher.returncode}, not of {sig.name} (-{int(sig)}) like its app")
    if p["events"] == 0 or j["totals"]["calls"] == 0:
        bad.append("no events survived")
    # The launcher's line says which: cut, or finished first.
    said = "its trace may be partial" if sig == signal.SIGKILL else "its traces were finished before it ended"
    if f"killed by {sig.name}: {said}" not in se:
        bad.append(f"cuxfer record did not say '{sig.name}: {said}': {se.strip()[-300:]!r}")
    if sig == signal.SIGKILL:
        if p["complete"]:
            bad.append("a SIGKILLed trace reported complete")
        bound = BOUND_NS
    else:
        if not p["complete"]:
            bad.append(f"the {sig.name} trace is not complete ({p.get('cut_reason')})")
        if not any(f"was ended by {sig.name}" in n for n in p.get("notes", [])):
            bad.append(f"no note says {sig.name} ended the process: {p.get('notes')}")
        bound = HANDLED_BOUND_NS
        if a.forced_flush_delay_us > 2_000_000:
            # The flush outlasts the shim's wait: the trace ends without it, and says so.
            if not any("its last flush of GPU records had not returned" in n for n in p.get("notes", [])):
                bad.append(f"no note says CUPTI's last flush was left: {p.get('notes')}")
            if ended_s > 3.0:
                bad.append(f"the process ended {ended_s:.2f} s after the signal (the shim waits 2 s at most)")
    if lost_ns > bound:
        bad.append(f"{lost_ns / 1e6:.1f} ms of events lost (bound {bound / 1e6:.0f} ms)")
    if bad:
        print("FAIL: " + "; ".join(bad))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
