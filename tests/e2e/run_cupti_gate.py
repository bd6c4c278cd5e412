#!/usr/bin/env python3
"""The CUPTI governor end to end (testapps/cupti_gate.cpp, the stand-in libcupti).

  run_cupti_gate.py --cuxfer CUXFER --cupti LIBCUPTI --mode auto|on --workdir DIR -- APP [PHASE_MS]

The app counts, per phase, how many of its copies got a CUPTI record (the
stand-in makes one only while the shim has memcpy records on).
  auto  sync phase: records on at first, then off (some, not all, recorded);
        async phase: on again at once for its new call site, off again once
        three windows have brought no new one (at least a sixth recorded, not
        all; the report counts async copies off for sites already timed);
        storm: off (under half);
        astorm (async copies over the cap from a new call site, after the
        async phase): some recorded (a sample for the new site) but under
        half, and CUPTI detached while they keep coming (the stand-in says
        whether it was attached when the phase ended);
        the report's copy_records: governed, every copy accounted for (with GPU
        time, or issued while records were off, or missing), its GPU-timed
        copies exactly the records the app saw made although each enable
        returns 1 ms after the records start (the stand-in's
        SIMCUPTI_ENABLE_DELAY_US: copies racing a change to on), at most one
        missing record per change, and the text report's GPU-time line.
  on    every copy recorded in every phase; no copy_records section (not governed).
  paused  under --capture-range=cudaProfilerApi (the app's "paused" phases):
        inside the first range at least a sixth of the async copies recorded
        (on from the start until their call site repeats), not all;
        after the stop, under a third (the records go off within a window)
        and CUPTI detached when the pause ends; in the second range under half
        (the records wait for the next sample, no attach at every resume);
        the report holds exactly the copies of the two ranges, and the note
        says 2 ranges.
  fork    under --rewrite=pin (the libc hooks preloaded) and --cupti=on, the app forks
        every other millisecond while the stand-in's flush hands its buffers back
        50 ms late (SIMCUPTI_FLUSH_DELAY_US): the shim's fork handlers and the
        writer's flush must not wait on each other (the flush's completion frees a
        4 MiB buffer through the libc hooks). Exit 0 within 60 s, every fork's
        child exited 0, every copy recorded; a hang prints every thread's stack.
  fork_driver_lock  the same forks under --cupti=on alone, the stand-in CUPTI
        modelling a driver whose own fork handler (which runs before the shim's)
        takes a lock its flush needs (SIMCUPTI_FORK_LOCK=1): the shim's handler
        must give up waiting for the lock the writer holds across the flush
        (at least one child says it is not recorded), and the run end as above.
Exit 0 pass, 1 fail.
"""
import argparse
import json
import os
import re
import subprocess
import sys

