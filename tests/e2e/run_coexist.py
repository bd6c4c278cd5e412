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

  run_coexist.py ... --asan-runtime RUNTIME -- ASAN_CMD [ARGS...]

An AddressSanitizer-built program instead (RUNTIME: the ASan runtime it
links, GCC's libasan.so; "" for one linked in statically, clang's default).
ASan aborts a program whose initial library list does not start with its
runtime ("ASan runtime does not come first in initial library list"), so
under LD_PRELOAD the runtime must be preloaded before libcuxfer.so; `cuxfer
record` does that itself, from the program's own list of libraries. Runs:

  record-observe       cuxfer record                  (record: runtime, then shim)
  record-pin           cuxfer record --rewrite=pin    (runtime, shim, libc hooks)
  shim-first-pin       LD_PRELOAD=libcuxfer.so:libcuxfer_memhooks.so,
                       CUXFER_REWRITE=pin, ASAN_OPTIONS=verify_asan_link_order=0:
                       ASan's check off, the shim's hooks and the libc hooks'
                       malloc in front of ASan's interceptors

(A program whose runtime record cannot see, a script or Python loading an
ASan-built extension, is recorded with LD_PRELOAD=RUNTIME: record keeps a
sanitizer runtime that leads LD_PRELOAD in front of the shim; unit test
Preload.SanitizerRuntimesStayFirst.)
Each must exit as the plain run did, print the same standard output, print no
AddressSanitizer or LeakSanitizer report, and leave a trace with the copies.
--skip REASON prints REASON and exits 77 (the compiler has no ASan).
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
    ap.add_argument("--other")
    ap.add_argument("--asan-runtime")
    ap.add_argument("--skip", default="")
    ap.add_argument("--expect-stderr", default="")
    ap.add_argument("--ignore-line", default="")
    ap.add_argument("rest", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    if a.skip:
        print(f"SKIP: {a.skip}")
        return 77
    if (a.other is None) == (a.asan_runtime is None):
        ap.error("give --other LIB or --asan-runtime RUNTIME")
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

    def record(name: str, *opts: str) -> list[str]:
        return [a.cuxfer, "record", *opts, "-o", str(work / name), "--"] + cmd

    # name: (argv, environment added, text its stderr must hold)
    variants: dict[str, tuple[list[str], dict[str, str], str]] = {}
    if a.other is not None:
        alone = run(cmd, {**base, "LD_PRELOAD": a.other})
        check(alone.returncode == plain.returncode and output(alone) == output(plain),
              f"{a.other} alone changed the program: exit {alone.returncode}: {alone.stderr[-600:]}")
        variants = {
            "after-observe": (record("after-observe", "-q"), {"LD_PRELOAD": a.other}, a.expect_stderr),
            "after-pin": (record("after-pin", "-q", "--rewrite=pin"), {"LD_PRELOAD": a.other}, a.expect_stderr),
            "before-observe": (cmd, {"LD_PRELOAD": f"{a.other}:{shim}",
                                     "CUXFER_OUTPUT_DIR": str(work / "before-observe")}, a.expect_stderr),
            "before-pin": (cmd, {"LD_PRELOAD": f"{a.other}:{shim}:{hooks}", "CUXFER_REWRITE": "pin",
                                 "CUXFER_OUTPUT_DIR": str(work / "before-pin")}, a.expect_stderr),
        }
    else:
        runtime = a.asan_runtime
        # Without -q: record says that it put the runtime first (when the program links it).
        variants["record-observe"] = (record("record-observe"), {},
                                      "first in its library list: preloaded before the shim" if runtime else "")
        variants["record-pin"] = (record("record-pin", "-q", "--rewrite=pin"), {}, "")
        variants["shim-first-pin"] = (cmd, {"LD_PRELOAD": f"{shim}:{hooks}", "CUXFER_REWRITE": "pin",
                                            "ASAN_OPTIONS": ":".join(filter(None, [
                                                base.get("ASAN_OPTIONS", ""), "verify_asan_link_order=0"])),
                                            "CUXFER_OUTPUT_DIR": str(work / "shim-first-pin")}, "")
    for name, (argv, extra, said) in variants.items():
        r = run(argv, {**base, **extra})
        check(r.returncode == plain.returncode, f"{name}: exit {r.returncode}, plain {plain.returncode}: {r.stderr[-800:]}")
        check(output(r) == output(plain),
              f"{name}: output differs:\n--- plain\n{output(plain)[-600:]}\n--- {name}\n{output(r)[-600:]}")
        if said:
            check(said in r.stderr, f"{name}: no '{said}' on stderr: {r.stderr[-600:]}")
        for report in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime does not come first"):
            if report in r.stderr:
                at = r.stderr.index(report)
                check(False, f"{name}: {report}:\n{r.stderr[max(0, at - 200):at + 1500]}")
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
