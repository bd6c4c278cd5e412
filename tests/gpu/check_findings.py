#!/usr/bin/env python3
"""GPU tier: a finding fires on the test app made to show it and not on its clean twin.

  check_findings.py --cuxfer CUXFER --expect KIND|--absent KIND [--require PATH=MIN ...]
                    [--record-arg ARG ...] -- APP [ARGS...]

Records APP with `cuxfer record` (plus --record-arg options, e.g. --kernels), reads
`cuxfer report --json`, and checks that finding KIND is present (--expect) or absent
(--absent). --require checks a number of the JSON report (dotted path, e.g.
managed.total.prefetched_bytes=1; true counts as 1) is at least MIN, so that an
absent finding means "measured and clean", not "not measured". Exit 0 pass, 1 fail, 77 skip (the app printed "no GPU").
"""
import argparse
import json
import subprocess
import sys
import tempfile


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--expect", action="append", default=[])
    ap.add_argument("--absent", action="append", default=[])
    ap.add_argument("--record-arg", action="append", default=[])
    ap.add_argument("--require", action="append", default=[])
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command and a.command[0] == "--" else a.command
    with tempfile.TemporaryDirectory() as d:
        env = {"CUXFER_PROFILE_DIR": "/nonexistent/cuxfer-test-profiles"}
        import os
        env = {**os.environ, **env}
        r = subprocess.run([a.cuxfer, "record", "-q", "-o", d, *a.record_arg, "--", *cmd], env=env,
                           capture_output=True, text=True, timeout=600)
        sys.stdout.write(r.stdout)
        if r.returncode == 77 or "no GPU" in r.stdout:
            print("SKIP: no GPU")
            return 77
        if r.returncode != 0:
            print(f"FAIL: the app exited {r.returncode}: {r.stderr[-2000:]}")
            return 1
        rep = subprocess.run([a.cuxfer, "report", "--json", d], env=env, capture_output=True, text=True, timeout=300)
        if rep.returncode != 0:
            print(f"FAIL: cuxfer report: {rep.stderr}")
            return 1
        j = json.loads(rep.stdout)
    kinds = [f["kind"] for f in j["findings"]]
    print("findings:", kinds, "overlap:", json.dumps(j.get("overlap")), "managed:", json.dumps(j.get("managed")))
    bad = [k for k in a.expect if k not in kinds] + [k for k in a.absent if k in kinds]
    for req in a.require:
        path, _, least = req.partition("=")
        v = j
        for part in path.split("."):
            v = v.get(part) if isinstance(v, dict) else None
        if v is None or float(v) < float(least or 1):
            bad.append(f"{path} = {v} (need >= {least or 1})")
    if bad:
        print(f"FAIL: expected {a.expect} present and {a.absent} absent, {a.require} met; got {kinds}; failed: {bad}")
        return 1
    print("check_findings: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
