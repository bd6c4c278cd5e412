#!/usr/bin/env python3
"""Summarise bench/pattern_sweep runs (docs/benchmarks.md, "Pattern sweep").

  python3 bench/pattern_sweep_summary.py [options] RAW...

RAW files hold the lines bench/run_pattern_sweep.sh writes: each line of
pattern_sweep's output prefixed with `mode=<mode> round=<r> `, and the cells
the runs were to print (`pattern_sweep --list`) prefixed with
`mode=expected round=0 `. Per cell it
prints the median over rounds of each mode's median call_us / done_us, the
ratios rewrite/baseline, the ratio to the pinned cell of the same run mode, the
baseline's round-to-round spread (noise), and flags:

  SLOW  a rewrite mode (rewrite, rewrite_nocupti) slower than 1.05 x baseline by
        the caller's clock: done_us for sync cells, call_us and done_us for async
  +NS   a pinned cell (host memory the rewrite does not change) where the rewrite
        adds more than 150 ns over observe mode (same metrics). Compared with
        rewrite_nocupti when it ran (CUPTI off in both), else with rewrite, whose
        CUPTI (1-3 us a copy) is then part of the difference.

A flag whose excess is within the baseline's spread between rounds is marked
`~`; it still counts.

Options:
  --modes LIST     the modes run, in order (default: as found)
  --rounds N       rounds each mode should have (for --check), numbered from
  --first-round M  (default 1); without --rounds, the rounds found
  --expected FILE  `cell ...` lines (pattern_sweep --list): the cells each run must
                   print (default: the raw files' expected lines, else every cell seen)
  --check          exit 1 unless every mode x round printed every expected cell,
                   check=ok, and its end line
  --bars           exit 3 if any cell is flagged
  --summary FILE   also write the per-cell summary (.json: JSON, else TSV)
Exit status: 0; 1 a data mismatch (check=FAIL) or, with --check, a missing cell;
3 with --bars, a flagged cell; 2 bad arguments.
"""
import argparse
import json
import math
import statistics
import sys
from collections import defaultdict

HOSTS = ["fresh", "reused", "reused_write", "reused_memset", "pinned"]
STREAMS = ["legacy", "ptds", "idle", "busy"]
SLOW_RATIO = 1.05
PINNED_ADD_US = 0.150
REWRITE_MODES = ("rewrite", "rewrite_nocupti")


def kv_of(line):
    return dict(f.split("=", 1) for f in line.split() if "=" in f)


def cell_key(kv):
    return (int(kv["size"]), kv["sync"], kv["dir"], kv["host"], kv["stream"])


def key_str(k):
    return f"size={k[0]} sync={k[1]} dir={k[2]} host={k[3]} stream={k[4]}"


def size_name(n):
    for unit, sh in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << sh and n % (1 << sh) == 0:
            return f"{n >> sh}{unit}"
    return f"{n}B"


def med(v):
    return statistics.median(v) if v else float("nan")


def fmt(x, w=8, prec=2):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return f"{'-':>{w}}"
    if abs(x) >= 1e5:
        return f"{x:>{w}.0f}"
    return f"{x:>{w}.{prec}f}"


