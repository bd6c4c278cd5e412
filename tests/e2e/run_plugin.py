#!/usr/bin/env python3
"""CUDA work in a plugin loaded RTLD_LOCAL (stdlib only).

  run_plugin.py --cuxfer B/bin/cuxfer --shim B/lib/libcuxfer.so --rewrite off|pin --workdir DIR
      -- B/testapps/sim/plugin_host libpageable_loop_plugin.so plugin_main

plugin_host dlopen()s pageable_loop built as a plugin, with dlopen's default
RTLD_LOCAL: the plugin and the libcudart.so it links are outside the global
scope, where the shim's dlsym(RTLD_NEXT) cannot see them (a Python extension
module is loaded so too). Its calls still bind to the shim's hooks, which
must reach the real runtime: before, every call failed ("cannot find the
real cudaMalloc") and the program with it. Then the host unloads the plugin.
Under `cuxfer record --rewrite=off` or `=pin`, checks: the program
exits 0 with its own data checks passed; nothing says a real function is
missing; the report's copies are exact (4 H2D and 4 D2H pageable of 2 MiB)
and their sites are named by function and line in pageable_loop.cpp, though
the plugin was unloaded before the trace ended; with the rewrite, its H2D
copies were staged. Exit 0 pass, 1 fail.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

from e2e_util import command_after_dashes, fresh_dir, verdict

N, SIZE = 4, 2 << 20
fails: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        fails.append(what)
        print("FAIL: " + what, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    for k in ("--cuxfer", "--shim", "--workdir"):
        ap.add_argument(k, required=True)
    ap.add_argument("--rewrite", choices=("off", "pin"), required=True)
    ap.add_argument("app", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    app = command_after_dashes(a.app)
    work = fresh_dir(a.workdir)
    for rewrite in (a.rewrite,):
        out = work / rewrite
        cmd = [a.cuxfer, "record", "-q", f"--rewrite={rewrite}", "--shim", a.shim, "-o", str(out), "--", *app,
               str(N), "2M"]
        print("+ " + " ".join(cmd), flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        check(r.returncode == 0 and "pageable_loop: OK" in r.stdout,
              f"{rewrite}: exit {r.returncode}, stdout {r.stdout[-300:]!r}, stderr {r.stderr[-600:]!r}")
        check("cannot find the real" not in r.stderr, f"{rewrite}: the shim missed a real function: {r.stderr!r}")
        rep_run = subprocess.run([a.cuxfer, "report", "--json", str(out)], capture_output=True, text=True,
                                 timeout=120)
        check(rep_run.returncode == 0, f"{rewrite}: cuxfer report --json: exit {rep_run.returncode}")
        if rep_run.returncode != 0:
            continue
        rep = json.loads(rep_run.stdout)
        classes = {f"{c['direction']} {c['memory']}": (c["calls"], c["bytes"]) for c in rep["classes"]}
        want = {"H2D pageable": (N, N * SIZE), "D2H pageable": (N, N * SIZE)}
        check(classes == want, f"{rewrite}: classes {classes}, want {want}")
        sites = [(s["function"], s["file"].rsplit("/", 1)[-1], s["calls"]) for s in rep["callsites"]]
        check(len(sites) == 2 and all("cuxfer_plugin_main" in f and file == "pageable_loop.cpp" and n == N
                                      for f, file, n in sites),
              f"{rewrite}: two sites in pageable_loop.cpp of {N} copies each, symbolized; got {sites}")
        if rewrite == "pin":
            staged = rep["rewrite"]["staged_calls"] + rep["rewrite"]["registered_calls"]
            check(staged >= N, f"pin: the plugin's copies went through the rewrite: {rep['rewrite']}")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
