#!/usr/bin/env python3
"""Python call sites end to end, per CPython version (stdlib only).

  run_python_stacks.py --cuxfer B/bin/cuxfer --shim B/lib/libcuxfer.so
      --libcudart B/simcuda/lib/libcudart.so --python 3.11 --workdir DIR

Runs testapps/python/python_copies.py under `cuxfer record` with that
interpreter on the simulated CUDA and checks, from `cuxfer report --json`:

  - the trace says which interpreter it read ("Python frames in call stacks:
    CPython 3.N"), and that the thread state came from _PyRuntime (3.10-3.14)
    with no disagreement with the C API;
  - every copy is reported at the line of the script that made it (the
    script's "# site:" markers), with the count the script makes: from the
    main thread, from a threading.Thread, from 4 threads at once, all with
    the GIL released (ctypes);
  - a copy made inside a package under site-packages/ is reported at the
    script's line that called it, and with --python-frames all at the
    package's own line;
  - each site's stack runs from the copy out to its thread's start, Python
    frames in call order; `report --stack`, the HTML report and the Perfetto
    export show them;
  - the script's memset keeps its calling function only (one native frame,
    in the Perfetto export), and its Python line with CUXFER_MEMSET_STACKS=1;
  - CUXFER_PYTHON_STACKS=0: no Python frame anywhere;
  - `cuxfer record --policy` with an entry naming the worker function of
    python_copies.py (its line off by 3, as after an edit of the script):
    exactly the worker's copies are staged, the others pass through.

With --interpreter /usr/bin/python3.11 --static (Debian's, libpython linked
into the executable) the same checks: the interpreter is found in the
executable as well as in a shared libpython.

From 3.14 (concurrent.interpreters), testapps/python/subinterpreter_copies.py:
the main interpreter's copies at their lines, a subinterpreter's (on the main
thread and on its own) recorded with native frames, and one note says so. And
where the interpreter has the JIT (Debian's 3.14 and 3.15 do), with
PYTHON_JIT=1, testapps/python/jit_copies.py's copies from a loop the JIT runs
at their line, under their caller's.

With --debug-build (python3.Nd, whose objects are laid out otherwise) the
same as --unsupported, the note saying it is a debug build.

With --unsupported (a version the shim has no layout for, 3.9 here): the
script runs and its copies are recorded with native sites, no Python frame,
and one note says why.

Exit status: 0 pass, 1 fail, 77 skip (no CPython of that version here: the
test says so).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from e2e_util import find_python, fresh_dir, site_markers, verdict

SKIP = 77
ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "testapps" / "python" / "python_copies.py"
FRAMEWORK = ROOT / "testapps" / "python" / "site-packages" / "fakeframework.py"
SUBINTERPRETERS = ROOT / "testapps" / "python" / "subinterpreter_copies.py"
JIT_APP = ROOT / "testapps" / "python" / "jit_copies.py"
THREADS, COPIES = 4, 20
fails: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        fails.append(what)
        print("FAIL: " + what, flush=True)


def run(cmd: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    print("+ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)


def record_script(args, python: str, script: Path, script_args: list[str], out: Path, ok: str,
                  extra_env: dict | None = None, policy: Path | None = None) -> Path | None:
    """`script` under cuxfer record: it must exit 0 printing `ok`, and leave one trace (returned)."""
    env = dict(os.environ, **(extra_env or {}))
    r = run([args.cuxfer, "record", "-q", "--shim", args.shim, "-o", str(out),
             *(["--policy", str(policy)] if policy else []), "--", python, str(script), *script_args], env)
    check(r.returncode == 0 and ok in r.stdout, f"{script.name} under cuxfer record: exit {r.returncode}, "
          f"stdout {r.stdout[-300:]!r}, stderr {r.stderr[-600:]!r}")
    traces = sorted(out.glob("cuxfer-*.trace"))
    check(len(traces) == 1, f"one trace in {out}, got {[t.name for t in traces]}")
    return traces[0] if len(traces) == 1 else None


def record(args, python: str, out: Path, extra_env: dict | None = None, policy: Path | None = None) -> Path | None:
    return record_script(args, python, APP, [args.libcudart, str(THREADS), str(COPIES)], out, "python_copies: OK",
                         extra_env, policy)


def report(args, trace: Path, *extra: str) -> dict:
    r = run([args.cuxfer, "report", "--json", *extra, str(trace)])
    check(r.returncode == 0, f"cuxfer report --json {' '.join(extra)}: exit {r.returncode}: {r.stderr[-400:]}")
    return json.loads(r.stdout) if r.returncode == 0 else {}


def python_sites(rep: dict) -> dict[tuple[str, int], dict]:
    out = {}
    for s in rep.get("callsites", []):
        chosen = [f for f in s["stack"] if f.get("python") and f["file"] == s["file"] and f["line"] == s["line"]]
        if chosen:
            out[(os.path.realpath(s["file"]), s["line"])] = s
    return out


def check_subinterpreters(args, python: str, out: Path) -> None:
    """3.14+: copies in a subinterpreter are recorded with native frames and
    one note; the main interpreter's keep their lines."""
    trace = record_script(args, python, SUBINTERPRETERS, [args.libcudart], out, "subinterpreter_copies: OK")
    if not trace:
        return
    rep = report(args, trace)
    sites = python_sites(rep)
    lines = site_markers(SUBINTERPRETERS)
    script = os.path.realpath(SUBINTERPRETERS)
    for name in ("before", "after"):
        got = sites.get((script, lines[name]), {}).get("calls")
        check(got == 3, f"subinterpreters: 3 copies at subinterpreter_copies.py:{lines[name]} ({name}), got {got}")
    total = sum(s["calls"] for s in rep.get("callsites", []))
    check(total == 16, f"subinterpreters: all 16 copies recorded, got {total}")
    notes = [n for p in rep.get("processes", []) for n in p.get("notes", [])]
    check(any("copies made on a subinterpreter's thread" in n for n in notes),
          f"subinterpreters: a note says their copies carry native frames only; notes: {notes}")
    without = [n for n in rep.get("notes", []) if "have no Python line" in n]
    check(len(without) == 1 and without[0].startswith("10 of the 16 copies Python programs made have no Python line"),
          f"subinterpreters: the report counts their 10 copies among those with no Python line: {without}")


