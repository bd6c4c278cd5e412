#!/usr/bin/env python3
"""`cuxfer tune` end to end on the simulated CUDA (stdlib only). Timing on
simcuda means nothing, so this checks structure and bounds, never which
candidates win:

  run_tune.py --cuxfer build/bin/cuxfer --sim build/testapps/sim --mode simshared --workdir DIR

  - pageable_loop 8 2M (two `register` candidates), --reps 2 --max-runs 6:
    exit 0; one progress line per run, numbered 1..k with k <= 6 and at
    least the 5 runs the bound requires; the policy file is valid (cuxfer
    record --policy reads it with the policy library) and its entries are
    among the candidates `cuxfer policy` derives; the report has the
    candidates' verdicts and the per-call-site diff; --keep-traces keeps
    every run's traces;
  - a larger bound is never exceeded either (--reps 2 --max-runs 9);
  - tiny_storm: the observe run records device pointers, so a zero_copy
    candidate is measured (and named in the report);
  - existing files are replaced (run twice, tune does not fail on its own
    output), a bound below 1 + 2 * reps is a usage error, and a failing run
    stops tune with one line and writes nothing (the earlier files stay).

Exit status: 0 pass, 1 fail, 77 skip (the app printed "no GPU" and exited 77).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

SKIP = 77
failures: list[str] = []
PROGRESS = re.compile(r"^cuxfer tune: run (\d+) of at most (\d+): (.*): (\d+\.\d{3}) s$")


def check(ok: bool, what: str) -> None:
    if not ok:
        failures.append(what)
        print("FAIL: " + what, flush=True)


def run(cmd: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    print("+ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=280)
    sys.stdout.write(p.stdout + p.stderr)
    return p


def progress(stderr: str) -> list[int]:
    runs = []
    for line in stderr.splitlines():
        m = PROGRESS.match(line)
        if m:
            runs.append(int(m.group(1)))
    return runs


def check_tune(a, env, out: Path, name: str, app: list[str], reps: int, max_runs: int) -> dict | None:
    work = out / name
    work.mkdir()
    p = run([a.cuxfer, "tune", "--reps", str(reps), "--max-runs", str(max_runs), "-o", "policy.json",
             "--report", "report.txt", "--keep-traces", "traces", "--"] + app, env, work)
    if p.returncode == SKIP or "no GPU" in p.stderr:
        raise SystemExit(SKIP)
    check(p.returncode == 0, f"{name}: tune exited {p.returncode}")
    runs = progress(p.stderr)
    check(runs == list(range(1, len(runs) + 1)), f"{name}: progress lines not numbered 1..k: {runs}")
    check(1 + 2 * reps <= len(runs) <= max_runs, f"{name}: {len(runs)} runs, bound {max_runs}")
    check(all(int(m.group(2)) == max_runs for m in map(PROGRESS.match, p.stderr.splitlines()) if m),
          f"{name}: progress does not name the bound")
    kept_runs = sorted(d.name for d in (work / "traces").iterdir() if d.is_dir() and d.name.startswith("run-"))
    check(len(kept_runs) == len(runs), f"{name}: {len(kept_runs)} run directories kept for {len(runs)} runs")
    policy = work / "policy.json"
    report = work / "report.txt"
    check(policy.is_file() and report.is_file(), f"{name}: policy or report missing")
    if failures:
        return None
    doc = json.loads(policy.read_text())
    check(doc["schema"] == "cuxfer.policy/1", f"{name}: schema {doc['schema']!r}")
    check(doc.get("generator", "").endswith(" tune"), f"{name}: generator {doc.get('generator')!r}")
    # The policy library's own reader: cuxfer record --policy refuses an invalid file with exit 2.
    p2 = run([a.cuxfer, "record", "-q", "-o", str(work / "check"), "--policy", str(policy), "--",
              app[0], "1", "64"], env, work)
    check(p2.returncode == 0, f"{name}: cuxfer record --policy on the written policy exited {p2.returncode}")
    text = report.read_text()
    check(text.startswith("cuxfer tune report\n"), f"{name}: report header")
    check(f"runs: {len(runs)} of at most {max_runs}" in text, f"{name}: report does not count the runs")
    check("Measured per call site: run " in text and "cuxfer diff" in text, f"{name}: report has no diff")
    check(re.search(r"^  1\. (KEEP|reject) ", text, re.M) is not None, f"{name}: no candidate verdicts")
    check("bytes at its call sites: on the pageable path " in text, f"{name}: no bytes per candidate")
    # Each run's site time, the samples the verdict's noise is of: as many baseline values as
    # --reps, and at least --reps with the candidate.
    each = re.findall(r"^     call sites, each run: (.*) -> (.*)$", text, re.M)
    check(bool(each) and all(len(b.split(", ")) == reps and len(n.split(", ")) >= reps for b, n in each),
          f"{name}: no or short per-run site times: {each}")
    check("SIMULATED CUDA" in text, f"{name}: no simulated note")
    # The kept entries are candidates: cuxfer policy on the observe run derives a superset
    # (--speculative: tune measures the speculative candidates that policy holds back).
    p3 = run([a.cuxfer, "policy", "-q", "--speculative", "-o", str(work / "candidates.json"),
              str(work / "traces" / "run-01")], env, work)
    check(p3.returncode == 0, f"{name}: cuxfer policy on the observe run exited {p3.returncode}")
    cands = json.loads((work / "candidates.json").read_text())["entries"]
    key = lambda e: (e["site"]["kind"], e["site"]["build_id"], e["site"]["offset"], e["path"])
    check({key(e) for e in doc["entries"]} <= {key(e) for e in cands}, f"{name}: kept entries not among candidates")
    nverdicts = len(re.findall(r"^  \d+\. (?:KEEP|reject) ", text, re.M))
    check(nverdicts == len(cands), f"{name}: {nverdicts} verdicts for {len(cands)} candidates")
    return {"runs": len(runs), "doc": doc, "report": text, "candidates": cands}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--sim", required=True, help="directory of the simulated test apps")
    ap.add_argument("--mode", default="simshared")
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    a.cuxfer = os.path.abspath(a.cuxfer)
    out = Path(a.workdir).absolute()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    env = dict(os.environ)
    env["CUXFER_PROFILE_DIR"] = "/nonexistent/cuxfer-test-profiles"  # hermetic estimates
    # Pageable copies 25x slower than the nominal pinned reference (simcuda's model,
    # docs/simcuda.md): the rewrite-candidate findings that the candidates come from then
    # hold whatever the load, instead of depending on how fast memmove ran in cache.
    env["SIMCUDA_PAGEABLE_US_PER_MIB"] = "500"
    for k in ("CUXFER_REWRITE", "CUXFER_POLICY", "CUXFER_FINGERPRINT", "CUXFER_FINGERPRINT_MIN"):
        env.pop(k, None)
    sim = Path(a.sim).absolute()
    loop = str(sim / f"pageable_loop-{a.mode}")
    tiny = str(sim / f"tiny_storm-{a.mode}")
    exit_app = str(sim / f"exit_app-{a.mode}")

    try:
        r = check_tune(a, env, out, "loop", [loop, "8", "2M"], reps=2, max_runs=6)
        if r:
            # register for each copy site, and zero_copy for the buffer uploaded whole each iteration
            paths = sorted(e["path"] for e in r["candidates"])
            check(paths == ["register", "register", "zero_copy"], f"loop: candidates {paths}")
        check_tune(a, env, out, "loop_bound9", [loop, "8", "2M"], reps=2, max_runs=9)
        t = check_tune(a, env, out, "tiny", [tiny, "2000", "64"], reps=2, max_runs=8)
        if t:
            check(any(e["path"] == "zero_copy" for e in t["candidates"]), "tiny: no zero_copy candidate measured")
            check(" zero_copy " in t["report"], "tiny: the report does not name the zero_copy candidate")
    except SystemExit as e:
        if e.code == SKIP:
            return SKIP
        raise

    # Existing files are replaced, as every command's output is (docs/cli.md,
    # "Files the commands write"): tune run twice does not fail on its own output.
    work = out / "replace"
    work.mkdir()
    (work / "policy.json").write_text("old\n")
    (work / "r.txt").write_text("old\n")
    p = run([a.cuxfer, "tune", "-q", "--reps", "2", "--max-runs", "5", "-o", "policy.json", "--report", "r.txt",
             "--", loop, "2", "64K"], env, work)
    check(p.returncode == 0, f"existing policy: exit {p.returncode}, {p.stderr!r}")
    policy_written = (work / "policy.json").read_text()
    check('"cuxfer.policy/1"' in policy_written and (work / "r.txt").read_text() != "old\n",
          "existing policy and report were not replaced")
    (work / "r.txt").unlink()
    # The bound must hold the required runs.
    p = run([a.cuxfer, "tune", "--reps", "3", "--max-runs", "6", "--", loop, "2", "64K"], env, work)
    check(p.returncode == 2 and p.stderr.count("\n") == 1 and "--max-runs 6" in p.stderr,
          f"bound below 1 + 2 * reps: exit {p.returncode}, {p.stderr!r}")
    # A failing run: one line, exit 1, the old policy untouched, no report.
    p = run([a.cuxfer, "tune", "--reps", "2", "--max-runs", "5", "--force", "-o", "policy.json", "--report", "r.txt",
             "--", exit_app, "exit", "3"], dict(env, TMPDIR=str(work)), work)
    check(p.returncode == 1, f"failing app: exit {p.returncode}")
    errors = [l for l in p.stderr.splitlines() if not PROGRESS.match(l)]
    check(len(errors) == 1 and "exited with status 3" in errors[0], f"failing app: stderr {p.stderr!r}")
    check((work / "policy.json").read_text() == policy_written, "failing app: the policy was touched")
    check(not (work / "r.txt").exists(), "failing app: a report was written")
    kept = list(work.glob("cuxfer-tune-*/run-01.log"))
    check(len(kept) == 1 and str(kept[0]) in errors[0] if errors else False,
          "failing app: the run's output is not kept where the error line says")

    if not failures:
        print("PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
