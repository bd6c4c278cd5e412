#!/usr/bin/env python3
"""GPU tier: a PyTorch script's torch.cuda.nvtx ranges, per-range bytes checked
against the script's own counts (tests/gpu/frameworks/torch_nvtx.py).

  check_torch_nvtx.py --cuxfer CUXFER --workdir DIR -- python3 torch_nvtx.py

For every range the script names: the report's range (JSON `ranges`, by path)
has exactly the script's bytes in each direction it lists (classes summed per
direction). Exit 0 pass, 1 fail, 77 skip (no torch or no GPU).
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from e2e_util import command_after_dashes, fresh_dir, verdict  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    out = fresh_dir(a.workdir)
    run = subprocess.run([a.cuxfer, "record", "-o", str(out), "--", *command_after_dashes(a.command)],
                         capture_output=True, text=True, timeout=600)
    print(run.stdout, run.stderr, sep="\n")
    if run.returncode == 77:
        return 77
    if run.returncode != 0:
        return verdict([f"the script failed under cuxfer record (exit {run.returncode})"])
    want = json.loads(run.stdout.strip().splitlines()[-1])
    rep = json.loads(subprocess.run([a.cuxfer, "report", "--json", str(out)], capture_output=True, text=True,
                                    check=True).stdout)
    ranges = {g["path"]: g for g in rep.get("ranges", [])}
    print("ranges:", json.dumps(rep.get("ranges", []), indent=1))
    fails = []
    for path, dirs in want.items():
        g = ranges.get(path)
        if not g:
            fails.append(f"no range {path!r} in the report (ranges: {sorted(ranges)})")
            continue
        for direction, nbytes in dirs.items():
            got = sum(c["bytes"] for c in g["classes"] if c["class"].split()[0] == direction)
            if got != nbytes:
                fails.append(f"{path}: {got} bytes {direction}, the script moved {nbytes}")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
