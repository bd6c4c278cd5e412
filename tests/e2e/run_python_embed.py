#!/usr/bin/env python3
"""A program that embeds CPython (testapps/python_embed.cpp) running
testapps/python/embedded_copies.py, under `cuxfer record`, on the simulated
CUDA. The program copies before it starts the interpreter, its script copies
through the program's own module (the GIL released), and it copies once more
after the interpreter finalized.

  run_python_embed.py --cuxfer B/bin/cuxfer --shim B/lib/libcuxfer.so --readelf READELF
      --workdir DIR --mode shared|hidden|stripped|plugin|extension -- APP

  APP: B/testapps/sim/python_embed-MODE, or for plugin
  B/testapps/sim/plugin_host libpython_embed_plugin.so python_embed_run; for extension, the
  interpreter whose headers built B/testapps/sim/pyext/embedded_cuda.<soabi>.so

  shared    linked against libpython3.X.so (the interpreter's symbols exported by it)
  hidden    libpython3.X.a linked in, no --export-dynamic: dlsym sees none of the
            interpreter's symbols; the program's .symtab names them
  stripped  the hidden program stripped: nothing names them
  plugin    plugin_host dlopen()s python_embed as a plugin (linking libpython3.X.so) with the
            default RTLD_LOCAL: the plugin, its libcudart and libpython outside the global scope;
            then dlclose()s it, libpython with it
  extension the program's module alone, as an extension module linking libcudart.so, imported
            by a plain python (RTLD_LOCAL, as Python loads every extension): the runtime outside
            the global scope, as for a pybind11 CUDA extension built against CUDA::cudart

Checks: the program ran as without cuxfer (its own data checks, exit 0); every
copy recorded; shared and hidden: each script copy at its script line and
function with its exact count (the "# site:" markers: the first copy after the
interpreter started has its line), the copies before and after the
interpreter at main() with no Python frame, and the note naming the
interpreter (hidden: that its symbols came from the program's symbol table);
stripped: no Python frame anywhere and one note saying why; plugin: the
copies reach the real CUDA runtime outside the global scope, the note names
the libpython it read, and a second says its library was unloaded. The premise of
each mode is checked on the file itself (readelf), so that a build that
exported the symbols after all fails here instead of passing untested.
Exit 0 pass, 1 fail, 77 skip (CMake found no CPython to embed: it says so).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from e2e_util import command_after_dashes, fresh_dir, site_markers, verdict

SKIP = 77
ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "testapps" / "python" / "embedded_copies.py"
PYEXT = Path()  # set in main(): the directory of the extension module (mode extension)
# site -> (function, copies); from the script's docstring
EXPECTED = {"upload": ("upload", 15), "download": ("download", 4), "module": ("<module>", 2)}
NATIVE = 2  # main()'s copy before Py_Initialize and its copy after Py_FinalizeEx
fails: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        fails.append(what)
        print("FAIL: " + what, flush=True)


def readelf(tool: str, *args: str) -> str:
    return subprocess.run([tool, "-W", *args], capture_output=True, text=True, check=True).stdout


def check_premise(tool: str, app: list[str], mode: str) -> None:
    if mode == "extension":
        ext = next(iter(sorted(PYEXT.glob("embedded_cuda.*.so"))), None)
        check(ext is not None and "libcudart" in readelf(tool, "-d", str(ext)),
              f"{PYEXT}: no embedded_cuda extension linking libcudart.so")
        return
    if mode == "plugin":
        host, plugin = app[0], os.path.join(os.path.dirname(app[0]), app[1])
        needed = readelf(tool, "-d", host)
        check("libpython" not in needed and "libcudart" not in needed,
              f"{host}: the host links libpython or libcudart itself")
        check("libpython" in readelf(tool, "-d", plugin), f"{plugin}: does not link a shared libpython")
        return
    exe = app[0]
    if mode == "shared":
        needed = readelf(tool, "-d", exe)
        check("libpython" in needed, f"{exe}: does not link a shared libpython:\n{needed}")
        return
    exported = re.search(r"\sPy_IsInitialized(@\S+)?$", readelf(tool, "--dyn-syms", exe), re.M)
    sections = readelf(tool, "-S", exe)
    check(not exported, f"{exe}: exports Py_IsInitialized, so the hidden case is not tested")
    check(".PyRuntime" in sections, f"{exe}: no .PyRuntime section (CPython before 3.11?)")
    has_symtab = " .symtab " in sections
    check(has_symtab == (mode == "hidden"), f"{exe}: .symtab {'missing' if mode == 'hidden' else 'present'}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--readelf", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--mode", required=True, choices=("shared", "hidden", "stripped", "plugin", "extension"))
    ap.add_argument("--pyext", default="", help="extension: the directory holding embedded_cuda.<soabi>.so")
    ap.add_argument("app", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    app = command_after_dashes(a.app)
    if not app or app[0] == "none":
        print(f"python_embed-{a.mode}: not built (no CPython headers and library to embed, or no "
              f"libpython3.X.a; see testapps/CMakeLists.txt): skipping")
        return SKIP
    global PYEXT
    PYEXT = Path(app[0]).parent / "pyext" if a.mode != "extension" else Path(a.pyext)
    native_copies = 0 if a.mode == "extension" else NATIVE  # an extension's copies are all the script's
    work = fresh_dir(a.workdir)
    check_premise(a.readelf, app, a.mode)

    out = work / "trace"
    cmd = [a.cuxfer, "record", "-q", "--shim", a.shim, "-o", str(out), "--", *app, str(SCRIPT)]
    print("+ " + " ".join(cmd), flush=True)
    env = dict(os.environ, PYTHONPATH=str(PYEXT)) if a.mode == "extension" else None
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    if "cudaMalloc failed (no GPU?)" in r.stderr and "cannot find the real" not in r.stderr:
        print(f"python_embed-{a.mode}: no GPU (the module's cudaMalloc failed at import): skipping")
        return SKIP
    check(r.returncode == 0 and "embedded_copies: OK" in r.stdout and
          (a.mode == "extension" or "python_embed: OK" in r.stdout),
          f"python_embed-{a.mode} under cuxfer record: exit {r.returncode}, stdout {r.stdout[-300:]!r}, "
          f"stderr {r.stderr[-600:]!r}")
    rep_run = subprocess.run([a.cuxfer, "report", "--json", str(out)], capture_output=True, text=True, timeout=120)
    check(rep_run.returncode == 0, f"cuxfer report --json: exit {rep_run.returncode}: {rep_run.stderr[-400:]}")
    if rep_run.returncode != 0:
        return verdict(fails)
    rep = json.loads(rep_run.stdout)

    total = sum(n for _, n in EXPECTED.values()) + native_copies
    check(rep["totals"]["calls"] == total and rep["calls_without_callsite"] == 0,
          f"{total} copies, each at a site; got {rep['totals']['calls']}, {rep['calls_without_callsite']} without")
    notes = [n for p in rep["processes"] for n in p["notes"] if "Python frames" in n or "CPython" in n]
    python_frames = [f for s in rep["callsites"] for f in s["stack"] if f.get("python")]

    if a.mode == "stripped":
        check(not python_frames, f"stripped: no Python frame, got {python_frames[:3]}")
        check(len(notes) == 1 and "embeds CPython" in notes[0] and "stripped" in notes[0],
              f"stripped: one note saying the program embeds CPython and was stripped, got {notes}")
        return verdict(fails)

    lines = site_markers(SCRIPT)
    got = {}
    for s in rep["callsites"]:
        if s["stack"] and any(f.get("python") for f in s["stack"]):
            got[(os.path.basename(s["file"]), s["line"], s["function"])] = got.get(
                (os.path.basename(s["file"]), s["line"], s["function"]), 0) + s["calls"]
    want = {(SCRIPT.name, lines[site], fn): n for site, (fn, n) in EXPECTED.items()}
    check(got == want, f"Python sites: want {want}, got {got}")
    native = [s for s in rep["callsites"] if not any(f.get("python") for f in s["stack"])]
    check(sum(s["calls"] for s in native) == native_copies and all(s["file"].endswith("python_embed.cpp") for s in native),
          f"the copies before and after the interpreter: {native_copies} in python_embed.cpp, no Python frame; got "
          f"{[(s['location'], s['calls']) for s in native]}")
    without = [n for n in rep.get("notes", []) if "have no Python line" in n]
    if native_copies:
        check(len(without) == 1 and without[0].startswith(f"{native_copies} of the {total} copies Python programs "
                                                          f"made have no Python line") and "on 1 thread)" in without[0],
              f"the report says {native_copies} copies (main's) have no Python line: {without}")
    else:
        check(not without, f"every copy has its Python line: no note says otherwise: {without}")
    named = [n for n in notes if n.startswith("Python frames in call stacks: CPython 3.")]
    check(len(named) == 1, f"one note naming the interpreter, got {notes}")
    from_symtab = any("its symbols from the program's symbol table" in n for n in named)
    check(from_symtab == (a.mode == "hidden"),
          f"{a.mode}: the note {'says' if a.mode == 'hidden' else 'does not say'} the symbols came from the "
          f"program's symbol table: {named}")
    local = any("loaded outside the global scope (dlopen's RTLD_LOCAL)" in n and "libpython" in n for n in named)
    check(local == (a.mode == "plugin"), f"{a.mode}: the note {'names' if a.mode == 'plugin' else 'does not name'} "
          f"a libpython outside the global scope: {named}")
    unloaded = [n for n in notes if "the interpreter's library was unloaded (dlclose)" in n]
    check(len(unloaded) == (1 if a.mode == "plugin" else 0),
          f"{a.mode}: {'one note' if a.mode == 'plugin' else 'no note'} that the interpreter's library was "
          f"unloaded: {unloaded}")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
