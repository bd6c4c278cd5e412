#!/usr/bin/env python3
"""`cuxfer record --summary`: the traces reduced to a job summary beside them (stdlib only).

The app under `cuxfer record --summary -o DIR`: DIR holds the trace and
cuxfer-<...>.summary.json named after it; `cuxfer report --json` of the
summary equals the report of the trace (notes aside, both --no-profile); the
record's exit status stays the app's (a failing app: its status, the summary
still written). `cuxfer diff` of two such summaries (observed against
rewritten) equals the diff of their traces, and of a trace against a summary;
`--range` with a summary is refused (it needs the events).

  run_record_summary.py --cuxfer build/bin/cuxfer --shim build/lib/libcuxfer.so \\
      --workdir DIR -- build/testapps/sim/pageable_loop-simshared 4 1M
"""
from __future__ import annotations

import glob
import json
import sys
from pathlib import Path

from e2e_util import clean_env, fresh_dir, run_diagnosed, shim_app_args, verdict


def report(cuxfer: str, path: str, env: dict[str, str]) -> dict:
    r = run_diagnosed([cuxfer, "report", "--no-profile", "--json", path], 120, env=env)
    if r.returncode != 0:
        raise SystemExit(f"FAIL: report {path}: exit {r.returncode}: {r.stderr}")
    d = json.loads(r.stdout)
    d.pop("notes", None)
    return d