def check_jit(args, python: str, out: Path) -> None:
    """3.14+ built with the JIT: copies from a loop the JIT runs keep their
    line and their caller's (the JIT leaves the frame's instruction pointer
    where the interpreter would have it when it calls out)."""
    avail = subprocess.run([python, "-c", "import sys; print(bool(getattr(sys, '_jit', None) and sys._jit.is_available()))"],
                           capture_output=True, text=True)
    if avail.stdout.strip() != "True":
        print(f"CPython {args.python} has no JIT: its check skipped")
        return
    trace = record_script(args, python, JIT_APP, [args.libcudart], out, "jit_copies: OK True", {"PYTHON_JIT": "1"})
    if not trace:
        return
    rep = report(args, trace)
    lines, script = site_markers(JIT_APP), os.path.realpath(JIT_APP)
    site = python_sites(rep).get((script, lines["hot"]), {})
    check(site.get("calls") == 400, f"JIT: 400 copies at jit_copies.py:{lines['hot']}, got {site.get('calls')}")
    callers = [f["line"] for f in site.get("stack", []) if f.get("python") and f.get("function") == "outer"]
    check(callers == [lines["outer"]], f"JIT: the caller outer() at line {lines['outer']}, got {callers}")


def memset_stacks(args, trace: Path, out: Path) -> list[list[str]]:
    """The stacks of the memsets' sites in the Perfetto export of `trace`."""
    run([args.cuxfer, "export", "--perfetto", str(out), str(trace)])
    if not out.exists():
        check(False, f"cuxfer export --perfetto {out} wrote nothing")
        return []
    doc = json.loads(out.read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    calls = [e for e in events if e.get("cat") == "memset" and e.get("ph") == "X"]
    check(len(calls) == 1, f"one memset call in the Perfetto export of {trace.name}, got {len(calls)}")
    return [e["args"]["stack"] for e in calls if "stack" in e.get("args", {})]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--libcudart", required=True)
    ap.add_argument("--python", required=True, help="major.minor")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--unsupported", action="store_true", help="a version without a layout: a note, no frames")
    ap.add_argument("--debug-build", action="store_true",
                    help="that version's debug build (python3.Nd): a note, no frames")
    ap.add_argument("--interpreter", help="this interpreter (of --python's version), not the first found")
    ap.add_argument("--static", action="store_true",
                    help="the interpreter must have libpython linked in (no libpython*.so loaded)")
    args = ap.parse_args()
    python = find_python(args.python, debug=args.debug_build) if not args.interpreter else (
        args.interpreter if os.access(args.interpreter, os.X_OK) else None)
    if not python:
        kind = " debug build" if args.debug_build else ""
        print(f"no CPython {args.python}{kind} on this machine ({args.interpreter or 'PATH, pyenv, /usr/bin'}): skipped")
        return SKIP
    if args.static:
        ldd = subprocess.run(["ldd", python], capture_output=True, text=True)
        if "libpython" in ldd.stdout:
            print(f"{python} loads a shared libpython, not the case this test is for: skipped")
            return SKIP
    print(f"CPython {args.python}: {python}")
    work = fresh_dir(args.workdir)
    app_lines, fw_lines = site_markers(APP), site_markers(FRAMEWORK)
    app = os.path.realpath(APP)
    expected = {"upload": 4, "download": 2, "worker": THREADS * COPIES, "framework": 1, "generator": 3, "coroutine": 2}
    total = sum(expected.values())

    trace = record(args, python, work / "on")
    if not trace:
        return verdict(fails)
    rep = report(args, trace)
    notes = [n for p in rep.get("processes", []) for n in p.get("notes", [])]
    if args.unsupported or args.debug_build:
        why = "is a debug build" if args.debug_build else ": no frame layout"
        check(any(f"no Python frames in call stacks: CPython {args.python}{' ' if args.debug_build else ''}{why}" in n
                  for n in notes), f"a note saying CPython {args.python} {why.strip(': ')}; notes: {notes}")
        frames = [f for s in rep.get("callsites", []) for f in s["stack"] if f.get("python")]
        check(not frames, f"no Python frame for an unsupported version, got {len(frames)}")
        check(sum(s["calls"] for s in rep.get("callsites", [])) == total, f"all {total} copies recorded")
        return verdict(fails)
    check(any(f"Python frames in call stacks: CPython {args.python}" in n for n in notes),
          f"a note naming CPython {args.python}; notes: {notes}")
    check(any("under at most 8 native frames (CUXFER_PYTHON_NATIVE_DEPTH)" in n for n in notes),
          f"the note says how many native frames a Python stack keeps; notes: {notes}")
    # 3.10-3.14: the thread state is read from _PyRuntime once a read agreed
    # with the C API (3.13+: the fields from the row of its headers, the frames
    # from its debug offsets). Frames were captured, so a thread with a state
    # checked the read: no disagreement note means it agreed (and later copies
    # used it). 3.15 keeps it in a C thread-local: through the C API.
    runtime_read = tuple(int(x) for x in args.python.split(".")) < (3, 15)
    check(any(("thread state read from _PyRuntime once a read agrees with the C API" if runtime_read
               else "thread state through the C API") in n for n in notes),
          f"the note says how the thread state is read; notes: {notes}")
    check(not any("did not read as its layout says" in n for n in notes),
          f"no layout disagreed with this interpreter; notes: {notes}")
    check(not any("have no Python line" in n for n in rep.get("notes", [])),
          f"every copy of python_copies.py has its Python line: no note says otherwise; {rep.get('notes')}")
    sites = python_sites(rep)
    for s in sites.values():
        native = [f for f in s["stack"] if not f.get("python")]
        check(1 <= len(native) <= 8, f"{s['location']}: 1 to 8 native frames under the Python ones, got {len(native)}")
    for name, calls in expected.items():
        s = sites.get((app, app_lines[name]))
        check(s is not None, f"a call site at python_copies.py:{app_lines[name]} ({name}); sites: "
              f"{[(x['location'], x['calls']) for x in rep.get('callsites', [])]}")
        if s:
            check(s["calls"] == calls, f"{name}: {calls} calls at its line, got {s['calls']}")
            names = [f["function"] for f in s["stack"] if f.get("python")]
            outermost = ("<module>", "_bootstrap", "Thread._bootstrap")  # the main thread, or a Thread's
            check(bool(names) and names[-1] in outermost, f"{name}: the stack reaches its thread's start: {names}")
    check(sum(s["calls"] for s in rep.get("callsites", [])) == total,
          f"{total} copies in all, every one at a site; got {[(s['location'], s['calls']) for s in rep.get('callsites', [])]}")
    # A generator's frame and a coroutine's are walked like any: each under
    # what resumed it (main(); the event loop, back to asyncio.run in main()).
    for name, inner in (("generator", ["uploads", "main"]), ("coroutine", ["fetch"])):
        s = sites.get((app, app_lines[name]))
        names = [f["function"] for f in s["stack"] if f.get("python")] if s else []
        check(names[:len(inner)] == inner and "main" in names,
              f"{name}: its frame, then what resumed it, down to main(): {names}")
    upload = sites.get((app, app_lines["upload"]))
    if upload:
        names = [f["function"] for f in upload["stack"] if f.get("python")]
        check(names[:2] in (["upload", "main"], ["upload", "Loader.batch"], ["upload", "batch"]),
              f"upload's Python frames innermost first: {names}")

    all_rep = report(args, trace, "--python-frames", "all")
    fw = python_sites(all_rep).get((os.path.realpath(FRAMEWORK), fw_lines["framework_internal"]))
    check(fw is not None and fw["calls"] == 1,
          "--python-frames all: the package's own line names its copy; sites: "
          f"{[(x['location'], x['calls']) for x in all_rep.get('callsites', [])]}")

    text = run([args.cuxfer, "report", "--stack", str(trace)])
    check(text.returncode == 0 and f"python_copies.py:{app_lines['worker']} in worker" in text.stdout
          and "py  " in text.stdout, f"report --stack shows the Python frames: {text.stdout[-800:]}")

    # The mixed stack in the Perfetto export (first call of each site) and in the HTML report.
    pf, html = work / "trace.json", work / "report.html"
    run([args.cuxfer, "export", "--perfetto", str(pf), str(trace)])
    run([args.cuxfer, "report", "--html", str(html), str(trace)])
    if pf.exists():
        doc = json.loads(pf.read_text())
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        stacks = [e["args"]["stack"] for e in events if "stack" in e.get("args", {})]
        check(any(f"py {app}:{app_lines['worker']} in worker" in s for st in stacks for s in st),
              f"the Perfetto export carries the worker's mixed stack: {stacks[:2]}")
    else:
        check(False, "cuxfer export --perfetto wrote nothing")
    # Memsets: the calling function only by default (record/site_capture.h), the whole stack on request.
    ms = memset_stacks(args, trace, work / "memset.json")
    check(len(ms) == 1 and len(ms[0]) == 1 and not ms[0][0].startswith("py "),
          f"the memset's site is one native frame by default: {ms}")
    full = record(args, python, work / "memset_stacks", {"CUXFER_MEMSET_STACKS": "1"})
    if full:
        ms = memset_stacks(args, full, work / "memset_full.json")
        check(len(ms) == 1 and f"py {app}:{app_lines['memset']} in main" in ms[0],
              f"CUXFER_MEMSET_STACKS=1: the memset's stack names its Python line: {ms}")
    check(html.exists() and f"python_copies.py:{app_lines['upload']} in upload" in html.read_text()
          and "<details>" in html.read_text(), "the HTML report lists Python sites with their stacks")

    # A policy entry for a Python site, its line a stale hint.
    pol = work / "policy.json"
    pol.write_text(json.dumps({"schema": "cuxfer.policy/1", "entries": [
        {"site": {"kind": "call", "python": {"file": "python_copies.py", "function": "worker",
                                             "line": app_lines["worker"] + 3}}, "path": "stage"}]}))
    pol_trace = record(args, python, work / "policy", policy=pol)
    if pol_trace:
        rw = report(args, pol_trace).get("rewrite", {})
        check(rw.get("staged_calls") == THREADS * COPIES and rw.get("passthrough_pageable_calls") == total - THREADS * COPIES,
              f"--policy on worker(): {THREADS * COPIES} staged, {total - THREADS * COPIES} passed through; got {rw}")

    # Fewer native frames under the Python ones: the same sites, the same counts.
    shallow = record(args, python, work / "shallow", {"CUXFER_PYTHON_NATIVE_DEPTH": "2"})
    if shallow:
        sh_sites = python_sites(report(args, shallow))
        for name, calls in expected.items():
            s = sh_sites.get((app, app_lines[name]))
            check(s is not None and s["calls"] == calls,
                  f"CUXFER_PYTHON_NATIVE_DEPTH=2: {name} still {calls} calls at its line, got {s and s['calls']}")
            if s:
                native = [f for f in s["stack"] if not f.get("python")]
                check(1 <= len(native) <= 2, f"CUXFER_PYTHON_NATIVE_DEPTH=2: {name} has {len(native)} native frames")

    if tuple(int(x) for x in args.python.split(".")) >= (3, 14):
        check_subinterpreters(args, python, work / "subinterpreters")
        check_jit(args, python, work / "jit")
    off = record(args, python, work / "off", {"CUXFER_PYTHON_STACKS": "0"})
    if off:
        off_rep = report(args, off)
        frames = [f for s in off_rep.get("callsites", []) for f in s["stack"] if f.get("python")]
        check(not frames, f"CUXFER_PYTHON_STACKS=0: no Python frame, got {len(frames)}")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
