#!/usr/bin/env python3
"""An installed package that is the user's own code names its call sites (stdlib only).

  run_python_installed.py --cuxfer B/bin/cuxfer --shim B/lib/libcuxfer.so
      --libcudart B/simcuda/lib/libcudart.so --workdir DIR

Production code is often installed like a framework. This test copies
testapps/python/installed/userproj into DIR/site-packages/ (as `pip install .`
would) and writes DIR/bin/userproj-train, the console-script stub pip writes,
then runs under `cuxfer record` on the simulated CUDA:

  module   `python -m userproj.train`: every copy at userproj's marked lines
           (the 3 made inside fakeframework at userproj's line that called
           it), and one note naming userproj and `python -m userproj.train`;
  stub     the stub executed directly (the kernel runs it with the
           interpreter as argv[0]): the same, the note naming the stub;
  text     `python -c "...userproj.train.main(...)"`: userproj is not the
           entry, so the copies are at the text's line, no note; with
           `report --python-user userproj` at userproj's lines again.

Exit 0 pass, 1 fail.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from e2e_util import calls_by_line, fresh_dir, recorded_python_app_args, site_markers, verdict

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "testapps" / "python" / "installed" / "userproj"
FRAMEWORK_DIR = ROOT / "testapps" / "python" / "site-packages"
STUB = """#!{python}
# -*- coding: utf-8 -*-
import re
import sys
from userproj.train import main
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit(main())
"""
fails: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        fails.append(what)
        print("FAIL: " + what, flush=True)


def main() -> int:
    a = recorded_python_app_args()
    work = fresh_dir(a.workdir)
    site = work / "lib" / "site-packages"
    shutil.copytree(PROJECT, site / "userproj", ignore=shutil.ignore_patterns("__pycache__"))
    train = site / "userproj" / "train.py"
    marks = site_markers(train)
    stub = work / "bin" / "userproj-train"
    stub.parent.mkdir()
    stub.write_text(STUB.format(python=sys.executable))
    stub.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(site)}
    args = [a.libcudart, str(FRAMEWORK_DIR)]
    text = f"import userproj.train; userproj.train.main({args!r})"
    runs = {
        "module": ([sys.executable, "-m", "userproj.train", *args], "python -m userproj.train"),
        "stub": ([str(stub), *args], f"the console script {stub}"),
        "text": ([sys.executable, "-c", text], None),
    }
    at_project = {(str(train), marks["upload"]): 2, (str(train), marks["framework"]): 3}
    for name, (cmd, how) in runs.items():
        out = work / name
        rec = [a.cuxfer, "record", "-q", "--shim", a.shim, "-o", str(out), "--", *cmd]
        print("+ " + " ".join(rec), flush=True)
        r = subprocess.run(rec, capture_output=True, text=True, env=env, timeout=120)
        check(r.returncode == 0 and "userproj: OK" in r.stdout,
              f"{name}: exit {r.returncode}, stdout {r.stdout[-200:]!r}, stderr {r.stderr[-600:]!r}")
        if r.returncode != 0:
            continue
        variants = [([], how is not None)] + ([(["--python-user", "userproj"], True)] if how is None else [])
        for extra, as_project in variants:
            rep_run = subprocess.run([a.cuxfer, "report", "--json", *extra, str(out)], capture_output=True,
                                     text=True, timeout=120)
            check(rep_run.returncode == 0, f"{name} {extra}: report exit {rep_run.returncode}: {rep_run.stderr[-300:]}")
            if rep_run.returncode != 0:
                continue
            rep = json.loads(rep_run.stdout)
            got = calls_by_line(rep)
            want = {(str(Path(f).resolve()), l): n for (f, l), n in at_project.items()} if as_project \
                else {("<string>", 1): 5}
            check(got == want, f"{name} {extra}: sites {got}, want {want}")
            notes = [n for n in rep.get("notes", []) if n.startswith("Python: the installed package")]
            if how and not extra:
                check(len(notes) == 1 and "userproj" in notes[0] and how in notes[0],
                      f"{name}: one note naming userproj and {how!r}: {notes}")
            else:
                check(not notes, f"{name} {extra}: no entry-package note: {notes}")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