def main() -> int:
    a, app = shim_app_args(__doc__)
    work = fresh_dir(a.workdir)
    env = clean_env()
    fails: list[str] = []
    out = work / "run"
    r = run_diagnosed([a.cuxfer, "record", "--summary", "--shim", a.shim, "-o", str(out), "--", *app], 120, env=env)
    print(r.stdout, r.stderr, sep="\n")
    if r.returncode == 77:
        return 77
    if r.returncode != 0:
        return verdict([f"record --summary exited {r.returncode}"])
    traces = sorted(glob.glob(str(out / "cuxfer-*.trace")))
    summaries = sorted(glob.glob(str(out / "cuxfer-*.summary.json")))
    if len(traces) != 1 or len(summaries) != 1:
        return verdict([f"expected one trace and one summary in {out}, found {traces} and {summaries}"])
    if summaries[0] != traces[0][: -len(".trace")] + ".summary.json":
        fails.append(f"the summary {summaries[0]} is not named after its trace {traces[0]}")
    if "wrote the summary" not in r.stderr:
        fails.append("record did not say it wrote the summary")
    direct, summarized = report(a.cuxfer, traces[0], env), report(a.cuxfer, summaries[0], env)
    for key in direct:
        if key not in ("overlap", "ranges", "managed") and direct[key] != summarized.get(key):
            fails.append(f"report of the summary differs from the trace's in {key!r}")
    # cuxfer diff of two summaries: the same comparison as of their traces
    # (observed against rewritten, so that staged copies count too).
    new = work / "new"
    r = run_diagnosed([a.cuxfer, "record", "-q", "--summary", "--rewrite=pin", "--shim", a.shim, "-o", str(new), "--",
                       *app], 120, env=dict(env, CUXFER_STAGE_MIN_H2D="65536", CUXFER_REGISTER="off"))
    new_trace = sorted(glob.glob(str(new / "cuxfer-*.trace")))
    new_summary = sorted(glob.glob(str(new / "cuxfer-*.summary.json")))
    if r.returncode != 0 or len(new_trace) != 1 or len(new_summary) != 1:
        fails.append(f"record --rewrite=pin --summary: exit {r.returncode}, {new_trace}, {new_summary}")
    else:
        def diff(b: str, n: str) -> dict:
            d = run_diagnosed([a.cuxfer, "diff", "--json", b, n], 120, env=env)
            if d.returncode != 0:
                raise SystemExit(f"FAIL: diff {b} {n}: exit {d.returncode}: {d.stderr}")
            j = json.loads(d.stdout)
            j.pop("notes", None)
            return j
        by_traces = diff(traces[0], new_trace[0])
        by_summaries = diff(summaries[0], new_summary[0])
        staged = by_traces.get("new", {}).get("totals", {}).get("staged_calls")
        print(f"diff: {len(by_traces.get('sites', []))} sites, staged calls in the new run: {staged}")
        if not staged:
            fails.append("the rewritten run staged nothing: the diff does not test staged copies")
        if by_traces != by_summaries:
            for k in by_traces:
                if by_traces[k] != by_summaries.get(k):
                    fails.append(f"diff of the summaries differs from the diff of the traces in {k!r}")
        mixed = diff(traces[0], new_summary[0])
        if mixed != by_traces:
            fails.append("diff of a trace against a summary differs from the diff of the traces")
        d = run_diagnosed([a.cuxfer, "diff", "--range", "x", summaries[0], new_summary[0]], 120, env=env)
        if d.returncode != 2 or "--range needs the events" not in d.stderr:
            fails.append(f"diff --range of summaries: exit {d.returncode}, {d.stderr.strip()!r}")

    # cuxfer check of the summary against a budget written from the trace: the
    # same verdicts for the sites (named by build id) and the findings a
    # summary keeps (duplicate_uploads, round_trips, managed_migrations among
    # them); an older summary without those parts names them as not checked;
    # a summary without the sites' modules (an older cuxfer's) refused in one line.
    budget = work / "budget.json"
    r = run_diagnosed([a.cuxfer, "check", "--write-budget", str(budget), traces[0]], 120, env=env)
    sites = sum(1 for e in json.loads(budget.read_text())["entries"] if "site" in e) if r.returncode == 0 else 0
    if r.returncode != 0 or sites == 0:
        fails.append(f"check --write-budget: exit {r.returncode}, {sites} site entries: {r.stderr.strip()!r}")
    by_trace = run_diagnosed([a.cuxfer, "check", "--budget", str(budget), traces[0]], 120, env=env)
    by_summary = run_diagnosed([a.cuxfer, "check", "--budget", str(budget), summaries[0]], 120, env=env)
    print(f"check: trace exit {by_trace.returncode}, summary exit {by_summary.returncode}: {by_summary.stdout.strip()}")
    if by_trace.returncode != 0 or by_summary.returncode != 0:
        fails.append(f"check of the trace / the summary: exit {by_trace.returncode} / {by_summary.returncode}: "
                     f"{by_summary.stderr.strip()!r}")
    elif by_summary.stdout != by_trace.stdout or "not checked from summaries" in by_summary.stderr:
        fails.append(f"check of the summary differs from the trace's: {by_summary.stdout.strip()!r}, "
                     f"{by_summary.stderr.strip()!r}")
    forbidden = {k for e in json.loads(budget.read_text())["entries"] for k in e.get("forbid_findings", [])}
    from_parts = sorted(forbidden & {"duplicate_uploads", "round_trips", "managed_migrations"})
    if not from_parts:
        fails.append(f"the budget forbids {sorted(forbidden)}: the check of a summary's parts lost its point")
    partless = json.loads(Path(summaries[0]).read_text())
    for p in partless["processes"]:
        for part in ("ranges", "managed", "repeated_copies"):
            p.pop(part, None)
    partless_path = work / "partless.summary.json"
    partless_path.write_text(json.dumps(partless))
    r = run_diagnosed([a.cuxfer, "check", "--budget", str(budget), str(partless_path)], 120, env=env)
    if r.returncode != 0 or "not checked from summaries" not in r.stderr or \
            any(name not in r.stderr for name in from_parts):
        fails.append(f"check of a summary without its parts: exit {r.returncode}, {r.stderr.strip()!r}")
    old = json.loads(Path(summaries[0]).read_text())
    for p in old["processes"]:
        p["trace"].pop("modules", None)
    older = work / "older.summary.json"
    older.write_text(json.dumps(old))
    r = run_diagnosed([a.cuxfer, "check", "--budget", str(budget), str(older)], 120, env=env)
    if r.returncode != 2 or len(r.stderr.strip().splitlines()) != 1 or "make it again" not in r.stderr:
        fails.append(f"check of a summary without modules: exit {r.returncode}, {r.stderr.strip()!r}")
    # The app's exit status stays record's; its summary is written all the same.
    failing = work / "failing"
    exit_app = str(Path(app[0]).with_name(Path(app[0]).name.replace("pageable_loop", "exit_app")))
    r = run_diagnosed([a.cuxfer, "record", "-q", "--summary", "--shim", a.shim, "-o", str(failing), "--",
                       exit_app, "exit", "3"], 120, env=env)
    print(f"failing app: record exit {r.returncode}", r.stderr)
    if r.returncode != 3:
        fails.append(f"an app that exits 3: record exited {r.returncode}")
    if len(glob.glob(str(failing / "cuxfer-*.summary.json"))) != 1:
        fails.append("an app that exits 3: no summary beside its trace")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
