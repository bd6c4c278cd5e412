#!/usr/bin/env python3
"""NVTX ranges end to end (testapps/nvtx_ranges.cpp on the simulated CUDA).

  run_nvtx.py --cuxfer CUXFER --counter LIBNVTX_COUNTER --workdir DIR -- APP

Records the app (nested ranges, a second thread, a range open across a fork,
a domain with a registered string, a wide-character name, a name that is not
UTF-8, one pop too many) and checks: the report's per-range totals exactly
(copies, bytes, pageable bytes, classes), the note about the extra pop,
`report --range` for a name, a nested path and a domain range (exact totals)
and for a name no range has (exit 1, one line), the Perfetto export's range
tracks, the range CSV and HTML table, `cuxfer check` entries per range, CUXFER_NVTX=0 (no ranges), and an NVTX tool already named in
NVTX_INJECTION64_PATH (libnvtx_counter.so) chained: it still sees every push
and pop, and the ranges are still exact. Exit 0 pass, 1 fail.
"""
import argparse
import csv as csvmod
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from e2e_util import command_after_dashes, fresh_dir, verdict

BAD = "bad\ufffd\ufffdname"
# path -> (copies, bytes, pageable bytes), a range's nested ranges included
EXPECTED = {
    "forked": (2, 2 * (32 << 10), 2 * (32 << 10)),
    "load": (5, 2 * (1 << 20) + 3 * (64 << 10), 2 * (1 << 20) + 3 * (64 << 10)),
    "load / decode": (3, 3 * (64 << 10), 3 * (64 << 10)),
    "worker": (4, 4 * (128 << 10), 0),
    "cuxfer-test::step": (2, 2 * (256 << 10), 2 * (256 << 10)),
    BAD: (1, 8 << 10, 0),
    "wide \u2713": (1, 16 << 10, 16 << 10),
}


def record(cuxfer, out, app, env):
    run = subprocess.run([cuxfer, "record", "-q", "-o", str(out), "--", *app], env=env, capture_output=True,
                         text=True, timeout=120)
    print(run.stdout, run.stderr, sep="\n")
    return run


def report_json(cuxfer, out, *extra):
    r = subprocess.run([cuxfer, "report", "--json", *extra, str(out)], capture_output=True, text=True)
    return r, (json.loads(r.stdout) if r.returncode == 0 else None)


