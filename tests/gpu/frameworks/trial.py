#!/usr/bin/env python3
"""GPU tier, production trials (issue 6): one framework workload
(trial_workload.py) run plain, under `cuxfer record` (observe) and under
`cuxfer record --rewrite=pin`, plain and rewritten twice more interleaved for
the timing; with --profile also observed with PyTorch's own profiler on.

  trial.py --cuxfer BIN --framework torch|cupy|jax [--profile] [--summary FILE]

Checks:
  - every run's results are bit-identical to the plain run's (SHA-256);
  - each recorded report accounts for the workload's bytes each way: at least
    what the workload moved by its own count, at most 5 % + 16 MiB more
    (frameworks move a few bytes of their own: module images, scalars);
  - the report is not simulated and its CUPTI GPU records cover the copies
    (observe) - or, with the profiler (started after the first round, as in
    training), CUPTI was handed over to it and the profiler saw a memcpy for
    every transfer it profiled (never an "unknown buffer");
  - the rewrite ran (staged or registered bytes > 0) where the framework made
    pageable copies at all (JAX stages through pinned buffers of its own);
  - Python call sites (issue 13): with PyTorch and CuPy at least 90 % of the
    observed copies are reported at lines of the workload's own files (this
    directory), not inside the framework; JAX's share is printed only (XLA
    issues its copies from threads of its own, which run no Python).
Prints the rewrite's speedup on the workload's transfer time (median of the
interleaved pairs); nothing is asserted about it. Exit 0 pass, 1 fail, 77 skip.
"""
import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from trial_runner import HERE, by_direction, report, run_workload, verdict
from trial_runner import python_sites as site_share



def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--framework", required=True, choices=["torch", "cupy", "jax"])
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--summary")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix=f"cuxfer-trial-{a.framework}-"))
    wl = [sys.executable, str(HERE / "trial_workload.py"), a.framework, "--rounds", str(a.rounds)]
    log, fails, runs = [], [], {}

    def record(label, extra, wl_args=()):
        out = work / label
        p, t = run_workload([a.cuxfer, "record", "-q", *extra, "-o", str(out), "--", *wl, *wl_args], label, log)
        return p, t, report(a.cuxfer, out)

    _, runs["plain"] = run_workload(wl, "plain", log)
    if not runs["plain"]:
        fails.append("plain run printed no TRIAL line")
    p_obs, runs["observe"], rep_obs = record("observe", [])
    p_pin, runs["rewrite"], rep_pin = record("rewrite", ["--rewrite=pin"])
    timing = {"plain": [runs["plain"]], "rewrite": [runs["rewrite"]]}
    for i in (2, 3):  # interleaved repeats, for the timing only
        _, t = run_workload(wl, f"plain{i}", log)
        timing["plain"].append(t)
        _, t, _ = record(f"rewrite{i}", ["--rewrite=pin"])
        timing["rewrite"].append(t)
    reports = {"observe": rep_obs, "rewrite": rep_pin}
    if a.profile:
        p_prof, runs["profiler"], reports["profiler"] = record("profiler", [], ["--profile"])
        if "unknown buffer" in p_prof.stdout + p_prof.stderr:
            fails.append("the torch profiler saw a buffer it did not hand out ('unknown buffer')")

    for label, p in log:
        if p.returncode != 0:
            fails.append(f"{label}: exit status {p.returncode}: {p.stderr.strip()[-400:]}")
    ref = runs.get("plain") or {}
    for label, t in list(runs.items()) + [(f"timing {k}", t) for k, v in timing.items() for t in v]:
        if not t:
            fails.append(f"{label}: no TRIAL line")
        elif t["sha256"] != ref.get("sha256"):
            fails.append(f"{label}: results differ from the plain run ({t['sha256'][:16]} vs {ref.get('sha256', '')[:16]})")

    accounting, classes, pageable, notes, python_sites = {}, {}, {}, [], {}
    for label, rep in reports.items():
        if "error" in rep:
            fails.append(f"{label}: cuxfer report failed: {rep['error']}")
            continue
        if rep.get("simulated") is not False:
            fails.append(f"{label}: report simulated={rep.get('simulated')!r} on a GPU")
        got = by_direction(rep)
        classes[label] = {f"{c['direction']}/{c['memory']}": c["bytes"] for c in rep.get("classes", [])}
        pageable[label] = sum(v for k, v in classes[label].items() if k.endswith("/pageable"))
        for d, key in (("H2D", "h2d_bytes"), ("D2H", "d2h_bytes")):
            want = ref.get(key, 0)
            have = got.get(d, 0)
            accounting[f"{label} {d}"] = {"workload": want, "report": have, "extra": have - want}
            if have < want or have > want * 1.05 + (16 << 20):
                fails.append(f"{label} {d}: report {have} B, workload moved {want} B "
                             f"(want at least that and at most 5 % + 16 MiB more)")
        procs = rep.get("processes", [])
        cupti = [p.get("cupti", {}) for p in procs]
        if label == "profiler":
            if not any("handover" in c for c in cupti):
                fails.append(f"profiler: no CUPTI handover in the report ({cupti})")
            t = runs.get("profiler") or {}
            if t.get("profiler_memcpy_events", 0) < t.get("profiled_transfers", 1):
                fails.append(f"profiler: torch saw {t.get('profiler_memcpy_events')} memcpy events, "
                             f"want at least {t.get('profiled_transfers')}")
        elif not all(c.get("state") == "active" for c in cupti if c):
            fails.append(f"{label}: CUPTI not active: {cupti}")
        if label == "observe":
            ps = python_sites[label] = site_share(rep)
            if a.framework in ("torch", "cupy") and ps["share"] < 0.9:
                fails.append(f"observe: {ps['at_workload_lines']} of {ps['copies']} copies at the workload's "
                             f"Python lines ({ps['share']:.0%}); top sites {ps['top']}")
        if label == "rewrite":
            rw = rep.get("rewrite", {})
            if not pageable.get("observe"):
                notes.append("no pageable copies (the framework stages through its own pinned "
                             "buffers): nothing for the rewrite to do")
            elif not (rw.get("staged_bytes", 0) or rw.get("registered_bytes", 0)):
                fails.append(f"rewrite: nothing staged or registered ({ {k: v for k, v in rw.items() if 'calls' in k} })")

    def med(key, mode):
        v = [t[key] for t in timing[mode] if t]
        return statistics.median(v) if v else float("nan")
    speed = {k: {"plain_s": med(k, "plain"), "rewrite_s": med(k, "rewrite")} for k in ("h2d_s", "d2h_s")}
    for k, v in speed.items():
        v["ratio"] = v["rewrite_s"] / v["plain_s"] if v["plain_s"] else float("nan")
    rw = rep_pin.get("rewrite", {})
    summary = {"framework": a.framework, "sha256": ref.get("sha256"), "accounting": accounting,
               "classes": classes, "notes": notes, "python_sites": python_sites,
               "transfer_time": speed, "rewrite": {k: v for k, v in rw.items() if isinstance(v, (int, float))},
               "profiler": {k: v for k, v in (runs.get("profiler") or {}).items() if k.startswith("profiler")},
               "cupti": {k: [p.get("cupti") for p in r.get("processes", [])] for k, r in reports.items()}}
    print(json.dumps(summary, indent=1))
    return verdict(work, fails, log, summary, a.summary)

if __name__ == "__main__":
    sys.exit(main())