def main():
    ap = argparse.ArgumentParser(add_help=True)
    ap.add_argument("raw", nargs="+")
    ap.add_argument("--modes")
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--first-round", type=int, default=1)
    ap.add_argument("--expected")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--bars", action="store_true")
    ap.add_argument("--summary")
    a = ap.parse_args()

    # (mode, key) -> {"call": [...], "done": [...], ...} one value per round
    vals = defaultdict(lambda: defaultdict(list))
    seen = defaultdict(set)   # (mode, round) -> keys with check=ok
    failed = []               # check=FAIL cells and mismatch lines
    finished = set()          # (mode, round) with the end line
    modes_found, rounds_found = [], set()
    expected_raw = set()
    for path in a.raw:
        for line in open(path, errors="replace"):
            kv = kv_of(line)
            mode, rnd = kv.get("mode"), kv.get("round")
            if mode is None or rnd is None:
                continue
            if mode == "expected":  # the runner's copy of `pattern_sweep --list`
                if " cell " in line:
                    expected_raw.add(cell_key(kv))
                continue
            if mode not in modes_found:
                modes_found.append(mode)
            rounds_found.add(rnd)
            body = line.split(" ", 2)[2] if line.count(" ") >= 2 else ""
            if body.startswith("cell "):
                k = cell_key(kv)
                if kv.get("check") != "ok":
                    failed.append(f"{mode} round {rnd}: {key_str(k)} check={kv.get('check')}")
                    continue
                seen[(mode, rnd)].add(k)
                for f in ("call_us", "done_us", "event_us", "gbps", "busy_us"):
                    if f in kv:
                        vals[(mode, k)][f].append(float(kv[f]))
            elif body.startswith("mismatch "):
                failed.append(f"{mode} round {rnd}: {body.strip()}")
            elif body.startswith("# pattern_sweep: done"):
                finished.add((mode, rnd))

    modes = a.modes.split(",") if a.modes else modes_found
    rc = 0
    if failed:
        print(f"pattern_sweep: DATA CHECK FAILED ({len(failed)} lines):", file=sys.stderr)
        for f in failed[:20]:
            print("  " + f, file=sys.stderr)
        rc = 1

    expected = sorted(expected_raw) if expected_raw else None
    if a.expected:
        expected = [cell_key(kv_of(l)) for l in open(a.expected) if l.startswith("cell ")]
    if a.check:
        rounds = ([str(r) for r in range(a.first_round, a.first_round + a.rounds)] if a.rounds
                  else sorted(rounds_found, key=int))
        want = expected if expected is not None else sorted({k for s in seen.values() for k in s})
        problems = []
        if not want:
            problems.append("no cell at all")
        for m in modes:
            for r in rounds:
                miss = [k for k in want if k not in seen[(m, r)]]
                if miss:
                    problems.append(f"{m} round {r}: {len(miss)} of {len(want)} cells missing, e.g. {key_str(miss[0])}")
                if (m, r) not in finished:
                    problems.append(f"{m} round {r}: no end line (the run did not finish)")
        if problems:
            print("pattern_sweep: --check failed:", file=sys.stderr)
            for p in problems[:20]:
                print("  " + p, file=sys.stderr)
            rc = 1
        else:
            print(f"check: every one of {len(want)} cells printed by each of {len(modes)} modes x {len(rounds)} round(s), data ok")

    keys = sorted({k for (m, k) in vals},
                  key=lambda k: (k[0], k[1] != "sync", k[2] != "H2D", STREAMS.index(k[4]) if k[4] in STREAMS else 9,
                                 HOSTS.index(k[3]) if k[3] in HOSTS else 9))
    base = "baseline" if "baseline" in modes else None
    obs = "observe" if "observe" in modes else None
    rws = [m for m in REWRITE_MODES if m in modes]
    add_mode = "rewrite_nocupti" if "rewrite_nocupti" in modes else ("rewrite" if "rewrite" in modes else None)

    def m_of(mode, k, f):
        return med(vals[(mode, k)][f]) if mode else float("nan")

    def metrics(k):
        return ["done_us"] if k[1] == "sync" else ["call_us", "done_us"]

    rows = []
    for k in keys:
        row = {"key": key_str(k), "size": k[0], "sync": k[1], "dir": k[2], "host": k[3], "stream": k[4]}
        for m in modes:
            for f in ("call_us", "done_us", "event_us", "gbps", "busy_us"):
                v = m_of(m, k, f)
                if not math.isnan(v):
                    row[f"{m}.{f}"] = v
        noise = 0.0
        if base:
            for f in metrics(k):
                v = vals[(base, k)][f]
                if len(v) > 1 and med(v) > 0:
                    noise = max(noise, (max(v) - min(v)) / med(v))
        row["noise"] = noise
        flags = []
        for rw in rws:
            for f in ("call_us", "done_us"):
                b, x = m_of(base, k, f), m_of(rw, k, f)
                if base and b > 0 and not math.isnan(x):
                    ratio = x / b
                    row[f"{rw}/baseline.{f}"] = ratio
                    if f in metrics(k) and ratio > SLOW_RATIO:
                        flags.append({"bar": "slow", "mode": rw, "metric": f, "ratio": ratio,
                                      "within_noise": ratio - 1 <= noise})
        if k[3] == "pinned" and obs and add_mode:
            for f in metrics(k):
                o, x = m_of(obs, k, f), m_of(add_mode, k, f)
                if not (math.isnan(o) or math.isnan(x)):
                    row[f"{add_mode}-observe.{f}"] = x - o
                    if x - o > PINNED_ADD_US:
                        flags.append({"bar": "pinned_add", "mode": add_mode, "metric": f, "add_us": x - o,
                                      "within_noise": base is not None and o > 0 and (x - o) / o <= noise})
        pin = (k[0], k[1], k[2], "pinned", k[4])
        for m in [base] + rws:
            if m and k[3] != "pinned":
                p, x = m_of(m, pin, "done_us"), m_of(m, k, "done_us")
                if p > 0 and not math.isnan(x):
                    row[f"{m}/pinned.done_us"] = x / p
        row["flags"] = flags
        rows.append(row)

    # The table.
    n_rounds = len(rounds_found)
    print()
    print(f"pattern sweep: median over {n_rounds} round(s) of each run's per-cell medians, µs by the caller's clock"
          f" (modes: {', '.join(modes)})")
    print("  done = call start .. stream sync after it; on stream=busy done includes the queued device work"
          " (busy_us in the raw lines); rw = rewrite" + (", rwn = rewrite_nocupti" if "rewrite_nocupti" in rws else ""))
    print("  ratios: rw/b = rewrite / baseline (call, done); /pin = done / the pinned cell's done in the same run mode;"
          " noise = baseline's spread between rounds")
    short = {"rewrite": "rw", "rewrite_nocupti": "rwn"}
    hdr = f"{'size':>6} {'sync':>5} {'dir':>3} {'stream':>6} {'host':>13} |{'b.call':>9}{'b.done':>9}"
    if obs:
        hdr += f"{'obs.done':>9}"
    for rw in rws:
        s = short[rw]
        hdr += f" |{s + '.call':>9}{s + '.done':>9}{s + '/b c':>7}{s + '/b d':>7}"
    hdr += f" |{'b/pin':>6}" + "".join(f"{short[rw] + '/pin':>7}" for rw in rws) + f"{'noise':>7}  flags"
    print(hdr)
    for row in rows:
        k = (row["size"], row["sync"], row["dir"], row["host"], row["stream"])
        line = f"{size_name(k[0]):>6} {k[1]:>5} {k[2]:>3} {k[4]:>6} {k[3]:>13} |"
        line += fmt(row.get(f"{base}.call_us"), 9) + fmt(row.get(f"{base}.done_us"), 9)
        if obs:
            line += fmt(row.get(f"{obs}.done_us"), 9)
        for rw in rws:
            line += " |" + fmt(row.get(f"{rw}.call_us"), 9) + fmt(row.get(f"{rw}.done_us"), 9)
            line += fmt(row.get(f"{rw}/baseline.call_us"), 7) + fmt(row.get(f"{rw}/baseline.done_us"), 7)
        line += " |" + fmt(row.get(f"{base}/pinned.done_us"), 6)
        for rw in rws:
            line += fmt(row.get(f"{rw}/pinned.done_us"), 7)
        line += f"{row['noise'] * 100:>6.1f}%"
        fl = []
        for f in row["flags"]:
            mark = "~" if f["within_noise"] else ""
            m = short.get(f["mode"], f["mode"]) + "." + f["metric"].replace("_us", "")
            fl.append(f"{mark}SLOW {m}={f['ratio']:.2f}" if f["bar"] == "slow"
                      else f"{mark}+NS {m}=+{f['add_us'] * 1000:.0f}ns")
        print(line + ("  " + ", ".join(fl) if fl else ""))

    flagged = [r for r in rows if r["flags"]]
    slow = [r for r in rows if any(f["bar"] == "slow" for f in r["flags"])]
    add = [r for r in rows if any(f["bar"] == "pinned_add" for f in r["flags"])]
    quiet = [r for r in flagged if all(f["within_noise"] for f in r["flags"])]
    print()
    if rws and base:
        print(f"bar 'no cell slower than {SLOW_RATIO:.2f}x its no-cuxfer median' ({', '.join(rws)}): "
              f"{'met' if not slow else f'{len(slow)} of {len(rows)} cells flagged'}")
    else:
        print("bar 'no cell slower than 1.05x': not evaluated (needs baseline and a rewrite mode)")
    if obs and add_mode:
        caveat = "" if add_mode == "rewrite_nocupti" else \
            " [rewrite has CUPTI on, observe off: the difference includes CUPTI's own cost; add --modes ...,rewrite_nocupti]"
        n_pin = sum(1 for r in rows if r["host"] == "pinned")
        print(f"bar 'copies the rewrite does not change (pinned) add <= {PINNED_ADD_US * 1000:.0f} ns over observe' "
              f"({add_mode}): {'met' if not add else f'{len(add)} of {n_pin} pinned cells flagged'}{caveat}")
    else:
        print("bar 'pinned cells add <= 150 ns over observe': not evaluated (needs observe and a rewrite mode)")
    if flagged:
        print(f"  {len(quiet)} of the {len(flagged)} flagged cells are flagged only within the baseline's "
              f"round-to-round spread (~)")
    if a.summary:
        if a.summary.endswith(".json"):
            with open(a.summary, "w") as f:
                json.dump({"schema": "cuxfer.pattern_sweep_summary/1", "modes": modes, "rounds": n_rounds,
                           "slow_ratio": SLOW_RATIO, "pinned_add_us": PINNED_ADD_US, "cells": rows}, f, indent=1)
        else:
            cols = ["size", "sync", "dir", "host", "stream"]
            extra = sorted({c for r in rows for c in r if c not in cols + ["key", "flags"]})
            with open(a.summary, "w") as f:
                f.write("\t".join(cols + extra + ["flags"]) + "\n")
                for r in rows:
                    fl = ";".join(
                        (("~" if x["within_noise"] else "") + x["bar"] + ":" + x["mode"] + "." + x["metric"] + "=" +
                         (f"{x['ratio']:.4f}" if x["bar"] == "slow" else f"+{x['add_us']:.4f}us"))
                        for x in r["flags"])
                    f.write("\t".join([str(r[c]) for c in cols] +
                                      [(f"{r[c]:.6g}" if isinstance(r.get(c), float) else "") for c in extra] +
                                      [fl]) + "\n")
        print(f"summary written to {a.summary}")
    if rc == 0 and a.bars and flagged:
        rc = 3
    return rc


if __name__ == "__main__":
    sys.exit(main())
