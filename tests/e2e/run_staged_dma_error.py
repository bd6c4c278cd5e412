#!/usr/bin/env python3
"""A staged copy whose DMA fails returns the DMA's error, and a staging buffer
whose DMA can be neither tracked nor waited for is never used again (stdlib only).

Under `cuxfer record --rewrite=pin` a pageable cudaMemcpy H2D of 16 MiB (over
the default staging threshold, 8 MiB) is staged through the shim's pinned
pool: copied into pool buffers, DMA'd, and waited for. The simulated driver makes every cuEventSynchronize fail
(SIMCUDA_FAIL_EVENT_SYNC=1, CUDA_ERROR_LAUNCH_FAILED), as a DMA that failed
reports itself to whoever waits. The app's first cudaMemcpy H2D must return
an error (testapps check every call: exit 1 naming the call); returning
success there is a silently failed copy.

--fault untracked-h2d: every cuEventRecord and cuStreamSynchronize fails
instead (SIMCUDA_FAIL_EVENT_RECORD=1, SIMCUDA_FAIL_STREAM_SYNC=1): the staged
H2D cannot track its chunk's DMA, nor wait for it; it returns the wait's
error, and the chunk's buffer, which the DMA may still read, is withheld
from the pool (the shim's note says so).
--fault untracked-d2h: the same with the H2D below its staging threshold
(passed through): the first staged D2H's DMA into a buffer cannot be tracked
nor waited for; the buffer is withheld and that copy passes through to the
driver, so the app's results stay right (exit 0).

  run_staged_dma_error.py --cuxfer build/bin/cuxfer --shim build/lib/libcuxfer.so \\
      --workdir DIR -- build/testapps/sim/pageable_loop-simshared 2 16M
"""
from __future__ import annotations

import argparse
import os
import sys

import json

from e2e_util import command_after_dashes, fresh_dir, run_diagnosed, verdict

WITHHELD = "a staging buffer whose copy could be neither tracked nor waited for"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--fault", choices=["dma", "untracked-h2d", "untracked-d2h"], default="dma")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    app = command_after_dashes(a.command)
    work = fresh_dir(a.workdir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUXFER_") and k != "LD_PRELOAD"}
    env["CUXFER_PROFILE_DIR"] = "/nonexistent/cuxfer-test-profiles"
    if a.fault == "dma":
        env["SIMCUDA_FAIL_EVENT_SYNC"] = "1"
    else:
        env["SIMCUDA_FAIL_EVENT_RECORD"] = "1"
        env["SIMCUDA_FAIL_STREAM_SYNC"] = "1"
    if a.fault == "untracked-d2h":
        env["CUXFER_STAGE_MIN_H2D"] = str(1 << 40)
    run = run_diagnosed([a.cuxfer, "record", "-q", "--rewrite=pin", "--shim", a.shim, "-o", str(work / "t"),
                         "--", *app], 120, env=env)
    print(run.stdout, run.stderr, sep="\n")
    fails = []
    want_exit = 0 if a.fault == "untracked-d2h" else 1
    if run.returncode != want_exit:
        fails.append(f"exit status {run.returncode}, want {want_exit}"
                     + (" (the app's copies stay right)" if want_exit == 0 else " (the app saw a failed copy)"))
    if a.fault != "untracked-d2h":
        first_error = next((l for l in run.stderr.splitlines() if " returned " in l), "")
        if "cudaMemcpyHostToDevice" not in first_error:
            fails.append(f"the first failed call is not the staged H2D (it returned success after its DMA "
                         f"failed): {first_error!r}")
    if a.fault != "dma":
        rep = run_diagnosed([a.cuxfer, "report", "--json", str(work / "t")], 60, env=env)
        notes = [n for p in json.loads(rep.stdout).get("processes", []) for n in p.get("notes", [])] \
            if rep.returncode == 0 else []
        if not any(WITHHELD in n for n in notes):
            fails.append(f"no note that the untracked buffer was withheld (report exit {rep.returncode}); "
                         f"notes: {notes}")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
