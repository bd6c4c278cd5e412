#!/usr/bin/env python3
"""A copy declined by staging never waits for its own held-back registration (stdlib only).

testapps/staging_declined under `cuxfer record --rewrite=pin` (registration in
the background, the default), with a staging pool of one buffer
(CUXFER_PINNED_BUDGET=16M), the H2D staging threshold at 1 MiB and the
simulated CUDA holding async copies' DMA "in flight" until the app
synchronises (SIMCUDA_EVENTS_PENDING=1): the app's reused buffers prove
themselves reused while no staging buffer is free, so the copy that reserves
a buffer's registration is declined by staging and left as made, on pageable
memory (the reservation is not in the driver yet), and the registration is
handed over after it. It must end (it hung once: the copy released its range
and the release waited for the registration the same copy was holding back),
print what it prints alone, and the report must show the scenario happened:
copies passed through for "no staging buffer free" and registrations made.

  run_staging_declined.py --cuxfer build/bin/cuxfer --shim build/lib/libcuxfer.so \\
      --workdir DIR -- build/testapps/sim/staging_declined-simshared 4M 4
"""
from __future__ import annotations

import json
import subprocess
import sys

from e2e_util import clean_env, fresh_dir, run_diagnosed, shim_app_args, verdict

MIB = 1 << 20


def main() -> int:
    a, app = shim_app_args(__doc__)
    work = fresh_dir(a.workdir)
    env = clean_env()
    plain = run_diagnosed(app, 60, env=env)
    if plain.returncode == 77:
        print(plain.stdout)
        return 77
    env.update({"CUXFER_PINNED_BUDGET": str(16 * MIB), "CUXFER_STAGE_MIN_H2D": str(MIB),
                "SIMCUDA_EVENTS_PENDING": "1"})
    fails: list[str] = []
    try:
        run = run_diagnosed([a.cuxfer, "record", "-q", "--rewrite=pin", "--shim", a.shim, "-o", str(work / "t"),
                             "--", *app], 60, env=env)
    except subprocess.TimeoutExpired:
        return verdict(["the app hung under --rewrite=pin (see where each thread waits above)"])
    print(run.stdout, run.stderr, sep="\n")
    if run.returncode != 0 or run.stdout.strip() != plain.stdout.strip():
        fails.append(f"exit {run.returncode}, output {run.stdout.strip()!r}; plain: {plain.stdout.strip()!r}")
        return verdict(fails)
    rep = run_diagnosed([a.cuxfer, "report", "--json", str(work / "t")], 60, env=env)
    if rep.returncode != 0:
        return verdict([f"report --json failed: {rep.stderr}"])
    rw = json.loads(rep.stdout).get("rewrite", {})
    reasons = {r["reason"]: r["calls"] for r in rw.get("passthrough_reasons", [])}
    print("passthrough_reasons:", reasons, "registrations:", rw.get("registrations"))
    if reasons.get("no_free_buffer", 0) < 2:
        fails.append(f"expected copies passed through for no free staging buffer, got {reasons}")
    if not rw.get("registrations"):
        fails.append("no registration was made: the scenario did not happen")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
