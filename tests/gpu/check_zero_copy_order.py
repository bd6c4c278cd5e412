#!/usr/bin/env python3
"""A zero-copy policy on a real GPU keeps stream order (stdlib only).

  check_zero_copy_order.py --cuxfer build/bin/cuxfer --workdir DIR -- APP [ARGS...]

  1. APP alone: its checksum;
  2. APP recorded with its tiny copies' device pointers (CUXFER_FINGERPRINT_MIN=64);
  3. `cuxfer policy` of that recording: a zero_copy entry for each allocation
     site the tiny copies use (at least --min-entries);
  4. APP under `cuxfer record --policy`: the report must count the named
     allocations as zero-copy and at least --min-copies copies into or out of
     them, APP must pass its own checks (it exits 1 at the first value read out
     of stream order) and print the same checksum.

Exit status: 0 pass, 1 fail, 77 skip (no GPU).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

SKIP = 77
CHECKSUM = re.compile(r"checksum=([0-9a-fA-F]+)")


def run(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    print("+ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    sys.stdout.write(p.stdout + "".join(f"  [stderr] {l}\n" for l in p.stderr.splitlines()[-30:]))
    return p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--min-entries", type=int, default=1, help="zero_copy entries and allocations at least")
    ap.add_argument("--min-copies", type=int, default=1, help="copies into or out of zero-copy buffers at least")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command and a.command[0] == "--" else a.command
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        print("no GPU: libcuda.so.1 cannot be loaded (no NVIDIA driver): SKIP")
        return SKIP
    out = Path(a.workdir)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    env = dict(os.environ)
    env["CUXFER_PROFILE_DIR"] = "/nonexistent/cuxfer-test-profiles"
    for k in ("CUXFER_REWRITE", "CUXFER_POLICY", "CUXFER_FINGERPRINT", "CUXFER_FINGERPRINT_MIN"):
        env.pop(k, None)
    failures: list[str] = []

    plain = run(cmd, env)
    if plain.returncode == SKIP:
        return SKIP
    if plain.returncode != 0:
        print(f"FAIL: the app alone exited {plain.returncode}")
        return 1
    want = CHECKSUM.findall(plain.stdout)
    if not want:
        print("FAIL: the app alone printed no checksum=<hex>")
        return 1
    p = run([a.cuxfer, "record", "-q", "-o", str(out / "observed"), "--", *cmd], dict(env, CUXFER_FINGERPRINT_MIN="64"))
    if p.returncode != 0:
        failures.append(f"record exited {p.returncode}")
    policy = out / "policy.json"
    p = run([a.cuxfer, "policy", "-o", str(policy), str(out / "observed")], env)
    entries = json.loads(policy.read_text())["entries"] if p.returncode == 0 and policy.exists() else []
    zero = [e for e in entries if e["path"] == "zero_copy"]
    print(f"zero_copy entries: {len(zero)}: " + ", ".join(e["site"].get("source", e["site"]["offset"]) for e in zero))
    if len(zero) < a.min_entries:
        failures.append(f"policy: {len(zero)} zero_copy entries, expected at least {a.min_entries}")
    if zero:
        p = run([a.cuxfer, "record", "-o", str(out / "zero_copy"), "--policy", str(policy), "--", *cmd], env)
        if p.returncode != 0:
            failures.append(f"the app under the zero-copy policy exited {p.returncode} (a value read out of stream order?)")
        got = CHECKSUM.findall(p.stdout)
        if got != want:
            failures.append(f"checksum under the policy {got}, alone {want}")
        r = run([a.cuxfer, "report", "--json", str(out / "zero_copy")], env)
        rw = json.loads(r.stdout).get("rewrite", {}) if r.returncode == 0 else {}
        print(f"zero copy: {rw.get('zero_copy_allocations')} allocations, {rw.get('zero_copy_calls')} copies")
        if (rw.get("zero_copy_allocations") or 0) < a.min_entries:
            failures.append(f"{rw.get('zero_copy_allocations')} allocations made zero-copy, expected {a.min_entries}")
        if (rw.get("zero_copy_calls") or 0) < a.min_copies:
            failures.append(f"{rw.get('zero_copy_calls')} copies into or out of zero-copy buffers, expected at least "
                            f"{a.min_copies}")
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print(f"PASS: {len(zero)} allocation(s) zero-copy, every value in stream order, checksum {want}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
