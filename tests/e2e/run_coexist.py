#!/usr/bin/env python3
"""cuxfer beside other interposers (stdlib only).

  run_coexist.py --cuxfer B/bin/cuxfer --shim B/lib/libcuxfer.so --workdir DIR
      --other LIB [--name NAME] [--expect TEXT ...] -- CMD [ARGS...]

LIB is another library that replaces libc functions (wrap_alloc, which
chains malloc, free, mmap, munmap and dlsym through dlsym(RTLD_NEXT); or an
allocator such as jemalloc or tcmalloc). CMD runs once without anything, once
with LIB alone, then with LIB and cuxfer in each order, observing and
rewriting:

  after-observe   LD_PRELOAD=LIB, cuxfer record          (shim, then LIB)
  after-pin       LD_PRELOAD=LIB, cuxfer record --rewrite=pin
                                                          (shim, libc hooks, then LIB)
  before-observe  LD_PRELOAD=LIB:libcuxfer.so             (LIB first)
  before-pin      LD_PRELOAD=LIB:libcuxfer.so:libcuxfer_memhooks.so, CUXFER_REWRITE=pin

Each must exit as the plain run did and print the same standard output (the
app checks its own data; a checksum line must match); every cuxfer variant
must leave a trace that `cuxfer report --json` reads with the copies in it.
With --expect-stderr TEXT, every run with LIB must print TEXT on stderr (LIB
really was in the chain). --ignore-line REGEX leaves lines out of the
comparison that say how the allocator placed memory (which another allocator
changes by itself, cuxfer or not). Exit 0 pass, 1 fail.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from e2e_util import command_after_dashes, fresh_dir, verdict

fails: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        fails.append(what)
        print("FAIL: " + what, flush=True)


def run(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--other", required=True)
    ap.add_argument("--expect-stderr", default="")
    ap.add_argument("--ignore-line", default="")
    ap.add_argument("rest", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = command_after_dashes(a.rest)
    work = fresh_dir(a.workdir)
    shim = os.path.realpath(a.shim)
    hooks = os.path.join(os.path.dirname(shim), "libcuxfer_memhooks.so")
    base = {k: v for k, v in os.environ.items() if not k.startswith("CUXFER_") and k != "LD_PRELOAD"}

    ignore = re.compile(a.ignore_line) if a.ignore_line else None

    def output(r: subprocess.CompletedProcess) -> str:
        return "".join(l for l in r.stdout.splitlines(keepends=True) if not (ignore and ignore.search(l)))

    plain = run(cmd, base)
    check(plain.returncode == 0, f"plain run: exit {plain.returncode}: {plain.stderr[-600:]}")
    alone = run(cmd, {**base, "LD_PRELOAD": a.other})
    check(alone.returncode == plain.returncode and output(alone) == output(plain),
          f"{a.other} alone changed the program: exit {alone.returncode}: {alone.stderr[-600:]}")

    variants = {
        "after-observe": ([a.cuxfer, "record", "-q", "-o", str(work / "after-observe"), "--"] + cmd,
                          {"LD_PRELOAD": a.other}),
        "after-pin": ([a.cuxfer, "record", "-q", "--rewrite=pin", "-o", str(work / "after-pin"), "--"] + cmd,
                      {"LD_PRELOAD": a.other}),
        "before-observe": (cmd, {"LD_PRELOAD": f"{a.other}:{shim}", "CUXFER_OUTPUT_DIR": str(work / "before-observe")}),
        "before-pin": (cmd, {"LD_PRELOAD": f"{a.other}:{shim}:{hooks}", "CUXFER_REWRITE": "pin",
                             "CUXFER_OUTPUT_DIR": str(work / "before-pin")}),
    }
    for name, (argv, extra) in variants.items():
        r = run(argv, {**base, **extra})
        check(r.returncode == plain.returncode, f"{name}: exit {r.returncode}, plain {plain.returncode}: {r.stderr[-800:]}")
        check(output(r) == output(plain),
              f"{name}: output differs:\n--- plain\n{output(plain)[-600:]}\n--- {name}\n{output(r)[-600:]}")
        if a.expect_stderr:
            check(a.expect_stderr in r.stderr, f"{name}: {a.other} was not in the chain (no '{a.expect_stderr}' on stderr)")
        traces = sorted((work / name).glob("*.trace"))
        check(bool(traces), f"{name}: no trace written: {r.stderr[-600:]}")
        if not traces:
            continue
        rep = subprocess.run([a.cuxfer, "report", "--json"] + [str(t) for t in traces],
                             capture_output=True, text=True, timeout=120)
        check(rep.returncode == 0, f"{name}: report: {rep.stderr[-400:]}")
        if rep.returncode == 0:
            calls = sum(s["calls"] for s in json.loads(rep.stdout)["callsites"])
            check(calls > 0, f"{name}: the trace holds no copies")
        print(f"{name}: exit {r.returncode}, output as plain, {len(traces)} trace(s)", flush=True)
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
