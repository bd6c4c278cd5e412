#!/usr/bin/env python3
"""Processes ended by SIGTERM, SIGHUP or the app's own handler keep their
whole trace (interpose/signal_hooks.cpp; stdlib only).

  run_end_signals.py --cuxfer B/bin/cuxfer --shim B/lib/libcuxfer.so
      --libcudart B/simcuda/lib/libcudart.so --workdir DIR

Runs testapps/python/end_signal_copies.py under `cuxfer record` on the
simulated CUDA and checks, from `cuxfer report --json`:

  - a multiprocessing Pool, fork start method and the interpreter's default
    (forkserver from 3.14), whose exit terminates with SIGTERM the workers
    still alive (the others end through _exit: a race): every worker's
    copies counted, every trace complete;
  - a process that copies and waits, sent SIGTERM, then one sent SIGHUP: it
    dies of that signal (cuxfer record, exiting like its child, too), its
    trace is complete with every copy and says which signal ended it;
  - the app's own SIGTERM handler, set after the process started recording,
    runs (the process prints "handled" and exits 3), and nothing says a
    signal ended it;
  - the app's SIGTERM handler set before the process records, then the
    default put back: held from then on, the trace complete;
  - libc's sigaction, asked from the app once it records, answers the
    default for SIGTERM and SIGHUP and Python's own handler for SIGINT,
    while the kernel says a handler catches SIGTERM;
  - SIGTERM twice, as `timeout` delivers it to a recorded process (once to
    the process group, once forwarded by `cuxfer record`), while the first
    one's handler is still finishing (the stand-in CUPTI's final flush made
    slow, SIMCUPTI_FORCED_FLUSH_DELAY_US): the second reaches another thread, which waits
    for the same finish; the trace is complete (it was cut short);
  - CUXFER_FINISH_ON_SIGNAL=0: no handler, and the SIGTERM'd process's trace
    ends without its End block, as it did before.

Exit status: 0 pass, 1 fail.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from e2e_util import fresh_dir, recorded_python_app_args, site_markers, verdict

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "testapps" / "python" / "end_signal_copies.py"
WORKERS, TASKS, COPIES = 3, 6, 4
fails: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        fails.append(what)
        print("FAIL: " + what, flush=True)


def record_cmd(a, out: Path, *app_args: str) -> list[str]:
    return [a.cuxfer, "record", "-q", "--shim", a.shim, "-o", str(out), "--", sys.executable, str(APP),
            a.libcudart, *app_args]


def report(a, out: Path, cut: bool = False) -> dict:
    """The report of `out`; with `cut`, a trace cut before any event reached it may leave
    `report` with exit 1 and its line saying no event could be read (the report is written)."""
    r = subprocess.run([a.cuxfer, "report", "--json", str(out)], capture_output=True, text=True, timeout=120)
    ok = r.returncode == 0 or (cut and r.returncode == 1 and "no event could be read" in r.stderr)
    check(ok, f"cuxfer report --json {out}: exit {r.returncode}: {r.stderr[-400:]}")
    return json.loads(r.stdout) if ok and r.stdout else {}


def copies(rep: dict) -> int:
    return sum(s["calls"] for s in rep.get("callsites", []))


def partial(rep: dict) -> list:
    return [p["pid"] for p in rep.get("processes", []) if not p.get("complete", False)]


def signal_notes(rep: dict, name: str) -> list[str]:
    return [n for p in rep.get("processes", []) for n in p.get("notes", []) if f"was ended by {name}" in n]


def pool(a, work: Path, method: str) -> None:
    out = work / f"pool_{method}"
    print("+ " + " ".join(record_cmd(a, out, "pool", method, *map(str, (WORKERS, TASKS, COPIES)))), flush=True)
    r = subprocess.run(record_cmd(a, out, "pool", method, *map(str, (WORKERS, TASKS, COPIES))),
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0 and f"done {TASKS * COPIES}" in r.stdout,
          f"pool ({method}): exit {r.returncode}, stdout {r.stdout[-200:]!r}, stderr {r.stderr[-400:]!r}")
    rep = report(a, out)
    check(copies(rep) == TASKS * COPIES, f"pool ({method}): all {TASKS * COPIES} copies recorded, got {copies(rep)}")
    check(not partial(rep), f"pool ({method}): every trace complete, these are not: {partial(rep)}")
    # The workers copied at one line of the script: one location, every worker's site summed.
    workers = sorted({s["pid"] for s in rep.get("callsites", [])})
    locs = rep.get("locations", [])
    check(len(locs) == 1 and locs[0]["location"].endswith(f"{APP.name}:{site_markers(APP)['copy']} in copies")
          and locs[0]["calls"] == TASKS * COPIES and sorted(locs[0]["pids"]) == workers,
          f"pool ({method}): one location for the {len(workers)} workers' copies at the 'site: copy' line, "
          f"got {[(x['location'], x['calls'], x['pids']) for x in locs]}")
    # A worker ends through _exit when it takes the pool's "no more work"
    # before the pool's exit terminates it, else by SIGTERM: which is a race.
    print(f"pool ({method}): of the {len(rep.get('processes', []))} workers that copied, "
          f"{len(signal_notes(rep, 'SIGTERM'))} were ended by SIGTERM, the others through _exit", flush=True)


def ended_by(a, work: Path, sig: signal.Signals, extra_env: dict | None = None, mode: str = "wait",
             twice: bool = False) -> tuple[int, str, dict]:
    out = work / f"{mode}_{sig.name}{'_off' if extra_env and not twice else ''}{'_twice' if twice else ''}"
    cmd = record_cmd(a, out, mode, str(COPIES))
    print("+ " + " ".join(cmd), flush=True)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, **(extra_env or {})))
    line = p.stdout.readline()
    if not line.startswith("ready "):
        p.kill()
        check(False, f"{mode}: the app did not get ready: {line!r} {p.stderr.read()[-400:]!r}")
        return -1, "", {}
    os.kill(int(line.split()[1]), sig)
    if twice:
        time.sleep(0.2)  # the first handler is inside the (slow) final flush
        try:
            os.kill(int(line.split()[1]), sig)
        except ProcessLookupError:
            check(False, f"{mode}: the process ended within 0.2 s of the first {sig.name}, before the second")
    try:
        rest, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        check(False, f"{mode}: the app did not end within 60 s of {sig.name}")
        return -1, "", {}
    # Without the shim's handler (CUXFER_FINISH_ON_SIGNAL=0) the trace is cut.
    return p.returncode, line + rest, report(a, out, cut=bool(extra_env) and not twice)


def main() -> int:
    a = recorded_python_app_args()
    work = fresh_dir(a.workdir)
    for method in ("fork", "default"):
        pool(a, work, method)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        rc, _, rep = ended_by(a, work, sig)
        check(rc == -sig, f"{sig.name}: the process (and cuxfer record) died of {sig.name} (-{int(sig)}), got {rc}")
        check(copies(rep) == COPIES, f"{sig.name}: all {COPIES} copies recorded, got {copies(rep)}")
        check(not partial(rep), f"{sig.name}: the trace is complete")
        check(len(signal_notes(rep, sig.name)) == 1, f"{sig.name}: the trace says {sig.name} ended the process")

    # The app caught SIGTERM while the process began to record, then put the
    # default back: held from then on.
    rc, _, rep = ended_by(a, work, signal.SIGTERM, mode="restore")
    check(rc == -signal.SIGTERM, f"default put back: died of SIGTERM, got {rc}")
    check(copies(rep) == COPIES and not partial(rep), "default put back: every copy, the trace complete")
    check(len(signal_notes(rep, "SIGTERM")) == 1, "default put back: the trace says SIGTERM ended the process")

    rc, out, rep = ended_by(a, work, signal.SIGTERM, mode="handler")
    check(rc == 3 and "handled" in out, f"the app's own SIGTERM handler ran (exit 3, 'handled'), got {rc}: {out!r}")
    check(copies(rep) == COPIES and not partial(rep), "the app's own handler: every copy, the trace complete")
    check(not signal_notes(rep, "SIGTERM"), "the app's own handler: no note says SIGTERM ended the process")

    for env, caught in (({}, 1), ({"CUXFER_FINISH_ON_SIGNAL": "0"}, 0)):
        cmd = record_cmd(a, work / f"query{'_off' if env else ''}", "query")
        print("+ " + " ".join(cmd), flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=dict(os.environ, **env))
        want = f"query SIGTERM=DFL SIGINT=OTHER SIGHUP=DFL caught_SIGTERM={caught}"
        check(r.returncode == 0 and want in r.stdout, f"query {env}: want {want!r}, got {r.stdout!r} {r.stderr[-300:]!r}")

    if a.cupti:
        slow_finish = {"CUXFER_CUPTI_LIB": a.cupti, "SIMCUPTI_FORCED_FLUSH_DELAY_US": "800000"}
        rc, _, rep = ended_by(a, work, signal.SIGTERM, slow_finish, mode="wait_threads", twice=True)
        check(rc == -signal.SIGTERM, f"SIGTERM twice: died of SIGTERM, got {rc}")
        check(copies(rep) == COPIES and not partial(rep),
              f"SIGTERM twice: every copy, the trace complete (partial: {partial(rep)}, copies {copies(rep)})")
    else:
        print("SKIPPED the SIGTERM-twice case: no --cupti (the stand-in CUPTI makes the finish slow)", flush=True)

    rc, _, rep = ended_by(a, work, signal.SIGTERM, {"CUXFER_FINISH_ON_SIGNAL": "0"})
    check(rc == -signal.SIGTERM, f"CUXFER_FINISH_ON_SIGNAL=0: died of SIGTERM, got {rc}")
    check(len(partial(rep)) == 1, "CUXFER_FINISH_ON_SIGNAL=0: the trace ends without its End block, as before")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
