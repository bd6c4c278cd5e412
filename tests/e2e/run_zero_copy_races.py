#!/usr/bin/env python3
"""Zero copy while another thread tears a context down at the worst moment (stdlib only).

testapps/zero_copy_races allocates device buffers from one site that a policy
sends to zero copy, in contexts another thread destroys:

  drop  a worker's first copy in its own context destroys its event of the
        context it just left, while the main thread destroys that context. On
        the simulated driver SIMCUDA_EVENT_DESTROY_DELAY_US holds the worker's
        cuEventDestroy at its entry (as if descheduled just before the call),
        so that the destruction lands inside the window unless the shim makes
        "its context lives" and the destroy one step; an event of a destroyed
        context makes the simulated driver abort (on a GPU: a use after free).
  release  drop with the device's primary context released (its last
        reference) instead of a context destroyed: the shim knows the release
        was the last only after it, so the context counts as going meanwhile.
  sync  work of a context is left in flight (an event not waited for) and the
        context is destroyed, in even rounds its zero-copy buffer freed first,
        by a thread whose current context is another one. With
        SIMCUDA_EVENTS_PENDING=1 freeing that context's pinned memory while its
        work is pending aborts: the shim must wait for that context's work, not
        the current context's (cuCtxSynchronize waits for the current one's only).

Steps: the plain run (same environment) must pass; observed with device
pointers, `cuxfer policy` writes one zero_copy entry for alloc_buffer's
allocation; under `cuxfer record --policy FILE` the app's output is the plain
run's, exit 0, no fallback, and the exact zero-copy counts.

  run_zero_copy_races.py --cuxfer build/bin/cuxfer --shim build/lib/libcuxfer.so \\
      --workdir DIR -- build/testapps/sim/zero_copy_races-sim drop 4 300 64
"""
from __future__ import annotations

import json
import sys

from e2e_util import (clean_env, fresh_dir, run_diagnosed, shim_app_args, verdict, zero_copy_policy,
                      zero_copy_report_says_mapped)

# The simulated driver's settings per mode (ignored by a real one).
SIM_ENV = {
    "drop": {"SIMCUDA_EVENT_DESTROY_DELAY_US": "30000"},
    "release": {"SIMCUDA_EVENT_DESTROY_DELAY_US": "30000"},
    "sync": {"SIMCUDA_EVENTS_PENDING": "1"},
}


def main() -> int:
    a, app = shim_app_args(__doc__)
    mode = app[1] if len(app) > 1 else ""
    if mode not in SIM_ENV:
        print(f"FAIL: the app's first argument must be one of {sorted(SIM_ENV)}, got {mode!r}")
        return 1
    work = fresh_dir(a.workdir)
    env = clean_env()
    sim = clean_env(**SIM_ENV[mode])
    plain = run_diagnosed(app, 120, env=sim)
    print(plain.stdout, plain.stderr, sep="\n")
    if plain.returncode == 77:
        return 77
    fails = []
    if plain.returncode != 0:
        fails.append(f"plain run exited {plain.returncode}: {plain.stderr}")
        return verdict(fails)

    policy = zero_copy_policy(a, app, work, env, fails)
    if policy is None:
        return verdict(fails)

    run = run_diagnosed([a.cuxfer, "record", "-q", "--policy", str(policy), "--shim", a.shim,
                         "-o", str(work / "zc"), "--", *app], 120, env=sim)
    print(run.stdout, run.stderr, sep="\n")
    if run.returncode != 0 or run.stdout.strip() != plain.stdout.strip():
        fails.append(f"under the policy: exit {run.returncode}, output {run.stdout.strip()!r}; "
                     f"plain: {plain.stdout.strip()!r}; stderr: {run.stderr.strip()[-600:]!r}")
        return verdict(fails)
    if not zero_copy_report_says_mapped(a, work / "zc", env, fails):
        return verdict(fails)
    given = [int(x) for x in app[2:5]]  # the app's ROUNDS N S, its defaults for the rest
    rounds, n, s = given + [4, 300, 64][len(given):]
    allocations, storms = (1 + rounds, 1 + 2 * rounds) if mode in ("drop", "release") else (rounds, rounds)
    j = run_diagnosed([a.cuxfer, "report", "--json", str(work / "zc")], 60, env=env)
    rw = json.loads(j.stdout).get("rewrite", {}) if j.returncode == 0 else {}
    want = {"zero_copy_allocations": allocations, "zero_copy_allocation_bytes": allocations * n * s,
            "zero_copy_calls": storms * (n + 1), "zero_copy_bytes": storms * 2 * n * s}
    got = {k: rw.get(k) for k in want}
    print("zero copy:", got)
    if got != want:
        fails.append(f"zero copy counts {got}, expected {want}")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
