#!/usr/bin/env python3
"""GPU tier, PyCUDA trial: pycuda_workload.py (memcpy_htod/memcpy_dtoh of a reused
256 MiB numpy array, the same from pagelocked_empty, gpuarray.to_gpu/.get()) run
plain, under `cuxfer record` (observe) and under `cuxfer record --rewrite=pin`,
then plain and rewritten twice more, interleaved, for the timing.

  pycuda_trial.py --cuxfer BIN [--rounds 8] [--size-mib 256] [--context create|primary]
                  [--bar 0.90] [--summary FILE]

Checks:
  - every run's results are bit-identical to the plain run's (SHA-256), and the
    workload's own checks passed in every run;
  - exact bytes: each recorded report's bytes per direction EQUAL the workload's
    own count (PyCUDA moves nothing of its own), and in the observed run so do
    its bytes per direction and host memory kind (pageable / pinned);
  - the report is not simulated and CUPTI was active;
  - the rewrite ran (staged or registered bytes > 0);
  - with --bar F (issue 12): memcpy_htod of the reused pageable array under the
    rewrite reaches at least F x the bandwidth of memcpy_htod from
    pagelocked_empty in the same runs (median per-copy times, median over the
    rewritten runs). --bar 0 only prints the ratio.
Prints the rewrite's speedup per path (median per-copy time, plain vs rewritten).
Exit 0 pass, 1 fail, 77 skip (the workload's line says why: 'pycuda not
importable: ...' or 'no GPU: ...').
"""
import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from trial_runner import HERE, python_sites, report, run_workload, verdict

