#!/usr/bin/env python3
"""`cuxfer record --summary`: the traces reduced to a job summary beside them (stdlib only).

The app under `cuxfer record --summary -o DIR`: DIR holds the trace and
cuxfer-<...>.summary.json named after it; `cuxfer report --json` of the
summary equals the report of the trace (notes aside, both --no-profile); the
record's exit status stays the app's (a failing app: its status, the summary
still written). With --summary and no trace (a program that never loads the
shim): nothing written, nothing said but the usual line.

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