def check_ranges(rep, fails, label):
    got = {g["path"]: (g["calls"], g["bytes"], g["pageable_bytes"]) for g in rep.get("ranges", [])}
    if got != EXPECTED:
        fails.append(f"{label}: ranges {got}, want {EXPECTED}")
    for g in rep.get("ranges", []):
        if g["depth"] != g["path"].count(" / ") + 1:
            fails.append(f"{label}: {g['path']} at depth {g['depth']}")
    if rep["totals"]["calls"] != sum(v[0] for k, v in EXPECTED.items() if " / " not in k) + 1:
        fails.append(f"{label}: {rep['totals']['calls']} copies in all, want the ranges' and one outside")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--counter", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--docs", help="docs/sqlite.md: its bytes_by_nvtx_range query is run on the export")
    ap.add_argument("app", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    app = command_after_dashes(a.app)
    work = fresh_dir(a.workdir)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUXFER_", "NVTX_"))}
    fails = []

    out = work / "plain"
    run = record(a.cuxfer, out, app, env)
    if run.returncode == 77:  # the GPU tier's build of the app, on a machine without a GPU
        print("no GPU: skipping")
        return 77
    if run.returncode != 0 or "nvtx_ranges: OK" not in run.stdout:
        return verdict([f"the app failed under cuxfer record (exit {run.returncode})"])
    if len(list(out.glob("*.trace"))) != 2:
        fails.append(f"{len(list(out.glob('*.trace')))} traces, want 2 (parent, fork child)")
    r, rep = report_json(a.cuxfer, out)
    if not rep:
        return verdict([f"report --json failed: {r.stderr}"])
    check_ranges(rep, fails, "report")
    decode = next((g for g in rep["ranges"] if g["path"] == "load / decode"), None)
    if decode and decode["classes"] != [{"class": "H2D pageable", "calls": 3, "bytes": 3 * (64 << 10)}]:
        fails.append(f"load / decode classes {decode['classes']}")
    notes = [n for p in rep["processes"] for n in p.get("notes", [])]
    if not any(n == "nvtx: 1 NVTX range pops without an open range were ignored" for n in notes):
        fails.append(f"no note of the extra pop: {notes}")
    text = subprocess.run([a.cuxfer, "report", str(out)], capture_output=True, text=True).stdout
    if "NVTX ranges" not in text or "    decode" not in text:
        fails.append("the text report has no NVTX range section with decode nested under load")
    csv_rows = subprocess.run([a.cuxfer, "report", "--ranges-csv", str(out)], capture_output=True,
                              text=True).stdout.splitlines()
    rows = list(csvmod.DictReader(csv_rows))
    got_csv = {r["path"]: (int(r["calls"]), int(r["bytes"]), int(r["pageable_bytes"])) for r in rows}
    if got_csv != EXPECTED or [r["depth"] for r in rows if r["path"] == "load / decode"] != ["2"]:
        fails.append(f"--ranges-csv: {got_csv}")
    html = work / "report.html"
    subprocess.run([a.cuxfer, "report", "--html", str(html), str(out)], capture_output=True, check=True)
    page = html.read_text()
    if "<h2>NVTX ranges</h2>" not in page or "title='load / decode'" not in page:
        fails.append("the HTML report has no NVTX range table with load / decode")

    for name, (calls, nbytes, _) in (("load", EXPECTED["load"]), ("load / decode", EXPECTED["load / decode"]),
                                     ("decode", EXPECTED["load / decode"]),
                                     ("cuxfer-test::step", EXPECTED["cuxfer-test::step"])):
        r, sub = report_json(a.cuxfer, out, "--range", name)
        if not sub or (sub["totals"]["calls"], sub["totals"]["bytes"]) != (calls, nbytes):
            fails.append(f"--range {name!r}: {sub and sub['totals']} (stderr {r.stderr.strip()!r}), want {calls} "
                         f"copies, {nbytes} bytes")
        elif not any(re.match(rf"--range {re.escape(name)}: \d+ of \d+ calls ran inside it", n) for n in sub["notes"]):
            fails.append(f"--range {name!r}: no note of what was kept: {sub['notes']}")
    r, _ = report_json(a.cuxfer, out, "--range", "no such range")
    lines = r.stderr.strip().splitlines()
    if r.returncode != 1 or len(lines) != 1 or "no call ran inside" not in lines[0]:
        fails.append(f"--range of an unknown name: exit {r.returncode}, stderr {r.stderr!r}")

    # Budgets per range (cuxfer check): one kept, one broken, exact lines.
    budget = work / "budget.json"
    budget.write_text(json.dumps({"schema": "cuxfer.budget/1", "entries": [
        {"nvtx_range": "load", "max_bytes": EXPECTED["load"][1], "max_copies": 5},
        {"nvtx_range": "load / decode", "max_copies": 2, "forbid_findings": ["async_pageable"]},
        {"nvtx_range": "worker", "max_pageable_bytes": 0}]}))
    c = subprocess.run([a.cuxfer, "check", "--budget", str(budget), str(out)], capture_output=True, text=True)
    want = ("over budget: entries[1] NVTX range load / decode: copies: measured 3, limit 2\n"
            "cuxfer check: 1 limit(s) of 5 exceeded (budget " + str(budget) + ")\n")
    if c.returncode != 1 or c.stdout != want:
        fails.append(f"check with range entries: exit {c.returncode}, {c.stdout!r}, want exit 1, {want!r}")

    # The SQLite export: each call's range stack, and docs/sqlite.md's per-range query.
    db = work / "ranges.db"
    subprocess.run([a.cuxfer, "export", "--sqlite", str(db), str(out)], check=True, capture_output=True)
    con = sqlite3.connect(db)
    by_path = dict(((p, (n, b)) for p, n, b in con.execute(
        "SELECT r.path, count(*), sum(c.bytes) FROM calls c JOIN nvtx_ranges r ON r.id = c.nvtx_range "
        "WHERE c.kind = 'copy' GROUP BY r.path")))
    own = {p: (v[0], v[1]) for p, v in EXPECTED.items()}
    own["load"] = (own["load"][0] - own["load / decode"][0], own["load"][1] - own["load / decode"][1])
    if by_path != own:
        fails.append(f"SQLite calls per range stack {by_path}, want {own}")
    if a.docs:
        query = re.search(r"<!-- query: bytes_by_nvtx_range -->\s*```sql\n(.*?)```", Path(a.docs).read_text(), re.S)
        got = {r[0]: (r[1], r[2]) for r in con.execute(query.group(1))} if query else None
        want_names = {p.split(" / ")[-1]: (v[0], v[1]) for p, v in EXPECTED.items()}
        if got != want_names:
            fails.append(f"docs/sqlite.md's bytes_by_nvtx_range: {got}, want {want_names}")
    con.close()

    perfetto = work / "trace.json"
    subprocess.run([a.cuxfer, "export", "--perfetto", str(perfetto), str(out)], check=True, capture_output=True)
    slices = [e for e in json.loads(perfetto.read_text())["traceEvents"] if e.get("cat") == "nvtx"]
    names = {e["name"] for e in slices}
    want = {"forked", "load", "decode", "worker", "cuxfer-test::step", BAD, "wide \u2713"}
    if names != want:
        fails.append(f"Perfetto range slices {sorted(names)}, want {sorted(want)}")

    off = work / "off"
    record(a.cuxfer, off, app, {**env, "CUXFER_NVTX": "0"})
    _, rep_off = report_json(a.cuxfer, off)
    if not rep_off or rep_off.get("ranges"):
        fails.append(f"CUXFER_NVTX=0: ranges {rep_off and rep_off.get('ranges')}, want none")

    chained = work / "chained"
    run = record(a.cuxfer, chained, app, {**env, "NVTX_INJECTION64_PATH": a.counter})
    counts = sorted(re.findall(r"nvtx_counter: pid=\d+ pushes=(\d+) pops=(\d+)", run.stdout))
    if counts != [("1", "1"), ("5", "7")]:
        fails.append(f"the chained NVTX tool saw {counts}, want pushes/pops 1/1 (child) and 5/7 (parent)")
    _, rep_chained = report_json(a.cuxfer, chained)
    if rep_chained:
        check_ranges(rep_chained, fails, "chained")

    # diff --range: the same range of two runs of the same program.
    d = subprocess.run([a.cuxfer, "diff", "--json", "--range", "load", str(out), str(chained)], capture_output=True,
                       text=True)
    try:
        dj = json.loads(d.stdout)
        base_calls, new_calls = dj["base"]["totals"]["calls"], dj["new"]["totals"]["calls"]
    except (ValueError, KeyError) as e:
        base_calls = new_calls = None
        fails.append(f"diff --range load: exit {d.returncode}, {e}: {d.stdout[:300]!r} {d.stderr!r}")
    if base_calls is not None and (base_calls, new_calls) != (5, 5):
        fails.append(f"diff --range load: {base_calls} and {new_calls} calls, want 5 and 5")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
