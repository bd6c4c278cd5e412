#!/usr/bin/env python3
"""`cuxfer record` when registration in place cannot be had (stdlib only).

Registration in place (`--rewrite=pin`, an inherited CUXFER_REWRITE=pin, or a
`--policy` with a `register` entry) needs libcuxfer_memhooks.so next to the
shim. The shim is copied alone into a directory of its own and named with
--shim; then:

  - without CUXFER_REGISTER=off: exit status 2, one line on stderr naming the
    libcuxfer_memhooks.so it looked for, and the command is not run (with and
    without -q);
  - with CUXFER_REGISTER=off: the command runs, the rewrite stages and
    registers nothing, and one line says that registration is off, also
    with -q (-q never hides that the rewrite runs degraded);
  - with the shim where the build put it (libcuxfer_memhooks.so beside it):
    the command runs and reused buffers are registered, and no such line.

  run_record_memhooks.py --cuxfer build/bin/cuxfer --shim build/lib/libcuxfer.so \\
      --workdir DIR -- build/testapps/sim/pageable_loop-simshared 4 2M

Exit status: 0 pass, 1 fail, 77 skip (the app printed "no GPU" and exited 77).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from e2e_util import command_after_dashes, fresh_dir, verdict

SKIP = 77
OFF_LINE = "registration in place is off (CUXFER_REGISTER=off)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--shim", required=True, help="the built libcuxfer.so (libcuxfer_memhooks.so beside it)")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- APP [ARGS...]: reuses pageable buffers of >= 1 MiB")
    a = ap.parse_args()
    app = command_after_dashes(a.command)
    if not app:
        ap.error("no app given")
    work = fresh_dir(a.workdir)
    built_shim = Path(a.shim).resolve()
    if not (built_shim.parent / "libcuxfer_memhooks.so").exists():
        print(f"FAIL: {built_shim.parent}/libcuxfer_memhooks.so is not built (target cuxfer_memhooks)")
        return 1
    lonely = work / "lonely"
    lonely.mkdir()
    shutil.copy2(built_shim, lonely / "libcuxfer.so")
    missing = str((lonely / "libcuxfer_memhooks.so").resolve())

    policy = work / "register-policy.json"
    policy.write_text(json.dumps({"schema": "cuxfer.policy/1", "entries": [
        {"site": {"kind": "call", "build_id": "00112233445566778899aabbccddeeff00112233", "offset": "0x1000"},
         "path": "register"}]}))

    base_env = dict(os.environ)
    for k in ("CUXFER_REWRITE", "CUXFER_REGISTER", "CUXFER_POLICY", "CUXFER_SHIM", "LD_PRELOAD"):
        base_env.pop(k, None)
    # Hermetic: no machine profile of the developer's own.
    base_env.setdefault("CUXFER_PROFILE_DIR", "/nonexistent/cuxfer-test-profiles")

    fails: list[str] = []
    runs = 0

    def record(name: str, shim: Path, opts: list[str], env_add: dict[str, str]):
        """Runs `cuxfer record` on `sh -c 'echo ran > MARKER; exec APP...'` so
        that whether the command ran is seen without the shim's help."""
        nonlocal runs
        runs += 1
        out = work / name
        marker = work / f"{name}.ran"
        cmd = [a.cuxfer, "record", "--shim", str(shim), "-o", str(out), *opts, "--",
               "sh", "-c", 'echo ran > "$0"; exec "$@"', str(marker), *app]
        env = dict(base_env, **env_add)
        print("+ " + " ".join(f"{k}={v}" for k, v in env_add.items()) + (" " if env_add else "") + " ".join(cmd),
              flush=True)
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
        sys.stdout.write("".join(f"  [stderr] {line}\n" for line in p.stderr.splitlines()[-20:]))
        traces = sorted(out.glob("cuxfer-*.trace")) if out.is_dir() else []
        return p, marker.exists(), traces

    def rewrite_of(traces: list[Path]) -> dict:
        r = subprocess.run([a.cuxfer, "report", "--json", *map(str, traces)], capture_output=True, text=True,
                           timeout=120)
        if r.returncode != 0:
            fails.append(f"cuxfer report --json failed ({r.returncode}): {r.stderr.strip()}")
            return {}
        return json.loads(r.stdout).get("rewrite") or {}

    # 1. No libcuxfer_memhooks.so beside the shim, registration wanted: refused.
    refusals = [
        ("pin", ["--rewrite=pin"], {}, "--rewrite=pin"),
        ("pin_quiet", ["-q", "--rewrite=pin"], {}, "--rewrite=pin"),
        ("pin_inherited", ["-q"], {"CUXFER_REWRITE": "pin"}, "CUXFER_REWRITE=pin"),
        ("policy_register", ["--policy", str(policy)], {}, "--policy"),
    ]
    for name, opts, env_add, why in refusals:
        p, ran, traces = record(name, lonely / "libcuxfer.so", opts, env_add)
        if p.returncode == SKIP:
            return SKIP
        lines = p.stderr.splitlines()
        if p.returncode != 2:
            fails.append(f"{name}: exit status {p.returncode}, expected 2 (libcuxfer_memhooks.so is missing)")
        if len(lines) != 1:
            fails.append(f"{name}: {len(lines)} lines on stderr, expected exactly one: {lines!r}")
        elif not (lines[0].startswith(f"cuxfer record: {why}") and missing in lines[0]
                  and "CUXFER_REGISTER=off" in lines[0]):
            fails.append(f"{name}: the line does not name {why}, {missing} and CUXFER_REGISTER=off: {lines[0]!r}")
        if ran or traces:
            fails.append(f"{name}: the command ran (marker {ran}, traces {[t.name for t in traces]})")

    # 2. The same with CUXFER_REGISTER=off: staging only, said once, -q or not.
    for name, opts in (("stage_only", ["--rewrite=pin"]), ("stage_only_quiet", ["-q", "--rewrite=pin"])):
        p, ran, traces = record(name, lonely / "libcuxfer.so", opts, {"CUXFER_REGISTER": "off"})
        if p.returncode == SKIP:
            return SKIP
        if p.returncode != 0 or not ran:
            fails.append(f"{name}: exit status {p.returncode}, ran {ran}; expected the command to run and exit 0")
            continue
        said = [line for line in p.stderr.splitlines() if OFF_LINE in line]
        if len(said) != 1:
            fails.append(f"{name}: expected one line saying '{OFF_LINE}', got {len(said)}: {p.stderr!r}")
        elif missing not in said[0]:
            fails.append(f"{name}: the registration-off line does not name {missing}: {said[0]!r}")
        if "-q" in opts and p.stderr.splitlines() != said:
            fails.append(f"{name}: with -q only the registration-off line belongs on stderr: {p.stderr!r}")
        if not traces:
            fails.append(f"{name}: no trace written")
            continue
        rw = rewrite_of(traces)
        if rw.get("active") is not True or (rw.get("registered_calls") or 0) != 0 or (rw.get("staged_calls") or 0) == 0:
            fails.append(f"{name}: expected the rewrite active, staging, registering nothing: {rw}")

    # 3. The shim where the build put it: the libc hooks are preloaded, reused buffers registered.
    p, ran, traces = record("registering", built_shim, ["-q", "--rewrite=pin"], {})
    if p.returncode == SKIP:
        return SKIP
    if p.returncode != 0 or not ran or not traces:
        fails.append(f"registering: exit status {p.returncode}, ran {ran}, {len(traces)} trace(s)")
    else:
        if OFF_LINE in p.stderr or "libcuxfer_memhooks.so" in p.stderr:
            fails.append(f"registering: unexpected line on stderr: {p.stderr!r}")
        rw = rewrite_of(traces)
        if (rw.get("registered_calls") or 0) == 0:
            fails.append(f"registering: nothing was registered in place: {rw}")

    print(f"{runs} runs of cuxfer record")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
