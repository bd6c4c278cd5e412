#!/usr/bin/env python3
"""Zero copy across a primary context's resets and a context destroyed by another thread (stdlib only).

testapps/zero_copy_teardown allocates a device buffer from one site in the
primary context, reset after each round (cuDevicePrimaryCtxReset: the fresh
primary context has the old one's handle), then in contexts that a second
thread makes, uses and leaves idle and the main thread destroys; a keeper
thread copies in a context of its own throughout. A policy sends the site to
zero copy: every copy is a host memcpy that waits in stream order through its
thread's event.

  1. observed with device pointers (CUXFER_FINGERPRINT_MIN=1): `cuxfer policy`
     writes one zero_copy entry, for the allocation site in alloc_buffer;
  2. `cuxfer record --policy FILE`: the app's output is the plain run's, exit 0
     (every byte checked by the app), no fallback, and the exact zero-copy
     counts: no copy fell back to the driver;
  3. on the simulated driver (SIMCUDA_LIVE_REPORT), the live events and pinned
     host allocations after each teardown stay the same from the first to the
     last (the keeper's event is kept, not dropped and made again: once one
     leaked per teardown), and at exit nothing of the shim's is left that the
     plain run does not have. An event of a destroyed context used again makes
     the simulated driver abort (the real one may crash or answer 709).

  run_zero_copy_teardown.py --cuxfer build/bin/cuxfer --shim build/lib/libcuxfer.so \\
      --workdir DIR -- build/testapps/sim/zero_copy_teardown-sim 8 100 64
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from e2e_util import (clean_env, fresh_dir, run_diagnosed, shim_app_args, verdict, zero_copy_policy,
                      zero_copy_report_says_mapped)


def live_lines(path: Path) -> list[tuple[str, dict[str, int]]]:
    """SIMCUDA_LIVE_REPORT's lines: (when, {events, host_allocations, contexts}); none on a real driver."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        when, *fields = line.split()
        out.append((when, {k: int(v) for k, v in (f.split("=") for f in fields)}))
    return out


def check_live(plain: list, zc: list, teardowns: int, fails: list[str]) -> None:
    print("live after each teardown, plain:", plain)
    print("live after each teardown, zero copy:", zc)
    if not zc:
        print("no live report (not the simulated driver): the leak check is the simulated tier's")
        return
    # Each round's teardown, then the keeper's context at the end, then exit.
    rounds = [c for w, c in zc if w in ("primary_reset", "ctx_destroy")][:teardowns]
    if len(rounds) != teardowns:
        fails.append(f"expected {teardowns} teardown lines in the live report, got {zc}")
        return
    for key in ("events", "host_allocations"):
        series = [c[key] for c in rounds]
        if len(set(series)) != 1:
            fails.append(f"live {key} after each teardown grow: {series} (a per-thread event or buffer leaks)")
    end_plain = next((c for w, c in plain if w == "exit"), None)
    end_zc = next((c for w, c in zc if w == "exit"), None)
    if end_plain is None or end_zc is None or end_plain != end_zc:
        fails.append(f"at exit: zero copy {end_zc}, plain {end_plain} (the shim left something alive)")


def main() -> int:
    a, app = shim_app_args(__doc__)
    work = fresh_dir(a.workdir)
    env = clean_env()
    plain_live = work / "plain.live"
    plain = run_diagnosed(app, 120, env=clean_env(SIMCUDA_LIVE_REPORT=str(plain_live)))
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

    zc_live = work / "zc.live"
    run = run_diagnosed([a.cuxfer, "record", "-q", "--policy", str(policy), "--shim", a.shim,
                         "-o", str(work / "zc"), "--", *app], 120, env=clean_env(SIMCUDA_LIVE_REPORT=str(zc_live)))
    print(run.stdout, run.stderr, sep="\n")
    if run.returncode != 0 or run.stdout.strip() != plain.stdout.strip():
        fails.append(f"under the policy: exit {run.returncode}, output {run.stdout.strip()!r}; "
                     f"plain: {plain.stdout.strip()!r}")
    if not zero_copy_report_says_mapped(a, work / "zc", env, fails):
        return verdict(fails)
    # Every allocation and copy of the app went to zero copy: a buffer per
    # round of each kind and the keeper's; 1 + 6*ROUNDS storms of N+1 copies.
    given = [int(x) for x in app[1:4]]  # the app's ROUNDS N S, its defaults for the rest
    rounds, n, s = given + [3, 400, 64][len(given):]
    j = run_diagnosed([a.cuxfer, "report", "--json", str(work / "zc")], 60, env=env)
    rw = json.loads(j.stdout).get("rewrite", {}) if j.returncode == 0 else {}
    storms = 1 + 6 * rounds
    want = {"zero_copy_allocations": 1 + 2 * rounds, "zero_copy_allocation_bytes": (1 + 2 * rounds) * n * s,
            "zero_copy_calls": storms * (n + 1), "zero_copy_bytes": storms * 2 * n * s}
    got = {k: rw.get(k) for k in want}
    print("zero copy:", got)
    if got != want:
        fails.append(f"zero copy counts {got}, expected {want}")
    check_live(live_lines(plain_live), live_lines(zc_live), 2 * rounds, fails)
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
