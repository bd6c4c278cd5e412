"""What the production-trial drivers (trial.py, pycuda_trial.py) share: run a
workload (plain or under `cuxfer record`) and read its TRIAL line, read a
report, and end with the verdict. A workload that skips (77) skips the trial,
visibly, with its reason."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

SKIP = 77
HERE = Path(__file__).resolve().parent


def run_workload(cmd, label, log):
    print("+", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=HERE)
    log.append((label, p))
    if p.returncode == SKIP:
        print(p.stdout.strip(), p.stderr.strip(), sep="\n")
        why = next((l for l in p.stdout.splitlines()
                    if "not importable" in l or l.startswith("no GPU") or l.startswith("SKIP")),
                   "the workload skipped")
        print(f"SKIP: {why}")
        sys.exit(SKIP)
    line = next((l for l in p.stdout.splitlines() if l.startswith("TRIAL ")), None)
    return p, (json.loads(line[6:]) if line else None)


def report(cuxfer, out):
    r = subprocess.run([cuxfer, "report", "--json", str(out)], capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 else {"error": r.stderr.strip()}


def by_direction(rep):
    d = {}
    for c in rep.get("classes", []):
        d[c["direction"]] = d.get(c["direction"], 0) + c["bytes"]
    return d


def python_sites(rep, top=5):
    """Issue 13: how many of the report's copies sit at a Python line of the
    workload's own files (this directory) rather than inside a framework."""
    sites = rep.get("callsites", [])
    total = sum(s["calls"] for s in sites)
    ours = sum(s["calls"] for s in sites
               if any(f.get("python") for f in s.get("stack", []))
               and os.path.realpath(s.get("file") or "/nonexistent").startswith(str(HERE) + "/"))
    share = ours / total if total else 0.0
    return {"copies": total, "at_workload_lines": ours, "share": round(share, 3),
            "top": [s.get("location") for s in sites[:top]]}


def verdict(work, fails, log, summary, summary_path=None, keep=False) -> int:
    """Writes the summary, prints PASS or the failures with each run's stderr; the exit status."""
    if summary_path:
        Path(summary_path).parent.mkdir(parents=True, exist_ok=True)
        Path(summary_path).write_text(json.dumps(summary, indent=1))
    if fails:
        print(f"FAIL ({work}):")
        for f in fails:
            print("  -", f)
        for label, p in log:
            print(f"--- {label} stderr (tail)\n{p.stderr[-1500:]}")
        return 1
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS")
    return 0
