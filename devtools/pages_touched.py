#!/usr/bin/env python3
"""How many distinct 4 KiB pages one intercepted copy call touches, per object.

    python3 devtools/pages_touched.py [--build-dir build] [--calls 12] [--modes baseline,shim]
                                      [--env K=V ...] [--keep DIR]

Why pages: on a GPU machine, a copy made after the program has walked through
a lot of memory (a training step, bandwidthTest's memset) finds the shim's
code, data and page-table entries evicted. Each distinct page the hook touches
is then a TLB miss with a page walk, and each distinct line a cache miss: a
cold call costs what it touches, not what it executes. A warm storm cannot show
this (pattern_sweep's reused_memset cells and call_overhead --evict do, on the
GPU); the count of pages can be taken anywhere.

How: bench/call_overhead --mark under valgrind's lackey (--trace-mem=yes), on
the simulated driver (build/simcuda/lib), without and with libcuxfer.so
preloaded. The benchmark stores 2i / 2i+1 into a marker around its i-th timed
call; every instruction fetch (I) and data access (L, S, M) between the two is
one call's. Its /proc/self/maps (printed at exit) names the objects. Printed,
per copy case and mode: the median over calls (the first two of each case
left out) of the distinct code and data pages, and per object the pages of the
median call. The simulated driver's own pages stand for the real driver's only
in that both modes have them; the difference between the modes is the shim's.

--check (the ctest smoke): exit 1 unless every case was cut into its calls and
the shim's code shows in every shim call and in no baseline call.

Needs valgrind. Exit: 0 measured; 1 a run failed (or --check failed); 2 bad
arguments; 77 no valgrind.
"""
import argparse
import bisect
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict

CASES = ["htod_pinned", "htod_pageable", "dtoh_pinned", "dtoh_pageable",
         "htod_async_pinned", "htod_async_pageable"]
PAGE = 4096
LINE = 64


