#!/usr/bin/env python3
"""Differential run of one app with and without the pinned rewrite (stdlib only).

Runs the app in each variant:
  plain    the app alone, no shim
  record   cuxfer record (observe only; CUXFER_REWRITE removed, --rewrite=off when the option exists)
  rewrite  cuxfer record --rewrite=pin (or CUXFER_REWRITE=pin in the environment when the
           launcher has no --rewrite option)
Every variant must exit 0; the record variants must write a trace that `cuxfer report --json`
reads. With --checksum, every variant must print a line `checksum=<hex>` and all of them
must print the same one: the rewrite may change speed, never data. With --not-fewer KEY,
every variant must print `KEY=<hex>`, a set of bits (e.g. which calls returned without
waiting), and hold every bit the plain run holds: the shim may add to it, never take away.
With --rewrite-bits KEY=HEX the rewrite variant's set must hold HEX: what the rewrite itself
is for (e.g. a call that must return at once under it).

Exit status: 0 pass, 1 fail, 77 skip (the app printed "no GPU" and exited 77, or no driver).

  run_rewrite_diff.py --cuxfer build/bin/cuxfer --checksum -- build/testapps/sim/rewrite_exactness-simshared 16M
"""
from __future__ import annotations

import argparse
import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from e2e_util import run_diagnosed

SKIP = 77
TRACE_MAGIC = b"CUXFERTR"
CHECKSUM = re.compile(r"checksum=([0-9a-fA-F]+)")


def find_traces(d: Path) -> list[Path]:
    out = []
    for p in sorted(d.rglob("*")):
        if p.is_file():
            with p.open("rb") as f:
                if f.read(8) == TRACE_MAGIC:
                    out.append(p)
    return out


