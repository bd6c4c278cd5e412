#!/usr/bin/env python3
"""A staged synchronous H2D whose DMA fails returns the DMA's error (stdlib only).

Under `cuxfer record --rewrite=pin` a pageable cudaMemcpy H2D of 16 MiB (over
the default staging threshold, 8 MiB) is staged through the shim's pinned
pool: copied into pool buffers, DMA'd, and waited for. The simulated driver makes every cuEventSynchronize fail
(SIMCUDA_FAIL_EVENT_SYNC=1, CUDA_ERROR_LAUNCH_FAILED), as a DMA that failed
reports itself to whoever waits. The app's first cudaMemcpy H2D must return
an error (testapps check every call: exit 1 naming the call); returning
success there is a silently failed copy.

  run_staged_dma_error.py --cuxfer build/bin/cuxfer --shim build/lib/libcuxfer.so \\
      --workdir DIR -- build/testapps/sim/pageable_loop-simshared 2 16M
"""
from __future__ import annotations

import argparse
import os
import sys

from e2e_util import command_after_dashes, fresh_dir, run_diagnosed, verdict


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    app = command_after_dashes(a.command)
    work = fresh_dir(a.workdir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUXFER_") and k != "LD_PRELOAD"}
    env["CUXFER_PROFILE_DIR"] = "/nonexistent/cuxfer-test-profiles"
    env["SIMCUDA_FAIL_EVENT_SYNC"] = "1"
    run = run_diagnosed([a.cuxfer, "record", "-q", "--rewrite=pin", "--shim", a.shim, "-o", str(work / "t"),
                         "--", *app], 120, env=env)
    print(run.stdout, run.stderr, sep="\n")
    fails = []
    if run.returncode != 1:
        fails.append(f"exit status {run.returncode}, want 1 (the app saw a failed copy)")
    first_error = next((l for l in run.stderr.splitlines() if " returned " in l), "")
    if "cudaMemcpyHostToDevice" not in first_error:
        fails.append(f"the first failed call is not the staged H2D (it returned success after its DMA "
                     f"failed): {first_error!r}")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