PATHS = ("htod_pageable", "dtoh_pageable", "htod_pinned", "dtoh_pinned", "to_gpu", "get")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--context", choices=["create", "primary"], default="create")
    ap.add_argument("--bar", type=float, default=0.0,
                    help="fail unless rewritten pageable memcpy_htod reaches this fraction of pinned")
    ap.add_argument("--summary")
    ap.add_argument("--keep", action="store_true", help="keep the traces even on success")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cuxfer-trial-pycuda-"))
    wl = [sys.executable, str(HERE / "pycuda_workload.py"), "--rounds", str(a.rounds),
          "--size-mib", str(a.size_mib), "--context", a.context]
    log, fails, runs = [], [], {}

    def record(label, extra):
        out = work / label
        p, t = run_workload([a.cuxfer, "record", "-q", *extra, "-o", str(out), "--", *wl], label, log)
        return p, t, report(a.cuxfer, out)

    _, runs["plain"] = run_workload(wl, "plain", log)
    if not runs["plain"]:
        fails.append("plain run printed no TRIAL line")
    _, runs["observe"], rep_obs = record("observe", [])
    _, runs["rewrite"], rep_pin = record("rewrite", ["--rewrite=pin"])
    timing = {"plain": [runs["plain"]], "rewrite": [runs["rewrite"]]}
    rewrite_reports = [rep_pin]
    for i in (2, 3):  # interleaved repeats, for the timing only
        _, t = run_workload(wl, f"plain{i}", log)
        timing["plain"].append(t)
        _, t, rep = record(f"rewrite{i}", ["--rewrite=pin"])
        timing["rewrite"].append(t)
        rewrite_reports.append(rep)

    for label, p in log:
        if p.returncode != 0:
            fails.append(f"{label}: exit status {p.returncode}: {(p.stdout + p.stderr).strip()[-400:]}")
    ref = runs.get("plain") or {}
    every = list(runs.items()) + [(f"timing {k}{i + 1}", t) for k, v in timing.items() for i, t in enumerate(v)]
    for label, t in every:
        if not t:
            fails.append(f"{label}: no TRIAL line")
        elif t["sha256"] != ref.get("sha256"):
            fails.append(f"{label}: results differ from the plain run ({t['sha256'][:16]} vs {ref.get('sha256', '')[:16]})")
        elif t.get("errors"):
            fails.append(f"{label}: workload checks failed: {t['errors'][:3]}")

    accounting, classes, sites = {}, {}, {}
    reports = {"observe": rep_obs, "rewrite": rep_pin, "rewrite2": rewrite_reports[1], "rewrite3": rewrite_reports[2]}
    for label, rep in reports.items():
        if "error" in rep:
            fails.append(f"{label}: cuxfer report failed: {rep['error']}")
            continue
        if rep.get("simulated") is not False:
            fails.append(f"{label}: report simulated={rep.get('simulated')!r} on a GPU")
        cls = {}
        for c in rep.get("classes", []):
            k = f"{c['direction']}/{c['memory']}"
            cls[k] = cls.get(k, 0) + c["bytes"]
        classes[label] = cls
        for d, key in (("H2D", "h2d_bytes"), ("D2H", "d2h_bytes")):
            want = ref.get(key, 0)
            have = sum(v for k, v in cls.items() if k.startswith(d + "/"))
            accounting[f"{label} {d}"] = {"workload": want, "report": have, "extra": have - want}
            if have != want:
                fails.append(f"{label} {d}: report {have} B, the workload moved {want} B (want exactly that)")
        if label == "observe":
            # Issue 13: PyCUDA's copies are made in py_memcpy_htod/_dtoh (C++,
            # the GIL held); the site must be the workload's own line.
            sites = python_sites(rep)
            if sites["share"] < 0.9:
                fails.append(f"observe: {sites['at_workload_lines']} of {sites['copies']} copies at the "
                             f"workload's Python lines ({sites['share']:.0%}); top sites {sites['top']}")
            for k, want in (ref.get("classes") or {}).items():
                if cls.get(k, 0) != want:
                    fails.append(f"observe {k}: report {cls.get(k, 0)} B, the workload moved {want} B")
            other = {k: v for k, v in cls.items() if k not in (ref.get("classes") or {}) and v}
            if other:
                fails.append(f"observe: classes the workload never made: {other}")
        cupti = [p.get("cupti", {}) for p in rep.get("processes", [])]
        if not all(c.get("state") == "active" for c in cupti if c):
            fails.append(f"{label}: CUPTI not active: {cupti}")
        if label.startswith("rewrite"):
            rw = rep.get("rewrite", {})
            if not rw.get("active"):
                fails.append(f"{label}: the report says the rewrite was off")
            elif not (rw.get("staged_bytes", 0) or rw.get("registered_bytes", 0)):
                fails.append(f"{label}: nothing staged or registered")

    def med(mode, key):
        v = [t["median_s"][key] for t in timing[mode] if t and key in t.get("median_s", {})]
        return statistics.median(v) if v else float("nan")

    big = ref.get("big_bytes", a.size_mib << 20)
    speed = {}
    for k in PATHS:
        p, r = med("plain", k), med("rewrite", k)
        speed[k] = {"plain_s": p, "rewrite_s": r, "speedup": (p / r) if r else float("nan")}
    for k in ("htod_pageable", "dtoh_pageable", "htod_pinned", "dtoh_pinned"):
        for mode in ("plain", "rewrite"):
            s = speed[k][f"{mode}_s"]
            speed[k][f"{mode}_gbps"] = big / s / 1e9 if s else float("nan")
    # Issue 12's bar, within the rewritten runs: pageable (rewritten) vs pinned, same process.
    fractions = []
    for t in timing["rewrite"]:
        if t and t["median_s"].get("htod_pageable"):
            fractions.append(t["median_s"]["htod_pinned"] / t["median_s"]["htod_pageable"])
    frac = statistics.median(fractions) if fractions else float("nan")
    d2h_frac = statistics.median([t["median_s"]["dtoh_pinned"] / t["median_s"]["dtoh_pageable"]
                                  for t in timing["rewrite"] if t and t["median_s"].get("dtoh_pageable")] or [float("nan")])
    bar = {"htod_rewrite_vs_pinned": frac, "per_run": fractions, "dtoh_rewrite_vs_pinned": d2h_frac,
           "want_at_least": a.bar, "met": bool(frac >= a.bar) if fractions else False}
    rw = rep_pin.get("rewrite", {})
    summary = {"framework": "pycuda", "pycuda": ref.get("pycuda"), "context": a.context,
               "sha256": ref.get("sha256"), "accounting": accounting, "classes": classes,
               "transfer_time": speed, "bar_issue12": bar, "python_sites": sites,
               "rewrite": {k: v for k, v in rw.items() if isinstance(v, (int, float))},
               "cupti": {k: [p.get("cupti") for p in r.get("processes", [])] for k, r in reports.items()}}
    print(json.dumps(summary, indent=1))
    print("PyCUDA, median per-copy time (plain -> rewrite):")
    for k in PATHS:
        v = speed[k]
        gb = (f"  ({v['plain_gbps']:.1f} -> {v['rewrite_gbps']:.1f} GB/s)" if "plain_gbps" in v else "")
        print(f"  {k:14s} {v['plain_s'] * 1e3:9.2f} -> {v['rewrite_s'] * 1e3:9.2f} ms  x{v['speedup']:.2f}{gb}")
    print(f"bar (issue 12): rewritten pageable memcpy_htod of {big >> 20} MiB = {frac:.3f} x pinned "
          f"(runs {', '.join(f'{f:.3f}' for f in fractions)}; D2H {d2h_frac:.3f}x)"
          + (f", want >= {a.bar:.2f}: {'MET' if bar['met'] else 'NOT MET'}" if a.bar else ""))
    if a.bar and not bar["met"]:
        fails.append(f"bar: rewritten memcpy_htod reached {frac:.3f} x pinned, want >= {a.bar:.2f}")
    return verdict(work, fails, log, summary, a.summary, a.keep)

if __name__ == "__main__":
    sys.exit(main())
