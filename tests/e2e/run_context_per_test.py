#!/usr/bin/env python3
"""Every context is served by the rewrite, not only the first (stdlib only).

testapps/context_per_test makes a context per "test" (cuCtxCreate), copies
pageable memory through it (H2D then D2H, twice, 16 MiB each: over the
staging thresholds) and destroys it, as PyCUDA's test suite does;
testapps/primary_release retains, uses and releases (for the last time) the
device's primary context beside a context of its own, as PyCUDA's
test_additional_primary_context does. Under
`cuxfer record --rewrite=pin`:
  - the app's output is the plain run's (every byte checked by the app);
  - every copy was staged or registered: the staged bytes plus the
    registered bytes are all of the pageable bytes (a pool bound to the first
    context served only the first context's copies; the others passed through);
  - the report names no copy passed through for lack of a pool.

  run_context_per_test.py --cuxfer build/bin/cuxfer --shim build/lib/libcuxfer.so \\
      --workdir DIR -- build/testapps/sim/context_per_test-sim 4 16M
"""
from __future__ import annotations

import json
import sys

from e2e_util import clean_env, fresh_dir, run_diagnosed, shim_app_args, verdict


def main() -> int:
    a, app = shim_app_args(__doc__)
    work = fresh_dir(a.workdir)
    env = clean_env()
    plain = run_diagnosed(app, 120, env=env)
    if plain.returncode == 77:
        print(plain.stdout)
        return 77
    run = run_diagnosed([a.cuxfer, "record", "-q", "--rewrite=pin", "--shim", a.shim, "-o", str(work / "t"),
                         "--", *app], 120, env=env)
    print(run.stdout, run.stderr, sep="\n")
    fails = []
    if run.returncode != 0 or run.stdout.strip() != plain.stdout.strip():
        fails.append(f"exit {run.returncode}, output {run.stdout.strip()!r}; plain: {plain.stdout.strip()!r}")
    rep = run_diagnosed([a.cuxfer, "report", "--json", str(work / "t")], 60, env=env)
    if rep.returncode != 0:
        fails.append(f"report failed: {rep.stderr}")
        return verdict(fails)
    j = json.loads(rep.stdout)
    rw = j.get("rewrite", {})
    served = rw.get("staged_bytes", 0) + rw.get("registered_bytes", 0)
    passed = rw.get("passthrough_pageable_bytes", 0)
    print(f"staged {rw.get('staged_bytes')}, registered {rw.get('registered_bytes')}, passed through {passed}")
    if served == 0:
        fails.append("the rewrite served no copy")
    if passed != 0:
        fails.append(f"{passed} pageable bytes passed through: some contexts' copies were not served")
    no_pool = [r for r in rw.get("passthrough_reasons", []) if r.get("reason") == "no_pool"]
    if no_pool:
        fails.append(f"copies passed through for lack of a pool in their context: {no_pool}")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
