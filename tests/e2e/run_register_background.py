#!/usr/bin/env python3
"""Registration in place off the copying thread (rewrite/background_registrar.h; stdlib only).

Under `cuxfer record --rewrite=pin` (CUXFER_REGISTER=auto, the default) the
copy that proves a buffer reused reserves its range and hands the driver's
cuMemHostRegister to the shim's registrar thread; that copy is staged (or, a
synchronous one below the staging threshold, left to the driver), and the
copies after it run in place. The simulated driver pins at
SIMCUDA_REGISTER_US_PER_MIB, slowly, so the registration takes long enough to
matter. Checked, from the run and `cuxfer export --sqlite`:
  - the app's output (every byte of every copy checked by the app) is the plain run's;
  - every registration event (api `cuxfer:register`) was made on a thread that
    made none of the app's copies;
  - copies ran in place after it (registered bytes > 0), and every pageable
    byte is accounted for: staged + registered + passed through = all of them;
  - with CUXFER_REGISTER=inline the registrations are made on the copying thread.

  run_register_background.py --cuxfer B/bin/cuxfer --shim B/lib/libcuxfer.so --workdir DIR
      -- B/testapps/sim/pageable_loop-simshared 8 4M
"""
from __future__ import annotations

import json
import sqlite3
import sys

from e2e_util import clean_env, fresh_dir, run_diagnosed, shim_app_args, verdict


def main() -> int:
    a, app = shim_app_args(__doc__)
    work = fresh_dir(a.workdir)
    env = clean_env(SIMCUDA_REGISTER_US_PER_MIB="2000")
    plain = run_diagnosed(app, 120, env=env)
    if plain.returncode == 77:
        print(plain.stdout)
        return 77
    fails = []
    for mode in ("auto", "inline"):
        out = work / mode
        run = run_diagnosed([a.cuxfer, "record", "-q", "--rewrite=pin", "--shim", a.shim, "-o", str(out), "--", *app],
                            120, env={**env, "CUXFER_REGISTER": mode})
        print(run.stdout, run.stderr, sep="\n")
        if run.returncode != 0 or run.stdout.strip() != plain.stdout.strip():
            fails.append(f"{mode}: exit {run.returncode}, output {run.stdout.strip()!r}; plain {plain.stdout.strip()!r}")
            continue
        rep = run_diagnosed([a.cuxfer, "report", "--json", str(out)], 60, env=env)
        rw = json.loads(rep.stdout).get("rewrite", {}) if rep.returncode == 0 else {}
        db = work / f"{mode}.sqlite"
        exp = run_diagnosed([a.cuxfer, "export", "--sqlite", str(db), str(out)], 60, env=env)
        if exp.returncode != 0:
            fails.append(f"{mode}: export --sqlite failed: {exp.stderr}")
            continue
        con = sqlite3.connect(db)
        copy_threads = {t for (t,) in con.execute("SELECT DISTINCT thread FROM calls WHERE kind = 'copy' AND shim = 0")}
        reg_threads = [t for (t,) in con.execute("SELECT thread FROM calls WHERE api = 'cuxfer:register' AND failed = 0")]
        pageable = con.execute("SELECT coalesce(sum(bytes), 0) FROM calls WHERE kind = 'copy' AND shim = 0 AND "
                               "failed = 0 AND memory = 'pageable'").fetchone()[0]
        con.close()
        print(f"{mode}: copy threads {sorted(copy_threads)}, registrations on threads {reg_threads}; "
              f"staged {rw.get('staged_bytes')}, registered {rw.get('registered_bytes')}, "
              f"passed through {rw.get('passthrough_pageable_bytes')}, pageable {pageable}")
        if not reg_threads:
            fails.append(f"{mode}: no registration was made")
        elif mode == "auto" and any(t in copy_threads for t in reg_threads):
            fails.append(f"auto: a registration was made on a copying thread ({reg_threads} vs {sorted(copy_threads)})")
        elif mode == "inline" and not all(t in copy_threads for t in reg_threads):
            fails.append(f"inline: a registration was made off the copying thread ({reg_threads})")
        if not rw.get("registered_bytes"):
            fails.append(f"{mode}: no copy ran in place after the registration")
        served = rw.get("staged_bytes", 0) + rw.get("registered_bytes", 0) + rw.get("passthrough_pageable_bytes", 0)
        if served != pageable:
            fails.append(f"{mode}: staged + registered + passed through = {served}, pageable bytes {pageable}")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
