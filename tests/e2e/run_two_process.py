#!/usr/bin/env python3
"""A two-process job (one process per GPU, as a launcher such as torchrun
starts them) recorded with one `cuxfer record` and merged into one report.

  run_two_process.py --cuxfer CUXFER --workdir DIR [--gpu] [--rewrite] -- APP N S

APP is pageable_loop (N round trips of S bytes, each checked by the app).
Both processes start at once; with --gpu each sees one GPU of two
(CUDA_VISIBLE_DEVICES=0 and 1; fewer than 2 GPUs: "no GPU", exit 77).
Checks: both exit 0 (their data checks passed), two complete traces, and the
merged report has both processes with exactly N H2D and N D2H copies of S
bytes each and 2*N*S bytes each way in total; with --rewrite, both processes'
copies went through the rewrite. Exit 0 pass, 1 fail, 77 skip.
"""
import argparse
import json
import os
import subprocess
import sys

from e2e_util import command_after_dashes, fresh_dir, verdict

SKIP = 77


def gpu_count() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--rewrite", action="store_true")
    ap.add_argument("app", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    app = command_after_dashes(a.app)
    n, s = int(app[1]), app[2]
    size = int(s[:-1]) << {"K": 10, "M": 20, "G": 30}[s[-1]] if s[-1] in "KMG" else int(s)
    if a.gpu and gpu_count() < 2:
        print(f"no GPU: a two-process job needs 2 GPUs, this machine has {gpu_count()}")
        return SKIP
    out = fresh_dir(a.workdir)
    cmd = " ".join(app)
    vis = ("CUDA_VISIBLE_DEVICES=0 ", "CUDA_VISIBLE_DEVICES=1 ") if a.gpu else ("", "")
    job = f"{vis[0]}{cmd} & p0=$!; {vis[1]}{cmd} & p1=$!; wait $p0 || exit 10; wait $p1 || exit 11"
    rec = [a.cuxfer, "record", "-o", str(out / "t"), *(["--rewrite=pin"] if a.rewrite else []), "--",
           "/bin/sh", "-c", job]
    env = {**os.environ, "CUXFER_PROFILE_DIR": "/nonexistent/cuxfer-test-profiles"}
    print("+", " ".join(rec), flush=True)
    r = subprocess.run(rec, env=env, capture_output=True, text=True, timeout=600)
    print(r.stdout, r.stderr, sep="\n")
    if r.returncode == SKIP:
        return SKIP
    fails = []
    if r.returncode != 0:
        fails.append(f"job exit status {r.returncode} (10/11: process 0/1 failed its data check)")
    traces = sorted((out / "t").glob("*.trace"))
    if len(traces) != 2:
        fails.append(f"{len(traces)} traces, want 2 (one per process; the shell makes none)")
    rep = subprocess.run([a.cuxfer, "report", "--json", *map(str, traces)], capture_output=True, text=True)
    if rep.returncode != 0:
        fails.append(f"cuxfer report: {rep.stderr.strip()}")
    else:
        j = json.loads(rep.stdout)
        procs = j["processes"]
        if len(procs) != 2 or len({p["pid"] for p in procs}) != 2:
            fails.append(f"{len(procs)} processes in the merged report, want 2")
        for p in procs:
            if not p.get("complete"):
                fails.append(f"pid {p['pid']}: trace not complete")
            if p.get("copies") != 2 * n or p.get("bytes") != 2 * n * size:
                fails.append(f"pid {p['pid']}: {p.get('copies')} copies {p.get('bytes')} B, want {2 * n} and {2 * n * size}")
        for d in ("H2D", "D2H"):
            calls = sum(c["calls"] for c in j["classes"] if c["direction"] == d)
            byts = sum(c["bytes"] for c in j["classes"] if c["direction"] == d)
            if calls != 2 * n or byts != 2 * n * size:
                fails.append(f"{d}: {calls} calls {byts} B, want {2 * n} and {2 * n * size}")
        pids = {d["pid"] for d in j.get("devices", [])}
        if pids != {p["pid"] for p in procs}:
            fails.append(f"per-device totals cover pids {sorted(pids)}, want both processes")
        if a.rewrite:
            rw = j.get("rewrite", {})
            if not (rw.get("staged_calls", 0) + rw.get("registered_calls", 0)):
                fails.append(f"--rewrite=pin: nothing staged or registered: {rw}")
        print("merged:", json.dumps({"processes": [(p["pid"], p.get("copies"), p.get("bytes")) for p in procs],
                                     "devices": j.get("devices")}))
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