def has_rewrite_option(cuxfer: str) -> bool:
    r = subprocess.run([cuxfer, "help", "record"], capture_output=True, text=True, timeout=60)
    return "--rewrite" in (r.stdout + r.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--tier", choices=["sim", "gpu"], default="sim")
    ap.add_argument("--variants", default="plain,record,rewrite", help="comma list of plain, record, rewrite")
    ap.add_argument("--checksum", action="store_true", help="all variants must print the same checksum=<hex>")
    ap.add_argument("--not-fewer", metavar="KEY",
                    help="every variant's KEY=<hex> bit set must contain the plain run's")
    ap.add_argument("--rewrite-bits", metavar="KEY=HEX",
                    help="the rewrite variant's KEY=<hex> bit set must contain HEX (what the rewrite itself must do)")
    ap.add_argument("--workdir", help="output directory (recreated); default: a fresh temporary one")
    ap.add_argument("--timeout", type=int, default=540, help="seconds per run")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- APP [ARGS...]")
    a = ap.parse_args()
    cmd = a.command[1:] if a.command and a.command[0] == "--" else a.command
    if not cmd:
        ap.error("no app given")
    if not os.access(cmd[0], os.X_OK):
        print(f"FAIL: {cmd[0]} is not an executable (not built?)")
        return 1
    if a.tier == "gpu":
        try:
            ctypes.CDLL("libcuda.so.1")
        except OSError:
            print("no GPU: libcuda.so.1 cannot be loaded (no NVIDIA driver): SKIP")
            return SKIP

    out = Path(a.workdir) if a.workdir else Path(tempfile.mkdtemp(prefix="cuxfer-rewrite-diff-"))
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    option = has_rewrite_option(a.cuxfer)
    failures: list[str] = []
    sums: dict[str, str] = {}
    masks: dict[str, int] = {}
    if a.rewrite_bits and a.not_fewer and a.rewrite_bits.split("=")[0] != a.not_fewer:
        ap.error("--rewrite-bits and --not-fewer name the same KEY")
    key = a.not_fewer or (a.rewrite_bits.split("=")[0] if a.rewrite_bits else None)
    mask_re = re.compile(re.escape(key) + r"=([0-9a-fA-F]+)") if key else None
    for variant in a.variants.split(","):
        env = dict(os.environ)
        # Hermetic: a machine profile of the developer's own (cuxfer calibrate) would
        # change the rewrite's thresholds and the estimates; tests that want one set it.
        env.setdefault("CUXFER_PROFILE_DIR", "/nonexistent/cuxfer-test-profiles")
        env.pop("CUXFER_REWRITE", None)
        vdir = out / variant
        vdir.mkdir()
        if variant == "plain":
            run = list(cmd)
        elif variant in ("record", "rewrite"):
            run = [a.cuxfer, "record", "-q", "-o", str(vdir)]
            if option:
                run.append("--rewrite=" + ("pin" if variant == "rewrite" else "off"))
            elif variant == "rewrite":
                env["CUXFER_REWRITE"] = "pin"
            run += ["--", *cmd]
        else:
            ap.error(f"unknown variant {variant!r}")
        shown = ("CUXFER_REWRITE=pin " if env.get("CUXFER_REWRITE") else "") + " ".join(run)
        print(f"+ [{variant}] {shown}", flush=True)
        try:
            p = run_diagnosed(run, a.timeout, env=env)
        except subprocess.TimeoutExpired:
            failures.append(f"{variant}: timed out after {a.timeout} s")
            continue
        sys.stdout.write(p.stdout)
        if p.stderr:
            sys.stdout.write("".join(f"  [stderr] {line}\n" for line in p.stderr.splitlines()[-30:]))
        sys.stdout.flush()
        if p.returncode == SKIP:
            print(f"no GPU: the app skipped (exit 77) in variant {variant}")
            return SKIP
        if p.returncode != 0:
            failures.append(f"{variant}: exit status {p.returncode}")
            continue
        if a.checksum:
            m = CHECKSUM.findall(p.stdout)
            if not m:
                failures.append(f"{variant}: no checksum=<hex> line")
            else:
                sums[variant] = m[-1].lower()
        if mask_re:
            m = mask_re.findall(p.stdout)
            if not m:
                failures.append(f"{variant}: no {key}=<hex> line")
            else:
                masks[variant] = int(m[-1], 16)
        if variant != "plain":
            traces = find_traces(vdir)
            if not traces:
                failures.append(f"{variant}: no trace written in {vdir}")
            else:
                r = subprocess.run([a.cuxfer, "report", "--json", *map(str, traces)], capture_output=True,
                                   text=True, timeout=120)
                if r.returncode != 0:
                    failures.append(f"{variant}: cuxfer report --json failed ({r.returncode}): {r.stderr.strip()}")
    if a.checksum and len(set(sums.values())) > 1:
        failures.append("checksums differ: " + ", ".join(f"{k}={v}" for k, v in sums.items()))
    if a.rewrite_bits and "rewrite" in masks:
        want = int(a.rewrite_bits.split("=")[1], 16)
        if masks["rewrite"] & want != want:
            failures.append(f"rewrite: {key}={masks['rewrite']:x} lacks bits {want & ~masks['rewrite']:x} the rewrite "
                            f"must set")
    if a.not_fewer and "plain" in masks:
        for variant, bits in masks.items():
            lost = masks["plain"] & ~bits
            if lost:
                failures.append(f"{variant}: {a.not_fewer}={bits:x} lacks bits {lost:x} of the plain run's "
                                f"{masks['plain']:x}")
    if failures:
        print(f"FAIL: {os.path.basename(cmd[0])}, output in {out}")
        for f in failures:
            print("  -", f)
        return 1
    what = f" checksum {next(iter(sums.values()))} in every variant" if sums else ""
    print(f"PASS: {os.path.basename(cmd[0])}: {a.variants}{what}"
          + ("" if option else " (rewrite through CUXFER_REWRITE: the launcher has no --rewrite)"))
    if not a.workdir:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
