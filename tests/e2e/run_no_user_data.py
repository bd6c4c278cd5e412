#!/usr/bin/env python3
"""The shim never writes user data into traces, fingerprints only.

  run_no_user_data.py --cuxfer CUXFER --payloads TRACE_PAYLOADS --variant observe|rewrite
                      --workdir DIR -- APP N S

APP (testapps/user_data) copies host buffers filled with recognizable text,
built at run time. The app is recorded with fingerprints on for every copy
(CUXFER_FINGERPRINT_MIN=1; with --variant rewrite also --rewrite=pin, whose
staging and registration touch the same bytes). Every block of the trace,
decompressed (trace_payloads), must not contain the text, while:
  - the same bytes do contain the program's path (the check can see text);
  - the report shows fingerprints were taken (the duplicate-upload finding,
    which only fingerprints can make, for the small buffer uploaded with the
    same text every round).
Exit 0 pass, 1 fail.
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from e2e_util import command_after_dashes, fresh_dir, verdict

SECRET = b"must-not-leak"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--payloads", required=True)
    ap.add_argument("--variant", choices=["observe", "rewrite"], required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("app", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    app = command_after_dashes(a.app)
    out = fresh_dir(a.workdir)
    env = {**os.environ, "CUXFER_FINGERPRINT_MIN": "1", "CUXFER_PROFILE_DIR": "/nonexistent/cuxfer-test-profiles"}
    rec = [a.cuxfer, "record", "-q", "-o", str(out), *(["--rewrite=pin"] if a.variant == "rewrite" else []), "--", *app]
    r = subprocess.run(rec, env=env, capture_output=True, text=True, timeout=120)
    print(r.stdout, r.stderr, sep="\n")
    fails = []
    if r.returncode != 0:
        fails.append(f"exit status {r.returncode}")
    traces = sorted(out.glob("*.trace"))
    if len(traces) != 1:
        fails.append(f"{len(traces)} traces, want 1")
    for t in traces:
        p = subprocess.run([a.payloads, str(t)], capture_output=True, timeout=60)
        if p.returncode != 0:
            fails.append(f"trace_payloads failed: {p.stderr.decode().strip()}")
            continue
        data = p.stdout
        print(f"{t.name}: {len(data)} bytes decompressed ({p.stderr.decode().strip()})")
        if Path(app[0]).name.encode() not in data:
            fails.append("the program's name is not in the decompressed trace: the check cannot see text")
        if SECRET in data:
            at = data.index(SECRET)
            fails.append(f"user data in the trace at payload offset {at}: {data[max(0, at - 20):at + 40]!r}")
        rep = subprocess.run([a.cuxfer, "report", "--json", str(t)], capture_output=True, text=True)
        kinds = sorted({f.get("kind") for f in json.loads(rep.stdout).get("findings", [])}) if rep.returncode == 0 else []
        print("findings:", kinds)
        if "duplicate_uploads" not in kinds:
            fails.append(f"no duplicate-upload finding: fingerprints were not taken? (findings {kinds})")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
