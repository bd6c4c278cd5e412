#!/usr/bin/env python3
"""An app with its own CUPTI profiler (testapps/cupti_profiler.cpp) under
`cuxfer record`, against the stand-in libcupti (tests/simcuda/cupti.cpp).

  run_cupti_handover.py --cuxfer CUXFER --cupti LIBCUPTI --workdir DIR -- APP MODE

The app's profiler must see only buffers it handed out and every record made
for it (the app checks both and exits non-zero otherwise). The shim must keep
the records it collected before the handover and say when CUPTI changed hands:
  late, finalize  cupti.handover present and naming the call; 1 GPU record kept
  early           the shim never starts CUPTI ("the application's own profiler
                  holds CUPTI"); no GPU records
and count the app's two copies either way. Exit 0 pass, 1 fail.
"""
import argparse
import json
import os
import subprocess
import sys

from e2e_util import command_after_dashes, fresh_dir, verdict

CALL = {"late": "cuptiActivityRegisterCallbacks", "finalize": "cuptiFinalize",
        "early": "cuptiActivityRegisterCallbacks"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--cupti", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("app", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    app = command_after_dashes(a.app)
    mode = app[1]
    out = fresh_dir(a.workdir)
    env = {**os.environ, "CUXFER_CUPTI_LIB": a.cupti,
           "CUXFER_PROFILE_DIR": "/nonexistent/cuxfer-test-profiles"}
    run = subprocess.run([a.cuxfer, "record", "-o", str(out), "--", *app], env=env,
                         capture_output=True, text=True, timeout=120)
    print(run.stdout, run.stderr, sep="\n")
    fails = []
    if run.returncode != 0:
        fails.append(f"exit status {run.returncode} (the app's profiler saw a foreign buffer or lost records?)")
    traces = sorted(out.glob("*.trace"))
    if len(traces) != 1:
        fails.append(f"{len(traces)} traces, want 1")
    else:
        r = subprocess.run([a.cuxfer, "report", "--json", str(traces[0])], capture_output=True, text=True)
        if r.returncode != 0:
            fails.append(f"cuxfer report: {r.stderr.strip()}")
        else:
            rep = json.loads(r.stdout)
            p = rep["processes"][0]
            cupti = p["cupti"]
            print("cupti:", json.dumps(cupti), "gpu_records:", p.get("gpu_records"))
            h2d = sum(c["calls"] for c in rep["classes"] if c["direction"] == "H2D")
            if h2d != 2:
                fails.append(f"{h2d} H2D copies reported, want 2")
            if mode == "early":
                if cupti["state"] != "unavailable" or "application's own profiler holds CUPTI" not in cupti["reason"]:
                    fails.append(f"cupti {cupti}: want unavailable, left to the application's profiler")
                if "handover" in cupti:
                    fails.append("a handover reported although the shim never held CUPTI")
                if p.get("gpu_records") != 0:
                    fails.append(f"{p.get('gpu_records')} GPU records, want 0")
            else:
                h = cupti.get("handover")
                if cupti["state"] != "active" or not h or CALL[mode] not in h["reason"]:
                    fails.append(f"cupti {cupti}: want active with a handover by {CALL[mode]}")
                elif not 0 <= h["at_s"] < 60:
                    fails.append(f"handover at {h['at_s']} s")
                if p.get("gpu_records") != 1:
                    fails.append(f"{p.get('gpu_records')} GPU records, want the 1 made before the handover")
                if p.get("events_without_gpu_record", 0) != 0:
                    fails.append(f"{p['events_without_gpu_record']} events counted as missing GPU records "
                                 "(none are expected after the handover)")
            if "took CUPTI over" not in run.stderr and mode != "early":
                fails.append("no warning on stderr about the handover")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
