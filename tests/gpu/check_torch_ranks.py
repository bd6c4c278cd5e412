#!/usr/bin/env python3
"""GPU tier: `cuxfer record -- torchrun --nproc-per-node 2 torch_ranks.py`:
one trace per rank, named by rank, and the report's per-rank H2D and D2H bytes
exactly what each rank printed; the spread names rank 1 as the one that moved
most. Exit 0 pass, 1 fail, 77 skip (no torch or no GPU).
"""
import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from e2e_util import fresh_dir, verdict  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--script", required=True)
    a = ap.parse_args()
    # torchrun is `python -m torch.distributed.run`; this interpreter is the one with torch.
    if subprocess.run([sys.executable, "-c", "import torch.distributed.run"], capture_output=True).returncode != 0:
        print("torch (torch.distributed.run) not importable here: no GPU test")
        return 77
    out = fresh_dir(a.workdir)
    run = subprocess.run([a.cuxfer, "record", "-o", str(out), "--", sys.executable, "-m", "torch.distributed.run",
                          "--standalone", "--nproc-per-node", "2", a.script], capture_output=True, text=True,
                         timeout=600)
    print(run.stdout, run.stderr, sep="\n")
    if run.returncode == 77 or "no GPU" in run.stdout:
        return 77
    if run.returncode != 0:
        return verdict([f"torchrun failed under cuxfer record (exit {run.returncode})"])
    want = {d["rank"]: d for d in (json.loads(m) for m in re.findall(r"torch_ranks (\{.*\})", run.stdout))}
    fails = []
    names = sorted(p.name for p in out.glob("*.trace"))
    for r in (0, 1):
        if not any(f"-rank{r}-" in n for n in names):
            fails.append(f"no trace named for rank {r}: {names}")
    rep = json.loads(subprocess.run([a.cuxfer, "report", "--json", str(out)], capture_output=True, text=True,
                                    check=True).stdout)
    ranks = {k["rank"]: k for k in (rep.get("ranks") or {}).get("ranks", [])}
    print("ranks:", json.dumps(rep.get("ranks"), indent=1))
    if sorted(ranks) != [0, 1] or sorted(want) != [0, 1]:
        return verdict(fails + [f"ranks in the report {sorted(ranks)}, printed by the job {sorted(want)}"])
    for r in (0, 1):
        for direction in ("H2D", "D2H"):
            got = sum(c["bytes"] for c in ranks[r]["classes"] if c["class"].split()[0] == direction)
            if got != want[r][direction]:
                fails.append(f"rank {r}: {got} bytes {direction}, it moved {want[r][direction]}")
    if rep["ranks"]["spread"]["most_bytes"]["rank"] != 1:
        fails.append(f"most bytes at rank {rep['ranks']['spread']['most_bytes']}, want rank 1")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
