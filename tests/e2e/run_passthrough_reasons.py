#!/usr/bin/env python3
"""The report names why the rewrite left each pageable copy as made (stdlib only).

testapps/passthrough_reasons under `cuxfer record --rewrite=pin`, with
registration off, a staging pool of one 8 MiB buffer (CUXFER_PINNED_BUDGET=16M)
and the simulated CUDA holding async copies' DMA "in flight" until the app
synchronises (SIMCUDA_EVENTS_PENDING=1). Its pageable copies meet four reasons,
each recorded by the shim where it decided, and the report must name each with
its exact count and bytes, most bytes first:
  - no staging buffer free: the second of two async H2D of BIG per round;
  - below the H2D staging threshold (8 MiB): N copies of SMALL;
  - a 2D copy: two cudaMemcpy2D of 1000 x 64 bytes;
  - below the D2H staging threshold (256 KiB): N copies of SMALL/2;
and the rest (3N copies of BIG) staged. Checked in `--json`
(rewrite.passthrough_reasons), in the text report's Rewrite (pin) lines, and
in the HTML report's rewrite section. The app checks every byte it moved.

  run_passthrough_reasons.py --cuxfer build/bin/cuxfer --shim build/lib/libcuxfer.so \\
      --workdir DIR -- build/testapps/sim/passthrough_reasons-simshared 3 64K 8M
"""
from __future__ import annotations

import json
import sys

from e2e_util import clean_env, fresh_dir, run_diagnosed, shim_app_args, verdict
from expectations import parse_size

MIB = 1 << 20
KIB = 1 << 10
IMAGE = 1000 * 64  # the app's 2D copy: W x H payload bytes


def copies(n: int) -> str:
    return f"{n} cop{'y' if n == 1 else 'ies'}"


def main() -> int:
    a, app = shim_app_args(__doc__)
    args = app[1:] + ["3", "64K", "8M"][len(app) - 1:]
    n, small, big = int(args[0]), parse_size(args[1]), parse_size(args[2])
    work = fresh_dir(a.workdir)
    env = clean_env()  # the shim's default thresholds
    plain = run_diagnosed(app, 120, env=env)
    if plain.returncode == 77:
        print(plain.stdout)
        return 77
    env.update({"CUXFER_REGISTER": "off", "CUXFER_PINNED_BUDGET": str(16 * MIB), "SIMCUDA_EVENTS_PENDING": "1"})
    run = run_diagnosed([a.cuxfer, "record", "-q", "--rewrite=pin", "--shim", a.shim, "-o", str(work / "t"),
                         "--", *app], 120, env=env)
    print(run.stdout, run.stderr, sep="\n")
    fails = []
    if run.returncode != 0 or run.stdout.strip() != plain.stdout.strip():
        fails.append(f"exit {run.returncode}, output {run.stdout.strip()!r}; plain: {plain.stdout.strip()!r}")
        return verdict(fails)

    # What the shim decided, per reason, most bytes first.
    want = [
        {"reason": "no_free_buffer", "direction": None, "threshold_bytes": None, "calls": n, "bytes": n * big,
         "line": f"no staging buffer free at the time: {copies(n)}"},
        {"reason": "below_threshold", "direction": "H2D", "threshold_bytes": 8 * MIB, "calls": n, "bytes": n * small,
         "line": f"below the staging threshold (CUXFER_STAGE_MIN_H2D 8 MiB): {copies(n)}"},
        {"reason": "not_1d", "direction": None, "threshold_bytes": None, "calls": 2, "bytes": 2 * IMAGE,
         "line": f"2D/3D/array/batch copy (the rewrite takes 1D copies): {copies(2)}"},
        {"reason": "below_threshold", "direction": "D2H", "threshold_bytes": 256 * KIB, "calls": n,
         "bytes": n * (small // 2), "line": f"below the staging threshold (CUXFER_STAGE_MIN_D2H 256 KiB): {copies(n)}"},
    ]
    want.sort(key=lambda w: (-w["bytes"], -w["calls"]))
    rep = run_diagnosed([a.cuxfer, "report", "--json", str(work / "t")], 60, env=env)
    if rep.returncode != 0:
        fails.append(f"report --json failed: {rep.stderr}")
        return verdict(fails)
    rw = json.loads(rep.stdout).get("rewrite", {})
    got = [{k: r.get(k) for k in ("reason", "direction", "threshold_bytes", "calls", "bytes")}
           for r in rw.get("passthrough_reasons", [])]
    want_json = [{k: w[k] for k in ("reason", "direction", "threshold_bytes", "calls", "bytes")} for w in want]
    print("passthrough_reasons:", json.dumps(got))
    if got != want_json:
        fails.append(f"rewrite.passthrough_reasons:\n      got  {got}\n      want {want_json}")
    total = (sum(w["calls"] for w in want), sum(w["bytes"] for w in want))
    if (rw.get("passthrough_pageable_calls"), rw.get("passthrough_pageable_bytes")) != total:
        fails.append(f"rewrite.passthrough_pageable (calls, bytes) = ({rw.get('passthrough_pageable_calls')}, "
                     f"{rw.get('passthrough_pageable_bytes')}), want {total}")
    if (rw.get("staged_calls"), rw.get("staged_bytes")) != (3 * n, 3 * n * big):
        fails.append(f"rewrite.staged (calls, bytes) = ({rw.get('staged_calls')}, {rw.get('staged_bytes')}), "
                     f"want ({3 * n}, {3 * n * big})")

    # The text report: one line per reason, in the same order; no list of possibilities.
    text = run_diagnosed([a.cuxfer, "report", "--html", str(work / "report.html"), str(work / "t")], 60, env=env)
    print(text.stdout)
    if text.returncode != 0:
        fails.append(f"report failed: {text.stderr}")
        return verdict(fails)
    section = text.stdout[text.stdout.find("Rewrite (pin)"):]
    at = [section.find(w["line"]) for w in want]
    for w, pos in zip(want, at):
        if pos < 0:
            fails.append(f"text report: no line {w['line']!r}")
    if all(p >= 0 for p in at) and at != sorted(at):
        fails.append("text report: the reasons are not in order of bytes")
    if "not eligible" in section:
        fails.append("text report: still the list of possibilities ('not eligible (e.g. ...)')")
    html = (work / "report.html").read_text()
    if "<h2>Rewrite (pin)</h2>" not in html:
        fails.append("HTML report: no Rewrite (pin) section")
    for w in want:
        if w["line"].rsplit(":", 1)[0] not in html:
            fails.append(f"HTML report: no row for {w['reason']} ({w['line'].rsplit(':', 1)[0]!r})")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
