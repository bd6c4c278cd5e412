#!/usr/bin/env python3
"""`cuxfer diff` end to end (stdlib only): records one app four times each
with --rewrite=off and --rewrite=pin, and checks `cuxfer diff --json` of one
run of each: same work at every call site, staged bytes only in the pinned
run, the runs said to be simulated when they were (as `cuxfer report` says),
and one run each said to be unable to tell the difference from noise. Then
several runs per side (a folder of run folders, and --base/--new): medians,
the range over every pair of runs and the verdict, as docs/cli.md defines them.

  run_diff.py --cuxfer build/bin/cuxfer --workdir DIR -- build/testapps/sim/pageable_loop-simshared 8 256K

Exit status: 0 pass, 1 fail, 77 skip (the app printed "no GPU" and exited 77).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SKIP = 77


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--workdir", help="output directory (recreated); default: a fresh temporary one")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- APP [ARGS...]")
    a = ap.parse_args()
    cmd = a.command[1:] if a.command and a.command[0] == "--" else a.command
    if not cmd:
        ap.error("no app given")
    out = Path(a.workdir) if a.workdir else Path(tempfile.mkdtemp(prefix="cuxfer-diff-"))
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    env = dict(os.environ)
    # Hermetic: a machine profile of the developer's own (cuxfer calibrate) would
    # change the rewrite's thresholds and the estimates; tests that want one set it.
    env.setdefault("CUXFER_PROFILE_DIR", "/nonexistent/cuxfer-test-profiles")
    env.pop("CUXFER_REWRITE", None)
    runs = 4
    for i in range(1, runs + 1):
        for mode in ("off", "pin"):
            run = [a.cuxfer, "record", "-q", "-o", str(out / mode / str(i)), f"--rewrite={mode}", "--", *cmd]
            print("+ " + " ".join(run), flush=True)
            p = subprocess.run(run, env=env, capture_output=True, text=True, timeout=240)
            sys.stdout.write(p.stdout + p.stderr)
            if p.returncode == SKIP:
                return SKIP
            if p.returncode != 0:
                print(f"FAIL: record --rewrite={mode} exited {p.returncode}")
                return 1

    def diff(*args: str) -> subprocess.CompletedProcess:
        run = [a.cuxfer, "diff", *args]
        print("+ " + " ".join(run), flush=True)
        return subprocess.run(run, capture_output=True, text=True, timeout=120)

    base1, pin1 = str(out / "off" / "1"), str(out / "pin" / "1")
    p = diff("--json", base1, pin1)
    if p.returncode != 0:
        print(f"FAIL: cuxfer diff exited {p.returncode}: {p.stderr.strip()}")
        return 1
    d = json.loads(p.stdout)
    text = diff(base1, pin1)
    sys.stdout.write(text.stdout)
    one_line = " ".join(text.stdout.split())  # unwrapped
    failures = []
    if d.get("schema") != "cuxfer.diff/1":
        failures.append(f"schema {d.get('schema')!r}")
    if d.get("same_work") is not True:
        failures.append(f"same_work is {d.get('same_work')!r}: {d.get('differing_sites')}")
    if d["base"]["totals"]["staged_bytes"] != 0:
        failures.append(f"base staged {d['base']['totals']['staged_bytes']} bytes")
    if not d["new"]["totals"]["staged_bytes"] > 0:
        failures.append("new run staged no bytes")
    if d["base"]["totals"]["copy_bytes"] != d["new"]["totals"]["copy_bytes"]:
        failures.append("copy bytes differ")
    if d["only_in_base"] or d["only_in_new"]:
        failures.append(f"unmatched sites: {d['only_in_base']} / {d['only_in_new']}")
    if d["time_recovered_ns"] != d["base"]["totals"]["cpu_blocked_ns"] - d["new"]["totals"]["cpu_blocked_ns"]:
        failures.append("time_recovered_ns is not base - new CPU-blocked time")

    # Simulated runs are said, as the report says them.
    r = subprocess.run([a.cuxfer, "report", "--json", base1], capture_output=True, text=True, timeout=120)
    simulated = bool(json.loads(r.stdout).get("simulated")) if r.returncode == 0 else None
    if simulated is None:
        failures.append(f"report of {base1} exited {r.returncode}")
    elif d.get("simulated") is not simulated or d["base"].get("simulated") is not simulated:
        failures.append(f"diff says simulated {d.get('simulated')!r}, the report {simulated!r}")
    elif simulated and "!! SIMULATED CUDA" not in text.stdout.split("Same work")[0]:
        failures.append("the text does not say first that the runs were simulated")
    # One run each: measured, but not separable from noise.
    if d.get("time_recovered_noise", {}).get("verdict") != "one_run_each":
        failures.append(f"one run each: verdict {d.get('time_recovered_noise')!r}")
    if "cannot be told apart from run-to-run noise" not in one_line:
        failures.append("one run each: the text does not say that it cannot be told from noise")

    # Several runs per side: a folder of run folders each.
    def median(v: list[int]) -> int:
        v = sorted(v)
        m = len(v) // 2
        return v[m] if len(v) % 2 else (v[m - 1] + v[m]) // 2

    p = diff("--json", str(out / "off"), str(out / "pin"))
    if p.returncode != 0:
        failures.append(f"diff of {runs} runs each exited {p.returncode}: {p.stderr.strip()}")
    else:
        m = json.loads(p.stdout)
        base_ns = [s["cpu_blocked_ns"] for s in m["base"]["samples"]]
        new_ns = [s["cpu_blocked_ns"] for s in m["new"]["samples"]]
        pairs = [b - n for b in base_ns for n in new_ns]
        noise = m["time_recovered_noise"]
        if m["base"]["runs"] != runs or m["new"]["runs"] != runs or len(base_ns) != runs or len(new_ns) != runs:
            failures.append(f"runs: base {m['base']['runs']}, new {m['new']['runs']}, expected {runs} each")
        elif m["time_recovered_ns"] != median(base_ns) - median(new_ns):
            failures.append(f"time recovered {m['time_recovered_ns']} is not the medians' difference "
                            f"({median(base_ns)} - {median(new_ns)})")
        elif (noise["pairs_min_ns"], noise["pairs_max_ns"]) != (min(pairs), max(pairs)):
            failures.append(f"pairs range {noise['pairs_min_ns']}..{noise['pairs_max_ns']}, expected "
                            f"{min(pairs)}..{max(pairs)}")
        else:
            separated = min(pairs) > 0 or max(pairs) < 0
            want = "beyond_noise" if separated else "within_noise"  # 2 / C(8, 4) = 2.9 %
            if noise["verdict"] != want or abs(noise["chance"] - 2 / 70) > 1e-12:
                failures.append(f"{runs} runs each: verdict {noise['verdict']!r} chance {noise['chance']}, "
                                f"expected {want!r} 2/70")
        if m.get("same_work") is not True:
            failures.append(f"{runs} runs each: same_work {m.get('same_work')!r}")
        t = diff(str(out / "off"), str(out / "pin"))
        t_line = " ".join(t.stdout.split())
        if f"median of the {runs} base runs minus median of the {runs} new runs" not in t_line or \
                f"The {runs * runs} pairs of a base and a new run differ by" not in t_line:
            failures.append("several runs: the text does not give the medians' difference and the pairs' range")
    # The same runs named one by one.
    p = diff("--json", "--base", str(out / "off" / "1"), "--base", str(out / "off" / "2"),
             "--new", str(out / "pin" / "1"), "--new", str(out / "pin" / "2"))
    if p.returncode != 0:
        failures.append(f"diff --base --new exited {p.returncode}: {p.stderr.strip()}")
    elif json.loads(p.stdout)["time_recovered_noise"]["verdict"] not in ("not_conclusive", "within_noise"):
        failures.append("2 runs each judged beyond noise (2 / C(4, 2) = 33 %)")
    p = diff("--base", base1, pin1)
    if p.returncode != 2 or len(p.stderr.splitlines()) != 1:
        failures.append(f"--base with BASE NEW: exit {p.returncode}, {p.stderr!r}")
    for f in failures:
        print("FAIL: " + f)
    if not failures:
        print("PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
