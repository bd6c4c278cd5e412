#!/usr/bin/env python3
"""SIGKILL mid-run (issue: faults and lifecycle). The shim's writer thread
flushes every CUXFER_FLUSH_MS (50 ms by default); a process killed with
SIGKILL loses at most what it recorded since the last flush. Documented bound:
100 ms of events (two flush periods: the flush in progress and the next).

  run_sigkill.py --cuxfer CUXFER --app APP [--after SECONDS] --workdir DIR

Runs APP (a long copy loop) under `cuxfer record`, SIGKILLs the app (not the
launcher) after --after seconds, then checks: the trace reads, is reported
PARTIAL (no End block), holds events, and its last recorded call ended at most
100 ms before the kill. Exit 0 pass, 1 fail.
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
    ap.add_argument("--workdir", required=True)
    ap.add_argument("app", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    app = a.app[1:] if a.app and a.app[0] == "--" else a.app
    out = Path(a.workdir)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    env = {**os.environ, "CUXFER_PROFILE_DIR": "/nonexistent/cuxfer-test-profiles"}
    launcher = subprocess.Popen([a.cuxfer, "record", "-q", "-o", str(out / "t"), "--", *app], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(a.after)
    kids = children(launcher.pid)
    if not kids:
        print(f"FAIL: the app was not running after {a.after} s: {launcher.communicate()}")
        return 1
    killed_at = time.time_ns()
    os.kill(kids[0], signal.SIGKILL)
    so, se = launcher.communicate(timeout=60)
    print(f"launcher exited {launcher.returncode}; stderr: {se.strip()[-300:]}")
    rep = subprocess.run([a.cuxfer, "report", "--json", str(out / "t")], env=env, capture_output=True, text=True)
    if rep.returncode != 0:
        print(f"FAIL: report of the killed run exited {rep.returncode}: {rep.stderr}")
        return 1
    j = json.loads(rep.stdout)
    p = j["processes"][0]
    last_end = j["start_realtime_ns"] + j["span_ns"]
    lost_ns = killed_at - last_end
    print(f"events {p['events']}, complete {p['complete']} ({p.get('cut_reason')}), copies {j['totals']['calls']}; "
          f"last call ended {lost_ns / 1e6:.1f} ms before the kill (bound {BOUND_NS / 1e6:.0f} ms)")
    bad = []
    if p["complete"]:
        bad.append("a SIGKILLed trace reported complete")
    if p["events"] == 0 or j["totals"]["calls"] == 0:
        bad.append("no events survived")
    if lost_ns > BOUND_NS:
        bad.append(f"{lost_ns / 1e6:.1f} ms of events lost (bound {BOUND_NS / 1e6:.0f} ms)")
    if bad:
        print("FAIL: " + "; ".join(bad))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
