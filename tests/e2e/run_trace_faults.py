#!/usr/bin/env python3
"""The shim when its trace cannot be created (stdlib only).

  run_trace_faults.py --shim B/lib/libcuxfer.so --memhooks B/lib/libcuxfer_memhooks.so
      --app B/testapps/sim/pageable_loop-simshared --workdir DIR

The shim preloaded by hand with CUXFER_OUTPUT_DIR naming a directory that
cannot exist (its parent is a regular file), observe and CUXFER_REWRITE=pin:
the app prints OK and exits 0 (it checks its own copies), the shim says so in
one line on stderr naming the variable to set (and, with the rewrite asked
for, that copies are not rewritten either: every hook passes through), and no
trace appears anywhere. And with CUXFER_OUTPUT_DIR naming folders that do
not exist yet, the shim makes them (as `cuxfer record -o` does) and records.
Exit status: 0 pass, 1 fail.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

from e2e_util import fresh_dir, verdict

fails: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        fails.append(what)
        print("FAIL: " + what, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    for a in ("--shim", "--memhooks", "--app", "--workdir"):
        ap.add_argument(a, required=True)
    args = ap.parse_args()
    work = fresh_dir(args.workdir)
    (work / "a-file").write_text("not a directory\n")
    bad = work / "a-file" / "traces"
    for rewrite in ("off", "pin"):
        preload = args.shim + (":" + args.memhooks if rewrite == "pin" else "")
        env = dict(os.environ, LD_PRELOAD=preload, CUXFER_OUTPUT_DIR=str(bad), CUXFER_REWRITE=rewrite)
        print(f"+ LD_PRELOAD={preload} CUXFER_OUTPUT_DIR={bad} CUXFER_REWRITE={rewrite} {args.app} 8 2M", flush=True)
        r = subprocess.run([args.app, "8", "2M"], capture_output=True, text=True, env=env, timeout=120, cwd=work)
        print(r.stdout + r.stderr)
        check(r.returncode == 0 and "pageable_loop: OK" in r.stdout,
              f"rewrite={rewrite}: the app ran as without cuxfer (exit {r.returncode})")
        said = [l for l in r.stderr.splitlines() if "cuxfer" in l]
        check(len(said) == 1, f"rewrite={rewrite}: one line from cuxfer on stderr, got {len(said)}: {said}")
        check(any("not recorded" in l and "CUXFER_OUTPUT_DIR" in l for l in said),
              f"rewrite={rewrite}: the line says the process is not recorded and what to set: {said}")
        check(any(("not rewritten" in l) == (rewrite == "pin") for l in said),
              f"rewrite={rewrite}: the line says whether the copies are rewritten: {said}")
        traces = list(work.rglob("*.trace"))
        check(not traces, f"rewrite={rewrite}: no trace written, found {traces}")
    # A folder that does not exist yet, two levels deep: made, and the process recorded.
    fresh = work / "new" / "nested"
    env = dict(os.environ, LD_PRELOAD=args.shim, CUXFER_OUTPUT_DIR=str(fresh))
    print(f"+ LD_PRELOAD={args.shim} CUXFER_OUTPUT_DIR={fresh} {args.app} 8 2M", flush=True)
    r = subprocess.run([args.app, "8", "2M"], capture_output=True, text=True, env=env, timeout=120, cwd=work)
    print(r.stdout + r.stderr)
    check(r.returncode == 0 and "pageable_loop: OK" in r.stdout, f"missing folder: the app ran (exit {r.returncode})")
    made = list(fresh.glob("cuxfer-*.trace")) if fresh.is_dir() else []
    check(len(made) == 1 and made[0].stat().st_size > 0, f"missing folder: made, and one trace in it: {made}")
    check(not [l for l in r.stderr.splitlines() if "error" in l and "cuxfer" in l],
          f"missing folder: no error from cuxfer: {r.stderr[-400:]}")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
