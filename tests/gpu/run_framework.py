#!/usr/bin/env python3
"""GPU tier: run a framework snippet under `cuxfer record` and check that its
transfers appear in the report with at least the bytes it moved.

  run_framework.py --cuxfer BIN --min H2D=67108864 --min D2H=67108864 -- python3 frameworks/torch_transfer.py

Exit 0 pass, 1 fail, 77 skip (framework missing or no GPU: the snippet says which).
Frameworks move extra bytes of their own (module loading, small scalars), so
the check is "at least", per direction; the report must also say not simulated.
"""
import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SKIP = 77


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--min", action="append", default=[], help="DIRECTION=BYTES, e.g. H2D=67108864")
    ap.add_argument("--min-memory", action="append", default=[], help="DIRECTION/MEMORY=BYTES, e.g. H2D/pinned=1")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command and a.command[0] == "--" else a.command
    out = Path(tempfile.mkdtemp(prefix="cuxfer-fw-"))
    run = [a.cuxfer, "record", "-o", str(out), "--", *cmd]
    print("+", " ".join(run), flush=True)
    rc = subprocess.run(run, timeout=600).returncode
    if rc == SKIP:
        return SKIP
    fails = []
    if rc != 0:
        fails.append(f"exit status {rc}")
    traces = sorted(out.glob("*.trace"))
    if not traces:
        fails.append("no trace written")
    else:
        r = subprocess.run([a.cuxfer, "report", "--json", *map(str, traces)], capture_output=True, text=True)
        if r.returncode != 0:
            fails.append(f"cuxfer report failed: {r.stderr.strip()}")
        else:
            rep = json.loads(r.stdout)
            if rep.get("simulated") is not False:
                fails.append(f"simulated is {rep.get('simulated')!r} on a real GPU")
            by_dir, by_class = {}, {}
            for c in rep.get("classes", []):
                by_dir[c["direction"]] = by_dir.get(c["direction"], 0) + c["bytes"]
                key = f"{c['direction']}/{c['memory']}"
                by_class[key] = by_class.get(key, 0) + c["bytes"]
            print("report classes:", json.dumps(by_class))
            for spec in a.min:
                d, n = spec.split("=")
                if by_dir.get(d, 0) < int(n):
                    fails.append(f"{d}: {by_dir.get(d, 0)} bytes, want at least {n}")
            for spec in a.min_memory:
                k, n = spec.split("=")
                if by_class.get(k, 0) < int(n):
                    fails.append(f"{k}: {by_class.get(k, 0)} bytes, want at least {n}")
    if fails:
        print(f"FAIL ({out}):")
        for f in fails:
            print("  -", f)
        return 1
    shutil.rmtree(out, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
