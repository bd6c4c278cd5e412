#!/usr/bin/env python3
"""PyCUDA's own test suite, plain and under `cuxfer record --rewrite=pin`.

  pycuda_suite.py --cuxfer BIN --tests DIR [--files test_driver.py,...]
                  [--timeout S] [--work DIR] [--summary FILE] [--modes plain,rewrite]
                  [-- PYTEST_ARGS...]

DIR is the `test/` folder of PyCUDA's sdist (PyCUDA installs without it). Per
file: pytest runs it plain, then under the rewrite, each with a JUnit XML; the
verdict compares the outcome of every test id (passed / failed / error /
skipped) between the two runs. PyCUDA makes a context per test
(`mark_cuda_test`), so the suite is also the check that the rewrite serves
every context an app makes, not only the first.

Prints per file the outcome counts of both runs, the tests whose outcome
differs, and from the rewritten run's report: the pageable bytes the rewrite
served (staged, registered, zero copy) over all pageable host<->device bytes,
and the passed-through ones by reason.

The plain run goes first: it fills PyCUDA's kernel cache, so the rewritten run
is not slowed by nvcc (the timing is not this script's business).

--modes with one mode runs only that one and keeps every test's outcome in
the summary, for a comparison with another run's (when device time allows
only one); nothing is compared then.

Exit 0 when every file ran in both modes within the timeout and every test's
outcome is the same (one mode: when every file ran); 1 otherwise; 77 when
PyCUDA or a GPU is missing (said).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

DEFAULT_FILES = "test_driver.py,test_gpuarray.py,test_cumath.py"


def outcomes(xml_path: Path) -> dict:
    """test id -> outcome, from a pytest JUnit XML."""
    res = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        tid = f"{case.get('classname', '')}::{case.get('name', '')}"
        kind = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                kind = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                break
        res[tid] = kind
    return res


def counts(res: dict) -> str:
    c = {}
    for v in res.values():
        c[v] = c.get(v, 0) + 1
    return ", ".join(f"{k} {c[k]}" for k in ("passed", "failed", "error", "skipped") if k in c) or "none"


def run(cmd, cwd, timeout, log: Path, env) -> tuple:
    t0 = time.monotonic()
    with open(log, "w") as f:
        try:
            rc = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout, env=env).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    return rc, time.monotonic() - t0


def served_share(cuxfer: str, trace: Path) -> dict:
    p = subprocess.run([cuxfer, "report", "--json", "--no-symbols", str(trace)], capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout).strip().splitlines()[-1:] or ["report failed"]}
    d = json.loads(p.stdout)
    tot = {"staged_bytes": 0, "registered_bytes": 0, "zero_copy_bytes": 0, "passthrough_pageable_bytes": 0}
    reasons = {}
    rw = d.get("rewrite", {})  # the whole trace's, every process's
    for k in tot:
        tot[k] = int(rw.get(k, 0) or 0)
    for r in rw.get("passthrough_reasons", []):
        key = r.get("text") or r.get("reason")
        reasons[key] = reasons.get(key, 0) + int(r.get("bytes", 0))
    served = tot["staged_bytes"] + tot["registered_bytes"] + tot["zero_copy_bytes"]
    allb = served + tot["passthrough_pageable_bytes"]
    return {**tot, "served_share": served / allb if allb else None, "passthrough_by_reason": reasons}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--tests", required=True, help="PyCUDA's test/ folder")
    ap.add_argument("--files", default=DEFAULT_FILES)
    ap.add_argument("--timeout", type=float, default=300, help="seconds per file and mode")
    ap.add_argument("--work")
    ap.add_argument("--summary")
    ap.add_argument("--modes", default="plain,rewrite",
                    help="plain,rewrite (compared test by test) or one of them (outcomes only)")
    ap.add_argument("pytest_args", nargs="*")
    a = ap.parse_args()
    # Plain first when both run: it fills PyCUDA's kernel cache for the rewrite's run.
    asked = {m for m in a.modes.split(",") if m}
    if not asked or not asked <= {"plain", "rewrite"}:
        ap.error(f"--modes: plain, rewrite or both, not {a.modes!r}")
    modes = [m for m in ("plain", "rewrite") if m in asked]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    probe = subprocess.run([sys.executable, "-c", "import pycuda.driver as d; d.init(); print(d.Device.count())"],
                           capture_output=True, text=True, env=env)
    if probe.returncode != 0 or not probe.stdout.strip().isdigit() or int(probe.stdout) < 1:
        why = (probe.stderr.strip().splitlines() or ["no device"])[-1]
        print(f"pycuda_suite: SKIP: PyCUDA or a GPU is missing ({why})")
        return 77
    tests = Path(a.tests).resolve()
    work = Path(a.work or tempfile.mkdtemp(prefix="cuxfer-pycuda-suite-"))
    work.mkdir(parents=True, exist_ok=True)
    ok, summary = True, {}
    for name in a.files.split(","):
        f = tests / name
        if not f.is_file():
            print(f"{name}: not found in {tests}")
            ok = False
            continue
        stem = f.stem
        base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(f), *a.pytest_args]
        entry = {}
        res = {}
        for mode in modes:
            xml = work / f"{stem}.{mode}.xml"
            cmd = base + [f"--junitxml={xml}"]
            if mode == "rewrite":
                cmd = [a.cuxfer, "record", "-q", "--rewrite=pin", "-o", str(work / f"{stem}.trace"), "--", *cmd]
            rc, secs = run(cmd, tests, a.timeout, work / f"{stem}.{mode}.log", env)
            res[mode] = outcomes(xml) if xml.is_file() else {}
            entry[mode] = {"rc": rc, "seconds": round(secs, 1), "counts": counts(res[mode])}
            print(f"{name} {mode}: rc={rc} {secs:.0f} s: {counts(res[mode])}")
            if rc == "timeout" or not res[mode]:
                ok = False
        for mode in modes:  # every outcome, for a comparison with another run's
            entry[mode]["outcomes"] = res[mode]
        if len(modes) < 2:  # nothing to compare: the outcomes are kept for a comparison with another run
            summary[name] = entry
            if "rewrite" not in modes:
                continue
        differ = [] if len(modes) < 2 else sorted(t for t in set(res["plain"]) | set(res["rewrite"])
                                                  if res["plain"].get(t) != res["rewrite"].get(t))
        entry["differ"] = [(t, res["plain"].get(t), res["rewrite"].get(t)) for t in differ]
        for t, p, r in entry["differ"][:20]:
            print(f"  differs: {t}: plain {p}, rewrite {r}")
        if differ:
            ok = False
        share = served_share(a.cuxfer, work / f"{stem}.trace")
        entry["rewrite_report"] = share
        if share.get("served_share") is not None:
            print(f"  rewrite served {share['served_share']:.1%} of pageable host<->device bytes "
                  f"(staged {share['staged_bytes']}, registered {share['registered_bytes']}, "
                  f"zero copy {share['zero_copy_bytes']}, passed through {share['passthrough_pageable_bytes']})")
            for why, b in sorted(share["passthrough_by_reason"].items(), key=lambda kv: -kv[1])[:6]:
                print(f"    passed through: {b} B: {why}")
        else:
            print(f"  rewrite report: {share}")
        summary[name] = entry
    if a.summary:
        Path(a.summary).write_text(json.dumps(summary, indent=1))
    if len(modes) < 2:
        print(f"{modes[0]} only: outcomes kept in the summary, nothing compared" + ("" if ok else "; FAIL"))
    else:
        print("PASS: every test's outcome is the same under the rewrite" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