def parse_maps(text):
    """[(start, end, name)] from /proc/self/maps lines; anonymous ranges by kind."""
    out = []
    for line in text.splitlines():
        m = re.match(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \d+\s*(.*)$", line)
        if not m:
            continue
        name = m.group(4).strip() or "[anon]"
        out.append((int(m.group(1), 16), int(m.group(2), 16), os.path.basename(name)))
    out.sort()
    return out


def symbols_of(path, base):
    """[(start, end, name)] of an object's functions and variables, loaded at base."""
    try:
        out = subprocess.run(["nm", "-C", "--defined-only", "-S", path], capture_output=True, text=True).stdout
    except OSError:
        return []
    syms = []
    for line in out.splitlines():
        f = line.split(None, 3)
        if len(f) == 4 and f[2] in "tTdDbBrR":
            syms.append((base + int(f[0], 16), base + int(f[0], 16) + max(int(f[1], 16), 1), f[3]))
    syms.sort()
    return syms


def range_at(ranges, addr):
    """The (start, end, name) range, of ranges sorted by start, that holds addr; None if none."""
    i = bisect.bisect_right(ranges, addr, key=lambda r: r[0]) - 1
    return ranges[i] if i >= 0 and addr < ranges[i][1] else None


def range_of(ranges, addr):
    """The name of the range that holds addr; None if none."""
    r = range_at(ranges, addr)
    return r[2] if r else None


def name_in(syms, addr):
    name = range_of(syms, addr)
    return name[:70] if name else "?"


def object_of(maps, addr):
    return range_of(maps, addr) or "[unmapped]"


def calls_of(log_path, mark):
    """Yields (code_lines, data_lines) per marked call, in order: the distinct
    64-byte lines touched (pages follow from them)."""
    mark_hex = f"{mark:08x}"
    inside = False
    code, data = set(), set()
    with open(log_path, "r", errors="replace") as f:
        for line in f:
            if len(line) < 4 or line[0] == "=":
                continue
            kind = line[:2].strip()
            comma = line.find(",")
            if comma < 0:
                continue
            try:
                addr = int(line[3:comma], 16)
            except ValueError:
                continue
            if kind == "S" and line[3:comma].lstrip("0") == mark_hex.lstrip("0"):
                if not inside:
                    inside, code, data = True, set(), set()
                else:
                    inside = False
                    yield code, data
                continue
            if not inside:
                continue
            if kind == "I":
                code.add(addr // LINE)
            elif kind in ("L", "S", "M"):
                data.add(addr // LINE)


def run_mode(args, mode, tmp):
    env = dict(os.environ)
    build = os.path.abspath(args.build_dir)
    env["LD_LIBRARY_PATH"] = os.path.join(build, "simcuda", "lib") + (
        ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    if mode != "baseline":
        env["LD_PRELOAD"] = os.path.join(build, "lib", "libcuxfer.so")
        env["CUXFER_OUTPUT_DIR"] = os.path.join(tmp, "traces-" + mode)
        os.makedirs(env["CUXFER_OUTPUT_DIR"], exist_ok=True)  # the shim records only into a folder that exists
        for kv in args.env:
            k, _, v = kv.partition("=")
            env[k] = v
    log = os.path.join(tmp, f"lackey-{mode}.log")
    cmd = ["valgrind", "--tool=lackey", "--trace-mem=yes", f"--log-file={log}",
           os.path.join(build, "bench", "call_overhead"), "-n", str(args.calls), "-w", "3", "--mark"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    shim_path, shim_base = None, None
    for line in p.stderr.splitlines():
        f = line.split()
        if len(f) >= 6 and f[5].endswith("/libcuxfer.so") and int(f[2], 16) == 0:
            shim_path, shim_base = f[5], int(f[0].split("-")[0], 16)
            break
    if p.returncode != 0:
        sys.stderr.write(f"pages_touched: {mode}: call_overhead exited {p.returncode}\n{p.stderr[-2000:]}\n")
        return None
    m = re.search(r"^mark=(0x[0-9a-f]+)", p.stdout, re.M)
    if not m:
        sys.stderr.write(f"pages_touched: {mode}: no mark= line\n")
        return None
    if mode != "baseline" and not any(f.endswith(".trace") for f in os.listdir(env["CUXFER_OUTPUT_DIR"])):
        sys.stderr.write(f"pages_touched: {mode}: the shim wrote no trace (not recording?)\n{p.stderr[-1500:]}\n")
        return None
    maps = parse_maps(p.stderr)
    calls = list(calls_of(log, int(m.group(1), 16)))
    if not args.keep:
        os.unlink(log)
    if len(calls) != args.calls * len(CASES):
        sys.stderr.write(f"pages_touched: {mode}: {len(calls)} marked calls, expected "
                         f"{args.calls * len(CASES)}\n")
        return None
    syms = symbols_of(shim_path, shim_base) if shim_path else []
    pages = lambda lines: {ln * LINE // PAGE for ln in lines}
    per_case = {}
    for ci, case in enumerate(CASES):
        mine = calls[ci * args.calls + 2:(ci + 1) * args.calls]  # the first two: first sight of things
        order = sorted(range(len(mine)), key=lambda i: len(mine[i][0]) + len(mine[i][1]))
        mid = mine[order[len(order) // 2]]
        objs = defaultdict(lambda: [0, 0, 0, 0])  # code pages, code lines, data pages, data lines
        for pg in pages(mid[0]):
            objs[object_of(maps, pg * PAGE)][0] += 1
        for ln in mid[0]:
            objs[object_of(maps, ln * LINE)][1] += 1
        for pg in pages(mid[1]):
            objs[object_of(maps, pg * PAGE)][2] += 1
        for ln in mid[1]:
            objs[object_of(maps, ln * LINE)][3] += 1
        data_pages = []  # (address, lines, mapping, its size, offset in it, libcuxfer.so symbols)
        for pg in sorted(pages(mid[1])):
            a = pg * PAGE
            reg = range_at(maps, a)
            lines = [ln for ln in mid[1] if ln * LINE // PAGE == pg]
            names = sorted({n for n in (name_in(syms, ln * LINE) for ln in lines) if n != "?"})
            data_pages.append((a, len(lines), reg[2] if reg else "[unmapped]", (reg[1] - reg[0]) if reg else 0,
                               (a - reg[0]) if reg else 0, names))
        shim_lines = Counter()
        for ln in mid[0] | mid[1]:
            if object_of(maps, ln * LINE) == "libcuxfer.so":
                shim_lines[name_in(syms, ln * LINE)] += 1
        per_case[case] = {
            "code_pages": statistics.median(len(pages(c)) for c, _ in mine),
            "data_pages": statistics.median(len(pages(d)) for _, d in mine),
            "code_lines": statistics.median(len(c) for c, _ in mine),
            "data_lines": statistics.median(len(d) for _, d in mine),
            "objects": dict(objs),
            "shim_lines": shim_lines,
            "data_page_list": data_pages,
        }
    return per_case


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--calls", type=int, default=12, help="timed calls per case (>= 5)")
    ap.add_argument("--modes", default="baseline,shim", help="baseline and/or shim")
    ap.add_argument("--env", action="append", default=[], metavar="K=V",
                    help="extra environment for the shim mode (repeatable)")
    ap.add_argument("--cases", default="", help="comma list of cases to print (default: all)")
    ap.add_argument("--functions", type=int, default=0, metavar="N",
                    help="also name the N symbols of libcuxfer.so with the most lines touched")
    ap.add_argument("--data-pages", action="store_true",
                    help="list each data page the shim mode's median call touches: its mapping (anonymous ones by "
                         "size), the offset in it, the lines, and the libcuxfer.so variables there")
    ap.add_argument("--check", action="store_true", help="exit 1 unless the shim's code shows where it should")
    ap.add_argument("--keep", metavar="DIR", help="keep the lackey logs in DIR")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if args.calls < 5 or any(m not in ("baseline", "shim") for m in modes) or not modes:
        ap.error("--calls must be >= 5 and --modes a list of baseline, shim")
    if not shutil.which("valgrind"):
        print("pages_touched: no valgrind: skipped")
        return 77
    for need in ("bench/call_overhead", "lib/libcuxfer.so", "simcuda/lib/libcuda.so.1"):
        if not os.path.exists(os.path.join(args.build_dir, need)):
            print(f"pages_touched: {args.build_dir}/{need} not built", file=sys.stderr)
            return 1
    tmp = args.keep or tempfile.mkdtemp(prefix="pages-touched-")
    os.makedirs(tmp, exist_ok=True)
    results = {}
    try:
        for mode in modes:
            r = run_mode(args, mode, tmp)
            if r is None:
                return 1
            results[mode] = r
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    shown = [c for c in args.cases.split(",") if c] or CASES
    print(f"distinct 4 KiB pages and 64-byte lines one call touches (median over calls 3..{args.calls} "
          f"of each case; simulated driver; shim env: {' '.join(args.env) or 'default'})")
    print("per object, of the median call: code pages/lines, data pages/lines")
    for case in shown:
        cells = "  ".join(f"{m}: code {r[case]['code_pages']:g}p {r[case]['code_lines']:g}l, "
                          f"data {r[case]['data_pages']:g}p {r[case]['data_lines']:g}l"
                          for m, r in ((m, results[m]) for m in modes))
        print(f"{case:20s} {cells}")
        for m in modes:
            objs = sorted(results[m][case]["objects"].items(), key=lambda kv: -(kv[1][1] + kv[1][3]))
            print(f"  {m:8s} " + ", ".join(f"{o} {cp}/{cl} {dp}/{dl}" for o, (cp, cl, dp, dl) in objs))
        if args.functions and "shim" in results:
            top = results["shim"][case]["shim_lines"].most_common(args.functions)
            print("  libcuxfer.so lines by symbol: " + ", ".join(f"{n} {c}" for n, c in top))
    if args.data_pages and "shim" in results:
        for case in shown:
            print(f"{case}: data pages of the shim mode's median call")
            for a, nl, name, size, off, names in results["shim"][case]["data_page_list"]:
                print(f"  {a:#014x} {nl:3d} lines  {name} ({size // 1024} KiB) +{off // 1024} KiB"
                      + (f"  {', '.join(names)}" if names else ""))
    if args.check:
        bad = []
        for case in CASES:
            for m in modes:
                shim_code = results[m][case]["objects"].get("libcuxfer.so", [0, 0, 0, 0])[1]
                if (m == "shim") != (shim_code > 0):
                    bad.append(f"{m} {case}: {shim_code} code lines of libcuxfer.so")
        for b in bad:
            print("pages_touched: check failed:", b)
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
