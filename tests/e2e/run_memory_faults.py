#!/usr/bin/env python3
"""The shim when its memory runs out (stdlib only).

  run_memory_faults.py --cuxfer B/bin/cuxfer --shim B/lib/libcuxfer.so
      --memhooks B/lib/libcuxfer_memhooks.so --fail-lib B/.../libcuxfer_fail_shim_malloc.so
      --app B/testapps/sim/pageable_loop-simshared --workdir DIR

A preloaded stand-in makes every allocation of libcuxfer.so's own code fail
(malloc and its kin return NULL; the app's allocations keep working), from
the shim's first allocation (at load, before the first CUDA call), from
half-way (while the first CUDA call starts the recording) and from 90 % of
the way (while it records), counted in a first run that fails nothing. The
shim preloaded by hand after the stand-in (so that the shim's calls reach
it first), observed and rewriting (CUXFER_REWRITE=pin, with the libc hooks),
each time: the app prints
OK and exits 0 (its copies checked by itself), nothing hangs, the shim says
once that it stops recording, never aborts, and the trace still reads, with
its End and a note saying why it ends early.

Exit status: 0 pass, 1 fail.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

from e2e_util import fresh_dir, verdict

fails: list[str] = []
SAID = "out of memory inside the shim"


def check(ok: bool, what: str) -> None:
    if not ok:
        fails.append(what)
        print("FAIL: " + what, flush=True)


def record(args, out, rewrite: str, fail: str) -> subprocess.CompletedProcess:
    out.mkdir(parents=True)
    preload = ":".join([args.fail_lib, args.shim] + ([args.memhooks] if rewrite == "pin" else []))
    env = dict(os.environ, LD_PRELOAD=preload, FAIL_SHIM_MALLOC=fail, CUXFER_OUTPUT_DIR=str(out),
               CUXFER_REWRITE=rewrite)
    cmd = [args.app, "8", "2M"]
    print(f"+ FAIL_SHIM_MALLOC={fail} LD_PRELOAD={preload} CUXFER_OUTPUT_DIR={out} CUXFER_REWRITE={rewrite} "
          + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    print(r.stdout + r.stderr)
    return r


def main() -> int:
    ap = argparse.ArgumentParser()
    for a in ("--cuxfer", "--shim", "--memhooks", "--fail-lib", "--app", "--workdir"):
        ap.add_argument(a, required=True)
    args = ap.parse_args()
    work = fresh_dir(args.workdir)
    for rewrite in ("off", "pin"):
        r = record(args, work / f"{rewrite}.count", rewrite, "count")
        m = re.search(r"fail_shim_malloc: (\d+) shim allocations, 0 failed", r.stderr)
        check(r.returncode == 0 and m is not None, f"--rewrite={rewrite}: the counting run ran and counted")
        total = int(m.group(1)) if m else 0
        check(total > 20, f"--rewrite={rewrite}: the stand-in saw the shim allocate ({total} allocations)")
        for after in (0, total // 2, total * 9 // 10):
            what = f"--rewrite={rewrite}, failing from allocation {after} of {total}"
            out = work / f"{rewrite}.after{after}"
            r = record(args, out, rewrite, str(after))
            check(r.returncode == 0 and "pageable_loop: OK" in r.stdout,
                  f"{what}: the app ran as without cuxfer (exit {r.returncode})")
            # How many allocations a run makes depends on its timing (the writer's cycles): a late
            # starting point may not be reached. Where the stand-in failed one, the stop is said
            # exactly once; from the first allocation, one always fails.
            fm = re.search(r"fail_shim_malloc: \d+ shim allocations, (\d+) failed", r.stderr)
            failed = int(fm.group(1)) if fm else -1
            check(failed >= 0, f"{what}: the stand-in reported")
            if after == 0:
                check(failed > 0, f"{what}: the stand-in failed the shim's allocations ({failed})")
            said = [l for l in r.stderr.splitlines() if SAID in l]
            check(len(said) == 1 if failed > 0 else len(said) <= 1,
                  f"{what}: said once on stderr ({failed} allocations failed), got {len(said)}")
            check(not any("unknown variable" in l for l in r.stderr.splitlines()), f"{what}: no configuration warning")
            check("aborting" not in r.stderr, f"{what}: the shim never aborts")
            traces = sorted(out.glob("*.trace"))
            check(len(traces) == 1, f"{what}: one trace, got {len(traces)}")
            if not traces:
                continue
            rep = subprocess.run([args.cuxfer, "report", "--json", str(traces[0])], capture_output=True, text=True)
            check(rep.returncode == 0, f"{what}: the trace reads: {rep.stderr[-300:]}")
            if rep.returncode != 0:
                continue
            d = json.loads(rep.stdout)
            notes = [n for p in d["processes"] for n in p["notes"]]
            # Out of memory before the writer's thread could start says so in those words instead.
            if said:
                check(any((SAID in n and "ends early" in n) or "not recorded" in n for n in notes),
                      f"{what}: the note is in the trace: {notes}")
            check(all(p["complete"] for p in d["processes"]), f"{what}: the trace has its End")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
