#!/usr/bin/env python3
"""Python code given as text names its own call sites (stdlib only).

  run_python_inline.py --cuxfer B/bin/cuxfer --shim B/lib/libcuxfer.so
      --libcudart B/simcuda/lib/libcudart.so --workdir DIR

Runs testapps/python/inline_copies.py's text under `cuxfer record` on the
simulated CUDA the two ways people run code that is not a file: `python -c
TEXT` (its frames' file is "<string>") and `python -` with the text on stdin
("<stdin>"). For each, from `cuxfer report --json` and the text report:
every copy is at its line of the text with the count the text makes, the
ones made inside fakeframework (under site-packages/) at the text's line that
called it (before, such text counted as the interpreter's own and the copy
was put at the framework's line), and with --python-frames all at the
framework's own line. Exit 0 pass, 1 fail.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from e2e_util import calls_by_line, fresh_dir, recorded_python_app_args, site_markers, verdict

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "testapps" / "python" / "inline_copies.py"
SITE_PACKAGES = ROOT / "testapps" / "python" / "site-packages"
FRAMEWORK = SITE_PACKAGES / "fakeframework.py"
EXPECTED = {"direct": 2, "framework": 3, "function": 1}
fails: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        fails.append(what)
        print("FAIL: " + what, flush=True)


def main() -> int:
    a = recorded_python_app_args()
    work = fresh_dir(a.workdir)
    text = APP.read_text()
    lines = site_markers(APP)
    fw_line = site_markers(FRAMEWORK)["framework_internal"]
    runs = {"<string>": (["-c", text], None), "<stdin>": (["-"], text)}
    for pseudo, (how, stdin) in runs.items():
        out = work / ("c" if pseudo == "<string>" else "stdin")
        cmd = [a.cuxfer, "record", "-q", "--shim", a.shim, "-o", str(out), "--", sys.executable, *how,
               a.libcudart, str(SITE_PACKAGES)]
        print("+ " + " ".join(c if len(c) < 80 else "TEXT" for c in cmd), flush=True)
        r = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=120)
        check(r.returncode == 0 and "inline_copies: OK" in r.stdout,
              f"{pseudo}: exit {r.returncode}, stdout {r.stdout[-200:]!r}, stderr {r.stderr[-600:]!r}")
        if r.returncode != 0:
            continue
        for frames in ("user", "all"):
            rep_run = subprocess.run([a.cuxfer, "report", "--json", "--python-frames", frames, str(out)],
                                     capture_output=True, text=True, timeout=120)
            check(rep_run.returncode == 0, f"{pseudo}: report --json --python-frames {frames}: exit "
                  f"{rep_run.returncode}: {rep_run.stderr[-300:]}")
            if rep_run.returncode != 0:
                continue
            got = calls_by_line(json.loads(rep_run.stdout))
            want = {(pseudo, lines[tag]): n for tag, n in EXPECTED.items()}
            if frames == "all":  # the framework's copies at its own line
                del want[(pseudo, lines["framework"])]
                want[(str(FRAMEWORK), fw_line)] = EXPECTED["framework"]
            check(got == want, f"{pseudo}, --python-frames {frames}: sites {got}, want {want}")
        shown = subprocess.run([a.cuxfer, "report", str(out)], capture_output=True, text=True, timeout=120).stdout
        check(f"{pseudo}:{lines['framework']} in <module>" in shown,
              f"{pseudo}: the text report names the framework copies' line as {pseudo}:{lines['framework']}")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
