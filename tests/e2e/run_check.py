#!/usr/bin/env python3
"""`cuxfer check` end to end (stdlib only), on the simulated CUDA with
async_streams (4 x 1 MiB each way, pageable and pinned: docs/testapps.md),
whose traffic is exactly known:

  - `check --write-budget` from a recording, which replaces an existing file
    (--force still accepted); `check` of the same traces passes (exit 0), and so does
    `record --check` of a fresh run (bytes and copies are exact across runs);
  - a tightened budget (H2D pageable 3 MiB / 3 copies, async_pageable
    forbidden) fails with exactly its violation lines and exit 1; --junit
    validates against tests/e2e/junit.xsd (xmllint; said when it is missing) and is
    well-formed JUnit (testsuites/testsuite/testcase, tests and failures
    attributes that agree with the elements);
  - `record --check` of an app that exits 3 exits 3, unchecked, and says so;
  - a malformed budget, an NVTX entry and an unknown option: exit 2 and one
    line, no verdict; `record --check` with a malformed budget does not run
    the command;
  - a budget for another program is refused (exit 2) unless --any-program; `record --check`
    refuses it before the app runs.

  run_check.py --cuxfer build/bin/cuxfer --sim build/testapps/sim --workdir DIR

Exit status: 0 pass, 1 fail, 77 skip (the app printed "no GPU" and exited 77).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from e2e_util import fresh_dir, verdict

SKIP = 77
MiB = 1 << 20
fails: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        fails.append(what)
        print("FAIL: " + what, flush=True)


def run(cmd: list[str], env: dict[str, str], show_stdout: bool = True) -> subprocess.CompletedProcess:
    print("+ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    sys.stdout.write((p.stdout if show_stdout else "") + p.stderr)
    return p


def lines(text: str) -> list[str]:
    return [l for l in text.splitlines() if l]


def one_error_line(p: subprocess.CompletedProcess, expected: str, what: str) -> None:
    check(p.returncode == 2, f"{what}: exit {p.returncode}, expected 2")
    check(lines(p.stderr) == [expected], f"{what}: stderr {lines(p.stderr)!r}, expected [{expected!r}]")
    check(p.stdout == "", f"{what}: a verdict was printed: {p.stdout!r}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--sim", required=True, help="directory of the simulated test apps")
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    out = fresh_dir(a.workdir)
    env = dict(os.environ)
    env["CUXFER_PROFILE_DIR"] = "/nonexistent/cuxfer-test-profiles"  # hermetic
    for k in ("CUXFER_REWRITE", "CUXFER_POLICY"):
        env.pop(k, None)
    cuxfer = a.cuxfer
    app = str(Path(a.sim) / "async_streams-simshared")
    program = "async_streams-simshared"

    # A known-good run and its budget.
    p = run([cuxfer, "record", "-q", "-o", str(out / "good"), "--", app, "4", "1M"], env)
    if p.returncode == SKIP:
        return SKIP
    check(p.returncode == 0, f"record exited {p.returncode}")
    budget_path = out / "budget.json"
    p = run([cuxfer, "check", "--write-budget", str(budget_path), str(out / "good")], env)
    check(p.returncode == 0, f"--write-budget exited {p.returncode}")
    budget = json.loads(budget_path.read_text())
    check(budget["schema"] == "cuxfer.budget/1", f"schema {budget.get('schema')!r}")
    check(budget.get("program") == program, f"program {budget.get('program')!r}, expected {program!r}")
    entries = budget["entries"]
    by_class = {e["class"]: (i, e) for i, e in enumerate(entries) if "class" in e}
    run_entry = entries[0]
    check("class" not in run_entry and "site" not in run_entry, "entries[0] is not the run's")
    check(run_entry.get("max_bytes") == 16 * MiB and run_entry.get("max_copies") == 16,
          f"run entry {run_entry!r}: expected 16 copies, 16 MiB")
    check(run_entry.get("max_pageable_bytes") == 8 * MiB, f"run pageable bytes {run_entry.get('max_pageable_bytes')}")
    check("async_pageable" not in run_entry.get("forbid_findings", []), "async_pageable (raised) forbidden")
    check("tiny_storm" in run_entry.get("forbid_findings", []), "tiny_storm (not raised) not forbidden")
    for cls in ("H2D pageable", "D2H pageable", "H2D pinned", "D2H pinned"):
        e = by_class.get(cls, (None, {}))[1]
        check(e.get("max_bytes") == 4 * MiB and e.get("max_copies") == 4, f"{cls}: {e!r}, expected 4 copies, 4 MiB")
    check(sorted(by_class) == sorted(["H2D pageable", "D2H pageable", "H2D pinned", "D2H pinned"]),
          f"classes {sorted(by_class)}")
    check(any("site" in e for e in entries), "no site entry written")

    # An existing file is replaced, as every command's output is (docs/cli.md,
    # "Files the commands write"); --force is still accepted.
    written = budget_path.read_text()
    budget_path.write_text("old\n")
    p = run([cuxfer, "check", "--write-budget", str(budget_path), str(out / "good")], env)
    check(p.returncode == 0 and budget_path.read_text() == written,
          f"--write-budget over an existing file: exit {p.returncode}, {p.stderr!r}")
    p = run([cuxfer, "check", "--write-budget", str(budget_path), "--force", str(out / "good")], env)
    check(p.returncode == 0, f"--write-budget --force exited {p.returncode}")

    # The run keeps its own budget.
    p = run([cuxfer, "check", "--budget", str(budget_path), str(out / "good")], env)
    check(p.returncode == 0, f"check of the good run exited {p.returncode}")
    check(lines(p.stdout)[-1:] == [f"cuxfer check: {budget_path} keeps the budget: "
                                   f"{sum(1 for _ in iter_limits(entries))} limits in {len(entries)} entries"],
          f"check of the good run: {lines(p.stdout)[-1:]!r}")
    check(not any(l.startswith("over budget") for l in lines(p.stdout)), "violations on the good run")

    # A fresh run under record --check (times vary between runs: a wide tolerance).
    loose = out / "loose.json"
    p = run([cuxfer, "check", "--write-budget", str(loose), "--time-tolerance", "100000", str(out / "good")], env)
    check(p.returncode == 0, f"--write-budget --time-tolerance exited {p.returncode}")
    p = run([cuxfer, "record", "-q", "--check", str(loose), "-o", str(out / "again"), "--", app, "4", "1M"], env)
    check(p.returncode == 0, f"record --check of a fresh run exited {p.returncode}")
    check("keeps the budget" in p.stdout, "record --check printed no verdict")

    # Tightened: H2D pageable at 3 MiB / 3 copies, async_pageable forbidden.
    report = json.loads(run([cuxfer, "report", "--json", str(out / "good")], env, show_stdout=False).stdout)
    async_calls = sum(f["calls"] for f in report["findings"] if f["kind"] == "async_pageable")
    check(async_calls > 0, "async_streams raised no async_pageable finding")
    tight = json.loads(budget_path.read_text())
    tight["entries"][0]["forbid_findings"] = ["async_pageable"] + tight["entries"][0]["forbid_findings"]
    i, cls = by_class["H2D pageable"]
    tight["entries"][i]["max_bytes"] = 3 * MiB
    tight["entries"][i]["max_copies"] = 3
    tight_path = out / "tight.json"
    tight_path.write_text(json.dumps(tight, indent=2))
    junit = out / "check.xml"
    p = run([cuxfer, "check", "--budget", str(tight_path), "--junit", str(junit), str(out / "good")], env)
    check(p.returncode == 1, f"tight budget: exit {p.returncode}, expected 1")
    n_limits = sum(1 for _ in iter_limits(tight["entries"]))
    expected = [
        f"over budget: entries[0] run: finding async_pageable: raised ({async_calls} copies), must not appear",
        f"over budget: entries[{i}] H2D pageable: bytes: measured 4194304 (4.00 MiB), limit 3145728 (3.00 MiB)",
        f"over budget: entries[{i}] H2D pageable: copies: measured 4, limit 3",
        f"cuxfer check: 3 limit(s) of {n_limits} exceeded (budget {tight_path})",
    ]
    check(lines(p.stdout) == expected, f"tight budget lines:\n  {lines(p.stdout)!r}\nexpected\n  {expected!r}")

    # JUnit: the structure CI systems read.
    try:
        root = ET.parse(junit).getroot()
    except (ET.ParseError, OSError) as e:
        check(False, f"--junit {junit}: {e}")
        root = None
    if root is not None:
        check(root.tag == "testsuites", f"JUnit root <{root.tag}>")
        suites = root.findall("testsuite")
        check(len(suites) == 1, f"{len(suites)} testsuite elements")
        cases = [c for s in suites for c in s.findall("testcase")]
        failed = [c for c in cases if c.find("failure") is not None]
        check(len(cases) == len(tight["entries"]), f"{len(cases)} testcases for {len(tight['entries'])} entries")
        check(len(failed) == 2, f"{len(failed)} failed testcases, expected 2 (run, H2D pageable)")
        for el in [root] + suites:
            for attr in ("name", "tests", "failures"):
                check(attr in el.attrib, f"<{el.tag}> without {attr}")
            check(el.get("tests") == str(len(cases)), f"<{el.tag} tests={el.get('tests')}>, {len(cases)} testcases")
            check(el.get("failures") == "2", f"<{el.tag} failures={el.get('failures')}>")
        check(all(c.get("name") and c.get("classname") for c in cases), "a testcase without name/classname")
        names = [c.get("name") for c in failed]
        check(names == ["entries[0] run", f"entries[{i}] H2D pageable"], f"failed testcases {names!r}")
        text = failed[1].find("failure").text or ""
        check(text.splitlines() == [expected[1][len("over budget: "):], expected[2][len("over budget: "):]],
              f"failure text {text!r}")

    # JUnit against its schema (tests/e2e/junit.xsd), with xmllint; a copy
    # with a testcase's classname removed must fail, so that a validation
    # that validates nothing cannot pass.
    xsd = Path(__file__).with_name("junit.xsd")
    if shutil.which("xmllint") is None:
        print(f"SKIP (schema only): xmllint not found, {junit} not validated against {xsd} "
              "(Debian: libxml2-utils); its structure was checked above")
    else:
        v = subprocess.run(["xmllint", "--noout", "--schema", str(xsd), str(junit)], capture_output=True, text=True)
        check(v.returncode == 0, f"--junit output does not validate against {xsd.name}: {v.stderr.strip()}")
        broken = out / "check-broken.xml"
        broken.write_text(junit.read_text().replace("<testcase classname=", "<testcase cls=", 1))
        v = subprocess.run(["xmllint", "--noout", "--schema", str(xsd), str(broken)], capture_output=True, text=True)
        check(v.returncode != 0, f"{xsd.name} accepted a testcase without classname: the validation checks nothing")
        print(f"JUnit validated against {xsd.name} (xmllint); a broken copy was refused")

    # The app's own failure stays its own (a budget for that app: one for
    # another program is refused before the app runs, below).
    exit_app = str(Path(a.sim) / "exit_app-simshared")
    exit_budget = out / "exit-budget.json"
    exit_budget.write_text(json.dumps(dict(json.loads(budget_path.read_text()), program="exit_app-simshared")))
    p = run([cuxfer, "record", "-q", "--check", str(exit_budget), "-o", str(out / "exit"), "--", exit_app, "exit", "3"],
            env)
    check(p.returncode == 3, f"record --check of an app exiting 3: exit {p.returncode}")
    check(lines(p.stderr) == [f"cuxfer record: {exit_app} exited with status 3: the budget {exit_budget} was not checked"],
          f"record --check, failing app: stderr {lines(p.stderr)!r}")
    check(p.stdout == "", f"record --check, failing app: a verdict was printed: {p.stdout!r}")

    # Malformed budgets: one line naming the field, exit 2, no verdict.
    bad = out / "bad.json"
    bad.write_text('{"schema": "cuxfer.budget/1", "entries": [{"class": "H2D pageable", "max_bytes": -1}]}')
    p = run([cuxfer, "check", "--budget", str(bad), str(out / "good")], env)
    one_error_line(p, f"cuxfer check: --budget {bad}: entries[0].max_bytes: must be a non-negative integer, got -1",
                   "malformed budget")
    p = run([cuxfer, "record", "-q", "--check", str(bad), "-o", str(out / "notrun"), "--", app, "1", "4K"], env)
    one_error_line(p, f"cuxfer record: --check {bad}: entries[0].max_bytes: must be a non-negative integer, got -1",
                   "record --check, malformed budget")
    check(not list((out / "notrun").glob("*.trace")), "record --check ran the command with a malformed budget")
    nvtx = out / "nvtx.json"
    nvtx.write_text('{"schema": "cuxfer.budget/1", "entries": [{"nvtx_range": "epoch", "max_bytes": 1}]}')
    p = run([cuxfer, "check", "--budget", str(nvtx), str(out / "good")], env)
    # The app pushes no range: the entry is checked against 0 and said.
    check(p.returncode == 0 and "note: entries[0] NVTX range epoch: no copy of the run ran inside this range "
          "(checked against 0)" in p.stdout, f"NVTX range absent from the run: exit {p.returncode}, {p.stdout!r}")
    p = run([cuxfer, "check", "--budget", str(budget_path), "--bogus", str(out / "good")], env)
    one_error_line(p, "cuxfer check: unknown option '--bogus' (try 'cuxfer check --help')", "unknown option")

    # A budget for another program.
    other = json.loads(budget_path.read_text())
    other["program"] = "pageable_loop-simshared"
    other_path = out / "other.json"
    other_path.write_text(json.dumps(other))
    p = run([cuxfer, "check", "--budget", str(other_path), str(out / "good")], env)
    one_error_line(p, f"cuxfer check: {other_path}: the budget is for program 'pageable_loop-simshared', the traces "
                      f"are of '{program}' (--any-program applies it anyway)", "budget for another program")
    p = run([cuxfer, "check", "--budget", str(other_path), "--any-program", str(out / "good")], env)
    check(p.returncode == 0, f"--any-program: exit {p.returncode}, expected 0 (the limits are this run's)")
    check("applied anyway (--any-program)" in p.stderr, "--any-program did not say it applied another program's budget")
    # record --check refuses it before the app runs; --any-program runs it and applies it.
    p = run([cuxfer, "record", "-q", "--check", str(other_path), "-o", str(out / "other"), "--", app, "4", "1M"], env)
    one_error_line(p, f"cuxfer record: --check {other_path}: the budget is for program 'pageable_loop-simshared', "
                      f"which the command does not name (it runs '{program}'); --any-program runs it and applies the "
                      f"budget anyway", "record --check, budget for another program")
    check(not list((out / "other").glob("*.trace")), "record --check ran the app with a budget for another program")
    p = run([cuxfer, "record", "-q", "--check", str(other_path), "--any-program", "-o", str(out / "other"), "--", app,
             "4", "1M"], env)
    # Checked (its times may exceed the budget's on a fresh run: 0 or 1).
    check(p.returncode in (0, 1) and "applied anyway (--any-program)" in p.stderr and
          list((out / "other").glob("*.trace")),
          f"record --check --any-program: exit {p.returncode}, {p.stdout!r} {p.stderr!r}")
    return verdict(fails)


def iter_limits(entries: list[dict]):
    """Each limit of each entry, as the check counts them."""
    for e in entries:
        for k in ("max_bytes", "max_copies", "max_pageable_bytes", "cpu_blocked"):
            if k in e:
                yield k
        yield from e.get("forbid_findings", [])


if __name__ == "__main__":
    sys.exit(main())
