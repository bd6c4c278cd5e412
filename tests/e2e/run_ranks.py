#!/usr/bin/env python3
"""A multi-rank job as launchers start it: one `cuxfer record` per rank, each
with one launcher's variables (Open MPI, MPICH's PMI, srun, torchrun), into
one job directory; then `cuxfer report` of the directory.

  run_ranks.py --cuxfer CUXFER --workdir DIR -- APP

APP is pageable_loop (N round trips of S bytes); each rank gets its own N and
S, so the ranks differ exactly (expectations.py gives each one's traffic).
Checks: each trace is named cuxfer-<app>-rank<R>-<host>-<pid>.trace and
carries its rank note; the report's per-rank copies, bytes and classes
(JSON), each line's four sites (one per rank) summed into one location (JSON)
and one row of the text's call sites, the spread (most bytes, most pageable, slowest, max/median) in JSON,
text, CSV and HTML; a rank variable that is no number gives an unranked trace
and one line; a second run's rank in the directory, or another launch id, is
refused with one line naming both traces and exit 2. Exit 0 pass, 1 fail.
"""
import argparse
import csv
import io
import json
import os
import re
import socket
import subprocess
import sys

from e2e_util import command_after_dashes, fresh_dir, verdict
from expectations import EXPECTATIONS, app_name_of, parse_size

RANK_VARS = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE",
             "OMPI_MCA_orte_ess_jobid", "PMIX_RANK", "PMIX_NAMESPACE", "PMI_RANK", "PMI_SIZE",
             "MPI_LOCALRANKID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_JOB_ID", "SLURM_STEP_ID",
             "RANK", "LOCAL_RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID")