from e2e_util import command_after_dashes, fresh_dir, run_diagnosed, verdict


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--cupti", required=True)
    ap.add_argument("--mode", choices=["auto", "on", "paused", "fork", "fork_driver_lock"], required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("app", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    app = command_after_dashes(a.app)
    out = fresh_dir(a.workdir)
    env = {**os.environ, "CUXFER_CUPTI_LIB": a.cupti, "CUXFER_PROFILE_DIR": "/nonexistent/cuxfer-test-profiles"}
    if a.mode == "auto":
        # Each enable returns 1 ms after the records started: copies racing a
        # change to on get records their hooks did not expect (dozens in the
        # async storm), as when the machine is loaded or under a sanitizer.
        env["SIMCUPTI_ENABLE_DELAY_US"] = "1000"
    if a.mode == "paused":
        return paused(a, app, out, env)
    if a.mode in ("fork", "fork_driver_lock"):
        return fork(a, app, out, env, a.mode == "fork_driver_lock")
    run = subprocess.run([a.cuxfer, "record", f"--cupti={a.mode}", "-o", str(out), "--", *app], env=env,
                         capture_output=True, text=True, timeout=100)
    print(run.stdout, run.stderr, sep="\n")
    fails = []
    if run.returncode != 0:
        fails.append(f"exit status {run.returncode}")
    phases = {m[0]: (int(m[1]), int(m[2])) for m in re.findall(r"phase=(\w+) calls=(\d+) records=(\d+)", run.stdout)}
    if sorted(phases) != ["astorm", "async", "storm", "sync"]:
        fails.append(f"phases printed: {sorted(phases)}")
        return verdict(fails)
    traces = sorted(out.glob("*.trace"))
    if len(traces) != 1:
        fails.append(f"{len(traces)} traces, want 1")
        return verdict(fails)
    r = subprocess.run([a.cuxfer, "report", "--json", str(traces[0])], capture_output=True, text=True)
    text = subprocess.run([a.cuxfer, "report", str(traces[0])], capture_output=True, text=True).stdout
    rep = json.loads(r.stdout)
    p = rep["processes"][0]
    cupti = p.get("cupti", {})
    print("cupti:", json.dumps(cupti), "events_without_gpu_record:", p.get("events_without_gpu_record"))
    if p.get("events_dropped", 0):
        fails.append(f"{p['events_dropped']} events dropped (the storm is paced so that none should be): "
                     "the accounting below cannot be exact")
    calls = sum(c for c, _ in phases.values())
    records = sum(r for _, r in phases.values())
    if cupti.get("state") != "active":
        fails.append(f"CUPTI not active: {cupti}")
    if a.mode == "on":
        for name, (c, rec) in phases.items():
            if rec != c:
                fails.append(f"--cupti=on, {name}: {rec} of {c} copies recorded, want all")
        if "copy_records" in cupti:
            fails.append(f"--cupti=on is not governed, yet the report has copy_records: {cupti['copy_records']}")
        if "GPU time:" in text:
            fails.append("--cupti=on: the text report has a governor line")
        return verdict(fails)
    sc, sr = phases["sync"]
    ac, ar = phases["async"]
    tc, tr = phases["storm"]
    if not 0 < sr < sc:
        fails.append(f"sync phase: {sr} of {sc} copies recorded, want some (before the governor acts) but not all")
    if ar * 6 < ac or ar >= ac:
        fails.append(f"async phase: {ar} of {ac} copies recorded, want at least a sixth (records back on for "
                     "three windows of a new call site) and not all (off once it repeats)")
    if tr * 2 >= tc:
        fails.append(f"storm: {tr} of {tc} copies recorded, want under half (records cost too much)")
    ec, er = phases["astorm"]
    if er * 2 >= ec or er == 0:
        fails.append(f"astorm: {er} of {ec} async copies recorded, want under half (records cost too much) "
                     "but some (a sample for its new call site)")
    g = cupti.get("copy_records")
    if not g or g.get("governed") is not True:
        fails.append(f"no governed copy_records in the report: {cupti}")
        return verdict(fails)
    missing = p.get("events_without_gpu_record", 0)
    changes = g.get("changes", 0)
    if g.get("copies") != calls:
        fails.append(f"copy_records.copies {g.get('copies')}, the app made {calls}")
    # Copies whose hooks saw the records off while the writer was turning them
    # on have records too (the analyzer joins them to the latest such calls):
    # every record the app saw made is one copy's GPU time.
    timed = g.get("copies_with_gpu_time", 0)
    if timed != records:
        fails.append(f"copies_with_gpu_time {timed}, the app saw {records} records made (want the same)")
    if p.get("gpu_records_unmatched", 0):
        fails.append(f"{p['gpu_records_unmatched']} GPU records matched no copy")
    accounted = g.get("copies_with_gpu_time", 0) + g.get("sync_copies_records_off", 0) + \
        g.get("async_copies_records_off", 0) + missing
    # An off change's time is read before the hooks' flag is cleared, and the
    # records of copies racing an on change are joined: none falls between.
    if accounted != calls:
        fails.append(f"{accounted} copies accounted for (timed + records off + missing), {calls} made")
    if missing > changes:
        fails.append(f"{missing} copies counted as missing a record, more than the {changes} changes can explain")
    if changes < 3:
        fails.append(f"{changes} changes, want at least 3 (off, on, off)")
    if g.get("async_copies_records_off_sites_timed", 0) == 0:
        fails.append("no async copy counted as off because its call site had been timed (reason repeats)")
    if g.get("sync_copies_records_off", 0) == 0:
        fails.append("no synchronous copy ran with records off")
    if not 0 < g.get("on_share", 0) < 1:
        fails.append(f"on_share {g.get('on_share')}, want between 0 and 1")
    if "GPU time:" not in text or "--cupti=on" not in text:
        fails.append("the text report does not say which copies have GPU time")
    # While the records are off CUPTI is detached (idle, it still costs every
    # call): in the sync phase, the storm and the async storm, attached again
    # for the async phases (whose records above show that the re-attach worked).
    notes = [n for n in p.get("notes", []) if n.startswith("cupti: detached")]
    m = re.match(r"cupti: detached (\d+) times .* attached again (\d+) times", notes[0]) if notes else None
    if not m:
        fails.append(f"no note of CUPTI detached while its records were off: {p.get('notes')}")
    elif int(m[1]) < 2 or int(m[2]) < 1:
        fails.append(f"CUPTI detached {m[1]} times and attached again {m[2]} times; want at least 2 and 1 "
                     "(sync phase, async storm; async phase)")
    # The async storm: its records off by cost, CUPTI detached two windows
    # later although async copies kept coming.
    if "astorm_end_attached=0" not in run.stdout:
        fails.append("CUPTI still attached at the end of the async storm (records off, async copies coming)")
    return verdict(fails)


def paused(a, app, out, env) -> int:
    run = subprocess.run([a.cuxfer, "record", "--cupti=auto", "--capture-range=cudaProfilerApi", "-o", str(out),
                          "--", *app, "paused"], env=env, capture_output=True, text=True, timeout=100)
    print(run.stdout, run.stderr, sep="\n")
    fails = []
    if run.returncode != 0:
        fails.append(f"exit status {run.returncode}")
    phases = {m[0]: (int(m[1]), int(m[2])) for m in re.findall(r"phase=(\w+) calls=(\d+) records=(\d+)", run.stdout)}
    if sorted(phases) != ["async", "paused", "resumed"]:
        return verdict(fails + [f"phases printed: {sorted(phases)}"])
    (ic, ir), (pc, pr), (rc, rr) = phases["async"], phases["paused"], phases["resumed"]
    if ir * 6 < ic or ir >= ic:
        fails.append(f"inside the first range: {ir} of {ic} async copies recorded, want at least a sixth "
                     "(on until the call site repeats) and not all")
    if pr * 3 >= pc:
        fails.append(f"paused: {pr} of {pc} copies got a CUPTI record, want under a third (records off)")
    if "paused_end_attached=0" not in run.stdout:
        fails.append("CUPTI still attached at the end of the pause")
    if rr * 2 >= rc:
        fails.append(f"resumed: {rr} of {rc} copies recorded, want under half (the next sample, not at once)")
    r = subprocess.run([a.cuxfer, "report", "--json", str(out)], capture_output=True, text=True)
    rep = json.loads(r.stdout) if r.returncode == 0 else None
    if not rep or rep["totals"]["calls"] != ic + rc:
        fails.append(f"report: {rep and rep['totals']}, want the two ranges' {ic + rc} copies")
    notes = [n for p in rep["processes"] for n in p.get("notes", [])] if rep else []
    if not any(n.startswith("capture range (cudaProfilerApi): 2 ranges") for n in notes):
        fails.append(f"no capture-range note of 2 ranges: {notes}")
    return verdict(fails)


def fork(a, app, out, env, driver_lock: bool) -> int:
    env = {**env, "SIMCUPTI_FLUSH_DELAY_US": "50000"}
    rewrite = ["--rewrite=pin"]
    if driver_lock:
        env["SIMCUPTI_FORK_LOCK"] = "1"
        rewrite = []
    cmd = [a.cuxfer, "record", "-q", "--cupti=on", *rewrite, "-o", str(out), "--", *app, "fork"]
    try:
        run = run_diagnosed(cmd, 60, env=env)
    except subprocess.TimeoutExpired:
        return verdict(["hung: the fork handlers and the writer's CUPTI flush wait on each other (stacks above)"])
    print(run.stdout, run.stderr, sep="\n")
    fails = []
    if run.returncode != 0:
        fails.append(f"exit status {run.returncode}")
    m = re.search(r"forks=(\d+) records=(\d+)", run.stdout)
    if not m or int(m[1]) < 100:
        return verdict(fails + [f"want at least 100 forks: {m and m[0]}"])
    if driver_lock and "this fork child is not recorded" not in run.stderr:
        # Without a fork that met the writer inside the flush, the model was
        # never exercised and the pass would say nothing.
        fails.append("no fork met the writer inside the flush (no child said it is not recorded)")
    copies = int(m[2])  # --cupti=on: each copy's record was made
    r = subprocess.run([a.cuxfer, "report", "--json", str(out)], capture_output=True, text=True, timeout=120)
    rep = json.loads(r.stdout) if r.returncode == 0 else None
    if not rep or rep["totals"]["calls"] < copies:
        fails.append(f"report: {rep and rep['totals']}, want the parent's {copies} copies")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
