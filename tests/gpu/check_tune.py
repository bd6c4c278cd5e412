#!/usr/bin/env python3
"""GPU tier: `cuxfer tune` chooses the right path for each site of an app made
for it, and the chosen policy's speedup reproduces in independent runs.

  check_tune.py --cuxfer CUXFER --source APP.cu [--keep PATH=REGEX ...] [--reject PATH=REGEX ...]
                [--reps N] [--max-runs M] [--runs K] -- APP [ARGS...]

--keep PATH=REGEX: the written policy has an entry with path PATH whose site is
the source line matching REGEX in --source; --reject: no such entry (tune must
have measured it and turned it down: the report names it as "reject").
Then K interleaved pairs of runs (observe, then with the policy) of the app
itself: the median of its printed median_step_us must be lower with the
policy, and every run's checksum= line identical.
Exit 0 pass, 1 fail, 77 skip (no GPU).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def source_line(path: str, pattern: str) -> int:
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if re.search(pattern, line):
            return i
    raise SystemExit(f"FAIL: {pattern!r} not in {path}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--keep", action="append", default=[])
    ap.add_argument("--reject", action="append", default=[])
    ap.add_argument("--reps", default="3")
    ap.add_argument("--max-runs", default="16")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command and a.command[0] == "--" else a.command
    env = {**os.environ, "CUXFER_PROFILE_DIR": "/nonexistent/cuxfer-test-profiles"}
    for k in ("CUXFER_REWRITE", "CUXFER_POLICY"):
        env.pop(k, None)
    bad: list[str] = []
    probe = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if probe.returncode == 77 or "no GPU" in probe.stdout:
        print(probe.stdout.strip())
        print("SKIP: no GPU")
        return 77
    with tempfile.TemporaryDirectory() as d:
        policy, report = Path(d) / "policy.json", Path(d) / "tune.txt"
        r = subprocess.run([a.cuxfer, "tune", "--reps", a.reps, "--max-runs", a.max_runs, "-o", str(policy),
                            "--report", str(report), "--", *cmd], env=env, capture_output=True, text=True, timeout=900)
        sys.stdout.write(r.stdout + r.stderr[-4000:])
        if "no GPU" in r.stdout + r.stderr:
            print("SKIP: no GPU")
            return 77
        if r.returncode != 0:
            print(f"FAIL: cuxfer tune exited {r.returncode}")
            return 1
        entries = json.loads(policy.read_text())["entries"]
        text = report.read_text()

        def has(spec: str) -> bool:
            path, _, pattern = spec.partition("=")
            line = source_line(a.source, pattern)
            return any(e["path"] == path and e["site"].get("source", "").endswith(f":{line}") for e in entries)

        for spec in a.keep:
            if not has(spec):
                bad.append(f"not kept: {spec}")
        for spec in a.reject:
            path, _, pattern = spec.partition("=")
            line = source_line(a.source, pattern)
            if has(spec):
                bad.append(f"kept but should be rejected: {spec}")
            elif not re.search(rf"reject\s+{path}\s.*:{line}\)", text):
                bad.append(f"never measured (no 'reject' line for it in the report): {spec}")

        def step(policy_file: Path | None, i: int) -> tuple[float, str]:
            extra = ["--policy", str(policy_file)] if policy_file else []
            p = subprocess.run([a.cuxfer, "record", "-q", "-o", f"{d}/run{i}{'p' if policy_file else 'o'}", *extra,
                                "--", *cmd], env=env, capture_output=True, text=True, timeout=600)
            m = re.search(r"median_step_us=([0-9.]+)", p.stdout)
            c = re.search(r"checksum=([0-9a-f]+)", p.stdout)
            if p.returncode != 0 or not m:
                bad.append(f"independent run exited {p.returncode}: {p.stdout[-300:]} {p.stderr[-300:]}")
                return float("nan"), ""
            return float(m.group(1)), c.group(1) if c else ""

        if entries:
            observe, tuned, sums = [], [], set()
            for i in range(a.runs):
                t, c = step(None, i)
                observe.append(t)
                sums.add(c)
                t, c = step(policy, i)
                tuned.append(t)
                sums.add(c)
            mo, mt = statistics.median(observe), statistics.median(tuned)
            print(f"independent runs: median step {mo:.2f} us observed, {mt:.2f} us with the policy "
                  f"({mt / mo:.3f}x); steps {observe} vs {tuned}")
            if not mt < mo:
                bad.append(f"the policy's speedup did not reproduce: {mt:.2f} us vs {mo:.2f} us")
            if len(sums) != 1:
                bad.append(f"checksums differ: {sums}")
        if bad:  # the whole report, each run's site times in it: what a failure is diagnosed from
            print("---- tune report ----\n" + text + "---- end of tune report ----")
    if bad:
        print("FAIL: " + "; ".join(bad))
        return 1
    print("check_tune: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
