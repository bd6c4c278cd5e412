#!/usr/bin/env python3
"""Zero copy across contexts that come and go (stdlib only).

testapps/zero_copy_contexts allocates a device buffer from one site in
context after context (cuCtxCreate ... cuCtxDestroy, some buffers freed
first, some left to the context's end) and fills it with tiny synchronous
copies on the per-thread default stream, while a second thread, bound to a
context of its own, copies beside each destruction. A policy sends the
allocation site to zero copy, so every copy is a host memcpy that waits in
stream order through its thread's event: an event of a destroyed context
must never be used again (the simulated driver aborts on it, as the real one
may crash or answer 709).

  1. observed with device pointers (CUXFER_FINGERPRINT_MIN=1): `cuxfer policy`
     writes one zero_copy entry, for the allocation site in alloc_buffer;
  2. `cuxfer record --policy FILE`: the app's output is the plain run's, exit 0
     (every byte checked by the app, in every context and thread), and the
     report says the allocations were mapped host memory, with no fallback note.
A context's destruction once freed every context's zero-copy buffers: the
second thread's next copy failed (CUresult 1).

  run_zero_copy_contexts.py --cuxfer build/bin/cuxfer --shim build/lib/libcuxfer.so \\
      --workdir DIR -- build/testapps/sim/zero_copy_contexts-sim 3 400 64
"""
from __future__ import annotations

import json
import sys

from e2e_util import (clean_env, fresh_dir, run_diagnosed, shim_app_args, verdict, zero_copy_policy,
                      zero_copy_report_says_mapped)


def main() -> int:
    a, app = shim_app_args(__doc__)
    work = fresh_dir(a.workdir)
    env = clean_env()
    plain = run_diagnosed(app, 120, env=env)
    if plain.returncode == 77:
        print(plain.stdout)
        return 77
    fails = []
    if plain.returncode != 0:
        fails.append(f"plain run exited {plain.returncode}: {plain.stderr}")
        return verdict(fails)

    policy = zero_copy_policy(a, app, work, env, fails)
    if policy is None:
        return verdict(fails)

    run = run_diagnosed([a.cuxfer, "record", "-q", "--policy", str(policy), "--shim", a.shim,
                         "-o", str(work / "zc"), "--", *app], 120, env=env)
    print(run.stdout, run.stderr, sep="\n")
    if run.returncode != 0 or run.stdout.strip() != plain.stdout.strip():
        fails.append(f"under the policy: exit {run.returncode}, output {run.stdout.strip()!r}; "
                     f"plain: {plain.stdout.strip()!r}")
    if not zero_copy_report_says_mapped(a, work / "zc", env, fails):
        return verdict(fails)
    # Every allocation and copy of the app went to zero copy: a buffer per
    # context and one for the second thread; per context two storms of N+1
    # copies, and one storm of the second thread's.
    given = [int(x) for x in app[1:4]]  # the app's CONTEXTS N S, its defaults for the rest
    contexts, n, s = given + [3, 400, 64][len(given):]
    j = run_diagnosed([a.cuxfer, "report", "--json", str(work / "zc")], 60, env=env)
    rw = json.loads(j.stdout).get("rewrite", {}) if j.returncode == 0 else {}
    want = {"zero_copy_allocations": contexts + 1, "zero_copy_allocation_bytes": (contexts + 1) * n * s,
            "zero_copy_calls": 3 * contexts * (n + 1), "zero_copy_bytes": 3 * contexts * 2 * n * s}
    got = {k: rw.get(k) for k in want}
    print("zero copy:", got)
    if got != want:
        fails.append(f"zero copy counts {got}, expected {want}")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