# rank -> (launcher's variables, the app's N and S)
RANKS = {
    0: ({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4"}, ["2", "64K"]),
    1: ({"PMI_RANK": "1", "PMI_SIZE": "4"}, ["3", "128K"]),
    2: ({"SLURM_PROCID": "2", "SLURM_LOCALID": "0", "SLURM_NTASKS": "4"}, ["4", "256K"]),
    3: ({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"}, ["5", "512K"]),
}
LAUNCHER = {0: "openmpi", 1: "pmi", 2: "slurm", 3: "torchrun"}


def record(cuxfer, app, args, outdir, rank_env):
    env = {k: v for k, v in os.environ.items() if k not in RANK_VARS}
    env.update(rank_env)
    env["CUXFER_PROFILE_DIR"] = "/nonexistent/cuxfer-test-profiles"
    cmd = [cuxfer, "record", "-q", "-o", str(outdir), "--", app, *args]
    print("+", " ".join(f"{k}={v}" for k, v in rank_env.items()), " ".join(cmd), flush=True)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def expected_rank(app, args):
    """(copies, bytes, pageable bytes, {class: (calls, bytes)}) of one rank from expectations.py."""
    exp = EXPECTATIONS[app_name_of(app)](args)
    classes = {}
    for proc in exp.processes:
        for op in proc.ops:
            if op.kind != "copy":
                continue
            c = classes.setdefault(f"{op.direction} {op.memory}", [0, 0])
            c[0] += op.calls
            c[1] += op.bytes
    copies = sum(c[0] for c in classes.values())
    nbytes = sum(c[1] for c in classes.values())
    pageable = sum(b for k, (n, b) in classes.items() if k in ("H2D pageable", "D2H pageable"))
    return copies, nbytes, pageable, {k: tuple(v) for k, v in classes.items()}


def report(cuxfer, *args):
    env = {**os.environ, "COLUMNS": "120", "CUXFER_PROFILE_DIR": "/nonexistent/cuxfer-test-profiles"}
    return subprocess.run([cuxfer, "report", *args], capture_output=True, text=True, timeout=300, env=env)


def max_over_median(values):
    v = sorted(values)
    n = len(v)
    med = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    return max(v) / med


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("app", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    app = command_after_dashes(a.app)[0]
    work = fresh_dir(a.workdir)
    job = work / "job"
    host = re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname().split(".")[0])[:64]
    name = os.path.basename(app)
    fails = []

    pid_of = {}
    for rank, (rank_env, args) in RANKS.items():
        r = record(a.cuxfer, app, args, job, rank_env)
        if r.returncode != 0:
            fails.append(f"rank {rank}: cuxfer record exit {r.returncode}: {r.stderr.strip()}")
        named = sorted(job.glob(f"cuxfer-{name}-rank{rank}-*.trace"))
        pat = re.compile(rf"cuxfer-{re.escape(name)}-rank{rank}-{re.escape(host)}-(\d+)\.trace")
        if len(named) != 1 or not pat.fullmatch(named[0].name):
            fails.append(f"rank {rank}: traces {[p.name for p in named]}, want one cuxfer-{name}-rank{rank}-{host}-PID.trace")
        else:
            pid_of[rank] = int(pat.fullmatch(named[0].name).group(1))
    if len(list(job.glob("*.trace"))) != len(RANKS):
        fails.append(f"{sorted(p.name for p in job.glob('*.trace'))}: want one trace per rank")

    rep = report(a.cuxfer, "--json", str(job))
    if rep.returncode != 0:
        fails.append(f"cuxfer report --json {job}: exit {rep.returncode}: {rep.stderr.strip()}")
        return verdict(fails)
    j = json.loads(rep.stdout)
    ranks = (j.get("ranks") or {}).get("ranks", [])
    if [k["rank"] for k in ranks] != sorted(RANKS):
        fails.append(f"report ranks {[k['rank'] for k in ranks]}, want {sorted(RANKS)}")
    want = {rank: expected_rank(app, args) for rank, (_, args) in RANKS.items()}
    for k in ranks:
        copies, nbytes, pageable, classes = want[k["rank"]]
        got = (k["copies"], k["bytes"], k["pageable_bytes"], {c["class"]: (c["calls"], c["bytes"]) for c in k["classes"]})
        if got != (copies, nbytes, pageable, classes):
            fails.append(f"rank {k['rank']}: {got}, want {(copies, nbytes, pageable, classes)}")
        if k["host"] != socket.gethostname() or k["launcher"] != LAUNCHER[k["rank"]]:
            fails.append(f"rank {k['rank']}: host {k['host']} launcher {k['launcher']}")
        if k["pids"] != [pid_of.get(k["rank"])]:
            fails.append(f"rank {k['rank']}: pids {k['pids']}, want [{pid_of.get(k['rank'])}] (the file name's)")
        if not k["cpu_blocked_ns"] > 0 or k["failed_calls"] != 0:
            fails.append(f"rank {k['rank']}: cpu_blocked_ns {k['cpu_blocked_ns']} failed {k['failed_calls']}")
    # The rank is in the trace itself (its note), not only in the file name.
    for p in j["processes"]:
        notes = [n for n in p["notes"] if n.startswith("rank: ")]
        rank = next((r for r, pid in pid_of.items() if pid == p["pid"]), None)
        if rank is None or len(notes) != 1 or not notes[0].startswith(f"rank: {rank} launcher={LAUNCHER[rank]} "):
            fails.append(f"pid {p['pid']}: rank notes {notes}, want one for rank {rank}")
    spread = (j.get("ranks") or {}).get("spread") or {}
    by_bytes = {r: w[1] for r, w in want.items()}
    by_pageable = {r: w[2] for r, w in want.items()}
    cpu = {k["rank"]: k["cpu_blocked_ns"] for k in ranks}
    slowest = max(sorted(cpu), key=lambda r: cpu[r]) if cpu else None
    expect_spread = {
        "most_bytes": {"rank": 3, "bytes": by_bytes[3]},
        "most_pageable": {"rank": 3, "bytes": by_pageable[3]},
        "slowest": {"rank": slowest, "cpu_blocked_ns": cpu.get(slowest)},
    }
    for key, v in expect_spread.items():
        if spread.get(key) != v:
            fails.append(f"spread.{key} = {spread.get(key)}, want {v}")
    imb = max_over_median(list(by_bytes.values()))
    if abs((spread.get("bytes_imbalance") or 0) - imb) > 1e-9 or abs((spread.get("pageable_imbalance") or 0) - imb) > 1e-9:
        fails.append(f"imbalance {spread.get('bytes_imbalance')} / {spread.get('pageable_imbalance')}, want {imb}")
    if cpu and abs((spread.get("cpu_blocked_imbalance") or 0) - max_over_median(list(cpu.values()))) > 1e-9:
        fails.append(f"cpu_blocked_imbalance {spread.get('cpu_blocked_imbalance')}")
    # Findings per rank: each rank's share of a finding, at its own call sites, adds up to the finding.
    for f in j["findings"]:
        per_rank = sum(x["calls"] for k in ranks for x in k["findings"] if x["kind"] == f["kind"])
        if per_rank != f["calls"]:
            fails.append(f"finding {f['kind']}: {f['calls']} copies, the ranks' shares add up to {per_rank}")

    # The ranks run one binary: each line's sites (one per rank) are one location, summed.
    sites = {s["id"]: s for s in j["callsites"]}
    locations = j.get("locations", [])
    per_rank = sum(1 for s in j["callsites"] if s["pid"] == pid_of.get(0))
    if not locations or len(locations) != per_rank or len(sites) != per_rank * len(RANKS):
        fails.append(f"{len(locations)} locations of {len(sites)} sites, want {per_rank} (rank 0's sites) of "
                     f"{per_rank * len(RANKS)}")
    for loc in locations:
        members = [sites.get(i) for i in loc["callsites"]]
        if None in members or sorted(loc["pids"]) != sorted(pid_of.values()) or \
                sorted(m["pid"] for m in members) != sorted(loc["pids"]) or \
                {m["location"] for m in members} != {loc["location"]} or \
                loc["calls"] != sum(m["calls"] for m in members) or \
                loc["bytes"] != sum(m["bytes"] for m in members) or \
                loc["cpu_blocked_ns"] != sum(m["cpu_blocked_ns"] for m in members) or loc["id"] != loc["callsites"][0]:
            fails.append(f"location {loc['location']}: {loc}, its sites {members}")
    if sum(loc["calls"] for loc in locations) != j["totals"]["calls"] - j["calls_without_callsite"]:
        fails.append(f"locations' calls {sum(loc['calls'] for loc in locations)}, want every copy with a site")

    text = report(a.cuxfer, "-o", "-", str(job))
    top = text.stdout[text.stdout.find("Top call sites"):text.stdout.find("Findings")]
    rows = [l for l in top.splitlines() if re.search(r"\s\d+ \+3$", l)]
    if len(rows) != len(locations) or f"Top call sites by CPU-blocked time ({len(locations)} of {len(locations)})" \
            not in top:
        fails.append(f"text call sites: want {len(locations)} rows of 4 ranks each (\"PID +3\"):\n{top}")
    print(top)
    for line in ("Ranks (4)", f"most bytes: rank 3 (5.00 MiB, {imb:.2f}x the median)",
                 f"most through pageable memory: rank 3 (5.00 MiB, {imb:.2f}x the median)",
                 f"slowest (most CPU-blocked time in copies): rank {slowest} ",
                 "rank 2: H2D pageable 4 copies 1.00 MiB; D2H pageable 4 copies 1.00 MiB"):
        if line not in text.stdout:
            fails.append(f"text report lacks {line!r}")
    if text.returncode != 0:
        fails.append(f"text report exit {text.returncode}")
    print(text.stdout[text.stdout.find("Ranks ("):][:1200])

    c = report(a.cuxfer, "--csv", str(job))
    rows = list(csv.DictReader(io.StringIO(c.stdout)))
    if c.returncode != 0 or not rows or any(int(r["rank"]) != next(k for k, p in pid_of.items() if p == int(r["pid"]))
                                            for r in rows):
        fails.append(f"--csv: exit {c.returncode}, rank column wrong or missing: {c.stdout[:300]}")
    html = work / "r.html"
    h = report(a.cuxfer, "--html", str(html), str(job))
    if h.returncode != 0 or "<h2>Ranks (4)</h2>" not in html.read_text():
        fails.append(f"--html: exit {h.returncode}, no Ranks section")

    # A rank variable that is no number: no rank in the name, one line.
    bad = work / "bad"
    r = record(a.cuxfer, app, ["1", "4K"], bad, {"RANK": "abc", "LOCAL_RANK": "0"})
    lines = [l for l in r.stderr.splitlines() if "RANK=abc is not a rank" in l]
    traces = [p.name for p in bad.glob("*.trace")]
    if r.returncode != 0 or len(lines) != 1 or len(traces) != 1 or "-rank" in traces[0]:
        fails.append(f"RANK=abc: exit {r.returncode}, lines {lines}, traces {traces}")

    # A second run's rank 0 in the job directory: refused, both traces named.
    r = record(a.cuxfer, app, ["1", "4K"], job, RANKS[0][0])
    rep = report(a.cuxfer, str(job))
    first0 = job / f"cuxfer-{name}-rank0-{host}-{pid_of.get(0)}.trace"
    err = rep.stderr.strip().splitlines()
    if rep.returncode != 2 or len(err) != 1 or str(first0) not in err[0] or "both are rank 0" not in err[0] \
            or len(re.findall(r"cuxfer-\S+-rank0-\S+\.trace", err[0])) != 2:
        fails.append(f"rerun into the job directory: exit {rep.returncode}, stderr {err}")
    print("refused:", err)

    # Two launches (different Open MPI job ids) in one directory: refused.
    mixed = work / "mixed"
    for rank, jobid in ((0, "1001"), (1, "1002")):
        record(a.cuxfer, app, ["1", "4K"], mixed,
               {"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": "2", "OMPI_MCA_orte_ess_jobid": jobid})
    rep = report(a.cuxfer, "--json", str(mixed))
    err = rep.stderr.strip().splitlines()
    if rep.returncode != 2 or len(err) != 1 or "launch ids 1001 and 1002" not in err[0] or rep.stdout:
        fails.append(f"two launch ids: exit {rep.returncode}, stderr {err}")
    # Every command that reads a job refuses it the same way, and writes nothing.
    budget = work / "mixed-budget.json"
    for name, args in (("export", ["export", "--perfetto", str(work / "mixed.json"), str(mixed)]),
                       ("policy", ["policy", "-o", str(work / "mixed-policy.json"), str(mixed)]),
                       ("check", ["check", "--write-budget", str(budget), str(mixed)]),
                       ("diff", ["diff", str(mixed), str(mixed)])):
        r = subprocess.run([a.cuxfer, *args], capture_output=True, text=True)
        err = r.stderr.strip().splitlines()
        if r.returncode != 2 or len(err) != 1 or "launch ids 1001 and 1002" not in err[0]:
            fails.append(f"{name} of two launches: exit {r.returncode}, stderr {err}")
    for written in (work / "mixed.json", work / "mixed-policy.json", budget):
        if written.exists():
            fails.append(f"{written.name} written from two launches")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
