#!/usr/bin/env python3
"""End-to-end check of one test app under cuxfer (Python 3 stdlib only).

Runs the app under `cuxfer record` (or plain LD_PRELOAD), checks its exit
status, reads the traces back with `cuxfer report --json` and compares the
report's numbers EXACTLY with the app's declared traffic (expectations.py):
copy classes (direction x host memory kind), memsets, allocations, API names,
totals, per-process traffic, findings, and the simulated flag.

Exit status: 0 pass, 1 fail, 77 skip (no GPU / framework missing).

  run_app.py --cuxfer build/bin/cuxfer --tier sim -- build/testapps/sim/pageable_loop-simshared 4 64K
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import expectations as ex  # noqa: E402
from e2e_util import run_diagnosed  # noqa: E402

SKIP = 77
TRACE_MAGIC = b"CUXFERTR"
# Modes in which the runtime is linked statically, so the shim sees only the
# driver entry points the runtime calls.
SIM_STATIC_MODES = {"simstatic"}
UNKNOWN_NAME_MODES = {"cudart_static", "nvcc_static"}  # the real static cudart's driver calls are its own


class Failures:
    def __init__(self) -> None:
        self.items: list[str] = []

    def check(self, ok: bool, what: str) -> None:
        if not ok:
            self.items.append(what)

    def eq(self, got, want, what: str) -> None:
        self.check(got == want, f"{what}: got {got!r}, want {want!r}")


def is_trace(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(8) == TRACE_MAGIC
    except OSError:
        return False


def find_traces(d: Path) -> list[Path]:
    return sorted(p for p in d.rglob("*") if p.is_file() and is_trace(p))


def report_json(cuxfer: str, traces: list[Path], cut: bool = False) -> dict:
    """`cuxfer report --json` of the traces. With `cut` (a killed app), a trace cut before
    any event reached it may leave exit 1 with the line saying no event could be read."""
    r = subprocess.run([cuxfer, "report", "--json", *map(str, traces)], capture_output=True, text=True, timeout=120)
    if r.returncode != 0 and not (cut and r.returncode == 1 and "no event could be read" in r.stderr and r.stdout):
        raise RuntimeError(f"cuxfer report --json failed ({r.returncode}): {r.stderr.strip()}")
    return json.loads(r.stdout)


# --- expected numbers ---------------------------------------------------------
def api_name(op: ex.Op, mode: str) -> str | None:
    if mode in UNKNOWN_NAME_MODES and op.api.startswith("cuda"):
        return None
    if mode in SIM_STATIC_MODES:
        return ex.driver_name(op)
    return op.api


def expected_classes(procs: list[ex.Proc]) -> dict:
    out: dict = {}
    for p in procs:
        for op in p.ops:
            if op.kind != "copy":
                continue
            c = out.setdefault((op.direction, op.memory), [0, 0])
            c[0] += op.calls
            c[1] += op.bytes
    return {k: tuple(v) for k, v in out.items()}


def got_classes(report: dict) -> dict:
    out: dict = {}
    for c in report.get("classes", []):
        if c["calls"] == 0 and c["bytes"] == 0:
            continue
        key = (c["direction"], c["memory"])
        prev = out.get(key, (0, 0))
        out[key] = (prev[0] + c["calls"], prev[1] + c["bytes"])
    return out


def fmt_classes(d: dict) -> str:
    return ", ".join(f"{k[0]}/{k[1]}: {v[0]} calls {v[1]} B" for k, v in sorted(d.items())) or "(none)"


def check_report(f: Failures, report: dict, exp: ex.Expectation, mode: str, tier: str, allow_incomplete: bool,
                 exe: str | None) -> None:
    procs = exp.processes
    f.eq(report.get("schema"), "cuxfer.report/1", "schema")
    f.eq(report.get("simulated"), tier == "sim", "simulated")
    if tier == "sim":
        f.eq(report.get("timing"), "cpu", "timing (no CUPTI on simulated CUDA)")

    # Processes.
    rprocs = report.get("processes", [])
    f.eq(len(rprocs), len(procs), "number of processes (one trace per process)")
    for p in rprocs:
        tag = f"process {p.get('pid')} ({p.get('exe')})"
        if not allow_incomplete:
            f.check(p.get("complete") is True, f"{tag}: trace not complete: {p.get('cut_reason')!r}")
        f.eq(p.get("events_dropped"), 0, f"{tag}: events_dropped")
        if tier == "sim":
            f.eq(p.get("cupti", {}).get("state"), "unavailable", f"{tag}: cupti.state on simulated CUDA")
    if exe and len(procs) == 1 and rprocs:
        f.eq(os.path.basename(rprocs[0].get("exe", "")), os.path.basename(exe), "process exe")

    # Peer copies per device pair, exactly (none where the app makes none).
    got_pairs = sorted((pp.get("src_device"), pp.get("dst_device"), pp.get("calls"), pp.get("bytes"))
                       for pp in report.get("peer_pairs", []))
    f.eq(got_pairs, sorted(exp.peer_pairs), "peer_pairs (src, dst, calls, bytes)")

    # Per device, where the app says which device each copy runs on.
    if exp.per_device is not None:
        got_dev: dict = {}
        for d in report.get("devices", []):
            c = got_dev.setdefault(d.get("device"), [0, 0, 0])
            c[0] += d.get("calls", 0)
            c[1] += d.get("h2d_bytes", 0)
            c[2] += d.get("d2h_bytes", 0)
        f.eq({k: tuple(v) for k, v in got_dev.items()}, exp.per_device, "devices (calls, h2d_bytes, d2h_bytes) per device")

    # Copy classes, exactly: no missing, no extra, no miscounted.
    want = expected_classes(procs)
    got = got_classes(report)
    f.check(got == want, f"classes:\n      got  {fmt_classes(got)}\n      want {fmt_classes(want)}")
    want_calls = sum(v[0] for v in want.values())
    want_bytes = sum(v[1] for v in want.values())
    totals = report.get("totals", {})
    f.eq((totals.get("calls"), totals.get("bytes")), (want_calls, want_bytes), "totals (calls, bytes)")

    # Memsets.
    ms = [op for p in procs for op in p.ops if op.kind == "memset"]
    m = report.get("memsets", {})
    f.eq((m.get("calls"), m.get("bytes")), (sum(o.calls for o in ms), sum(o.bytes for o in ms)),
         "memsets (calls, bytes)")

    # Allocations.
    allocs = report.get("allocations", {})
    want_alloc: dict = {}
    for p in procs:
        for kind, a in p.allocs.items():
            w = want_alloc.setdefault(kind, [0, 0])
            w[0] += a.calls
            w[1] = None if (w[1] is None or a.bytes is None) else w[1] + a.bytes
    for kind in ("device", "managed", "host_pinned", "host_registered"):
        g = allocs.get(kind, {})
        w = want_alloc.get(kind, [0, 0])
        f.eq(g.get("calls"), w[0], f"allocations.{kind}.calls")
        if w[1] is not None:
            f.eq(g.get("bytes"), w[1], f"allocations.{kind}.bytes")

    # API names: the outermost API the user called, one event per user call.
    want_apis: dict = {}
    for p in procs:
        pmode = p.mode or mode
        for op in p.ops:
            name = api_name(op, pmode)
            if name is None:
                continue
            a = want_apis.setdefault(name, [0, 0])
            a[0] += op.calls
            a[1] += op.bytes
    unchecked_modes = any((p.mode or mode) in UNKNOWN_NAME_MODES for p in procs)
    got_apis = {a["name"]: (a["calls"], a["bytes"]) for a in report.get("apis", [])}
    for name, (calls, nbytes) in sorted(want_apis.items()):
        f.eq(got_apis.get(name), (calls, nbytes), f"apis[{name}] (calls, bytes)")
    if not unchecked_modes:
        for name, (calls, _) in got_apis.items():
            transfer_like = "cpy" in name.lower() or "memset" in name.lower()
            f.check(not transfer_like or name in want_apis or calls == 0,
                    f"apis: unexpected transfer API {name!r} with {calls} calls")

    # Findings.
    kinds = {fd.get("kind") for fd in report.get("findings", [])}
    for k in sorted(exp.findings_present):
        f.check(k in kinds, f"finding {k!r} expected, got {sorted(kinds)}")
    for k in sorted(exp.findings_absent):
        f.check(k not in kinds, f"finding {k!r} must not fire, got {sorted(kinds)}")

    # Pageable share.
    share = report.get("pageable_share", {})
    pageable = sum(v[1] for k, v in want.items() if k[0] in ("H2D", "D2H") and k[1] == "pageable")
    f.eq(share.get("pageable_bytes"), pageable, "pageable_share.pageable_bytes")
    if not any(k[1] == "managed" for k in want):
        host = sum(v[1] for k, v in want.items() if k[0] in ("H2D", "D2H"))
        f.eq(share.get("host_bytes"), host, "pageable_share.host_bytes")


# --- the pinned rewrite (cuxfer record --rewrite=pin) ---------------------------
# The shim's defaults per direction (docs/cli.md); CUXFER_STAGE_MIN sets both.
DEFAULT_STAGE_MIN = {"H2D": 8 << 20, "D2H": 256 << 10}
DEFAULT_REGISTER_MIN = 1 << 20  # the shim's CUXFER_REGISTER_MIN default (docs/cli.md)


def stage_min_of(env: dict) -> dict:
    text = env.get("CUXFER_STAGE_MIN", "")
    return {d: int(text) for d in DEFAULT_STAGE_MIN} if text.isdigit() else dict(DEFAULT_STAGE_MIN)


def stageable(op: ex.Op, stage_min: dict) -> bool:
    """Eligible for staging (the contract with the shim): a 1D H2D or D2H copy
    whose host side is pageable, each call at least the direction's threshold."""
    if op.kind != "copy" or op.direction not in ("H2D", "D2H") or op.memory != "pageable" or op.calls == 0:
        return False
    if any(tag in op.api for tag in ("2D", "3D", "Array", "Batch")):
        return False
    return op.bytes // op.calls >= stage_min[op.direction]  # the apps' calls of one Op have one size


def registered_calls(op: ex.Op, env: dict) -> int:
    """Registration model "per-op" (the contract with the shim's reuse policy for
    apps whose every pageable op reuses one whole buffer): a buffer of at least
    CUXFER_REGISTER_MIN is registered once its copies have moved twice its size,
    so its first call is staged or passed through and every later one is
    registered. Returns the op's registered calls."""
    if env.get("CUXFER_REGISTER") == "off" or op.kind != "copy" or op.direction not in ("H2D", "D2H"):
        return 0
    if op.memory != "pageable" or op.calls < 2 or any(t in op.api for t in ("2D", "3D", "Array", "Batch")):
        return 0
    text = env.get("CUXFER_REGISTER_MIN", "")
    return op.calls - 1 if op.bytes // op.calls >= (int(text) if text.isdigit() else DEFAULT_REGISTER_MIN) else 0


def check_rewrite_some(f: Failures, rw: dict, exp: ex.Expectation) -> None:
    """--rewrite-counts some: which copies the rewrite takes is not modelled (staging
    only in the context its pool lives in, buffers fresh or reused as the app goes):
    some pageable copies were staged or registered, and staged + registered +
    passed through is every pageable H2D/D2H copy, calls and bytes."""
    pageable = [op for p in exp.processes for op in p.ops
                if op.kind == "copy" and op.direction in ("H2D", "D2H") and op.memory == "pageable"]
    f.eq(rw.get("active"), True, "rewrite.active with --rewrite=pin")
    staged, registered = rw.get("staged_calls") or 0, rw.get("registered_calls") or 0
    f.check(staged + registered > 0, f"rewrite: no pageable copy was staged or registered ({rw})")
    for unit in ("calls", "bytes"):
        got = sum(rw.get(k) or 0 for k in (f"staged_{unit}", f"registered_{unit}", f"passthrough_pageable_{unit}"))
        f.eq(got, sum(o.calls if unit == "calls" else o.bytes for o in pageable),
             f"rewrite staged + registered + passthrough_pageable {unit} (every pageable copy)")
    print(f"  rewrite: staged {staged} calls, registered {registered}, "
          f"passed through {rw.get('passthrough_pageable_calls')}", flush=True)


def check_rewrite(f: Failures, report: dict, exp: ex.Expectation, rewrite: str, stage_min: dict,
                  traces: list[Path], cuxfer: str, env: dict, counts: str = "exact") -> None:
    """The rewrite moved exactly what it should have: the classes are checked
    (unchanged) by check_report; here, what went through the staging pool and
    what through in-place registration."""
    rw = report.get("rewrite")
    f.check(isinstance(rw, dict), f"report has no 'rewrite' object: {sorted(report)}")
    if not isinstance(rw, dict):
        return
    if counts == "some" and rewrite == "pin":
        check_rewrite_some(f, rw, exp)
        return
    ops = [op for p in exp.processes for op in p.ops]
    staged = [op for op in ops if stageable(op, stage_min)]
    pageable = [op for op in ops if op.kind == "copy" and op.direction in ("H2D", "D2H") and op.memory == "pageable"]
    reg = {id(o): registered_calls(o, env) for o in pageable}
    want_registered = (sum(reg.values()), sum(o.bytes // o.calls * reg[id(o)] for o in pageable))
    want_staged = (sum(o.calls - reg[id(o)] for o in staged), sum(o.bytes // o.calls * (o.calls - reg[id(o)]) for o in staged))
    if rewrite == "off":
        f.eq(rw.get("active"), False, "rewrite.active with --rewrite=off")
        f.eq((rw.get("staged_calls"), rw.get("staged_bytes")), (0, 0), "rewrite (staged_calls, staged_bytes) when off")
        f.eq(rw.get("pool_bytes"), 0, "rewrite.pool_bytes when off")
        return
    f.eq(rw.get("active"), True, "rewrite.active with --rewrite=pin")
    f.eq((rw.get("staged_calls"), rw.get("staged_bytes")), want_staged,
         f"rewrite (staged_calls, staged_bytes): pageable 1D H2D/D2H copies of >= {stage_min} B")
    want_pass = (sum(o.calls for o in pageable) - want_staged[0] - want_registered[0],
                 sum(o.bytes for o in pageable) - want_staged[1] - want_registered[1])
    f.eq((rw.get("passthrough_pageable_calls"), rw.get("passthrough_pageable_bytes")), want_pass,
         "rewrite (passthrough_pageable_calls, passthrough_pageable_bytes)")
    f.eq((rw.get("registered_calls"), rw.get("registered_bytes")), want_registered,
         "rewrite (registered_calls, registered_bytes): reused pageable buffers >= CUXFER_REGISTER_MIN after their first copy")
    # Per class: the staged bytes of each class.
    want_cls: dict = {}
    for o in staged:
        if o.calls == reg[id(o)]:
            continue
        c = want_cls.setdefault((o.direction, o.memory), [0, 0])
        c[0] += o.calls - reg[id(o)]
        c[1] += o.bytes // o.calls * (o.calls - reg[id(o)])
    got_cls = {(c["direction"], c["memory"]): [c.get("staged_calls"), c.get("staged_bytes")]
               for c in report.get("classes", []) if c.get("staged_calls") or c.get("staged_bytes")}
    f.eq(got_cls, want_cls, "classes[].(staged_calls, staged_bytes)")
    # The pool: pinned once per process that staged, within its share of the
    # budget (half the pinned budget, at most 128 MiB).
    if want_staged[0] > 0:
        pool = rw.get("pool_bytes") or 0
        f.check(pool > 0, f"rewrite.pool_bytes is {pool}: a process that staged copies allocated no pool")
        configured = env.get("CUXFER_PINNED_BUDGET", "")
        per_process = min(int(configured) // 2, 128 << 20) if configured.isdigit() else 128 << 20
        budget = per_process * len(exp.processes)
        f.check(pool <= budget, f"rewrite.pool_bytes {pool} over the budget ({budget})")
    text = subprocess.run([cuxfer, "report", *map(str, traces)], capture_output=True, text=True, timeout=120)
    f.check("Rewrite (pin)" in text.stdout, "text report has no 'Rewrite (pin)' section")


def check_per_process(f: Failures, cuxfer: str, traces: list[Path], exp: ex.Expectation) -> None:
    """Each trace on its own must match one expected process (as a multiset)."""
    if len(exp.processes) < 2:
        return
    got = []
    for t in traces:
        r = report_json(cuxfer, [t])
        got.append(tuple(sorted(got_classes(r).items())))
    want = [tuple(sorted(expected_classes([p]).items())) for p in exp.processes]
    f.check(Counter(got) == Counter(want),
            "per-process traffic:\n      got  " + " | ".join(fmt_classes(dict(g)) for g in got) +
            "\n      want " + " | ".join(fmt_classes(dict(w)) for w in want))


def libcuda_loadable() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuxfer", required=True, help="the cuxfer CLI")
    ap.add_argument("--shim", help="libcuxfer.so (for --launch preload)")
    ap.add_argument("--tier", choices=["sim", "gpu"], default="sim")
    ap.add_argument("--launch", choices=["record", "preload"], default="record")
    ap.add_argument("--app", help="expectation name (default: from the binary's name)")
    ap.add_argument("--mode", help="linkage mode (default: from the binary's name)")
    ap.add_argument("--name", help="pass --name NAME to cuxfer record and check the trace file names")
    ap.add_argument("--no-stacks", action="store_true", help="pass --no-stacks to cuxfer record")
    ap.add_argument("--rewrite", choices=["pin", "off"],
                    help="record with --rewrite=MODE (preload: CUXFER_REWRITE=MODE) and check what was staged")
    ap.add_argument("--expect-exit", type=int, default=0)
    ap.add_argument("--expect-signal", type=int, help="the app (and cuxfer record) must die of this signal")
    ap.add_argument("--allow-incomplete", action="store_true", help="a trace may be cut short (killed app)")
    ap.add_argument("--rewrite-counts", choices=["exact", "some"], default="exact",
                    help="with --rewrite pin: exact (staged/registered calls as modelled) or some "
                         "(at least one, and staged + registered + passed through = every pageable copy)")
    ap.add_argument("--traffic", choices=["exact", "none"], default="exact",
                    help="none: only check exit status and that a trace was written")
    ap.add_argument("--workdir", help="output directory (recreated); default: a fresh temporary one")
    ap.add_argument("--keep", action="store_true", help="keep the temporary output directory")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- APP [ARGS...]")
    a = ap.parse_args()
    cmd = a.command[1:] if a.command and a.command[0] == "--" else a.command
    if not cmd:
        ap.error("no app given")
    binary = cmd[0]
    app = a.app or ex.app_name_of(binary)
    mode = a.mode or ex.mode_of(binary)
    if app not in ex.EXPECTATIONS:
        ap.error(f"no expectation for app {app!r}")
    if not os.access(binary, os.X_OK):
        print(f"FAIL: {binary} is not an executable (not built?)")
        return 1
    if a.tier == "gpu" and not libcuda_loadable():
        # Apps linked against libcuda cannot even start without a driver.
        print("no GPU: libcuda.so.1 cannot be loaded (no NVIDIA driver): SKIP")
        return SKIP

    if a.workdir:
        out = Path(a.workdir)
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
    else:
        out = Path(tempfile.mkdtemp(prefix=f"cuxfer-e2e-{app}-"))

    env = dict(os.environ)
    # Hermetic: a machine profile of the developer's own (cuxfer calibrate) would
    # change the rewrite's thresholds and the estimates; tests that want one set it.
    env.setdefault("CUXFER_PROFILE_DIR", "/nonexistent/cuxfer-test-profiles")
    if a.launch == "record":
        run = [a.cuxfer, "record", "-o", str(out)]
        if a.name:
            run += ["--name", a.name]
        if a.no_stacks:
            run.append("--no-stacks")
        if a.rewrite:
            run.append(f"--rewrite={a.rewrite}")
        run += ["--", *cmd]
    else:
        if not a.shim:
            ap.error("--launch preload needs --shim")
        env["LD_PRELOAD"] = a.shim
        env["CUXFER_OUTPUT_DIR"] = str(out)
        if a.rewrite:
            env["CUXFER_REWRITE"] = a.rewrite
        run = list(cmd)
    print("+", " ".join(run), flush=True)
    # An app whose traffic is known only afterwards prints it (expectations.FROM_OUTPUT).
    capture = app in ex.FROM_OUTPUT
    try:
        proc = run_diagnosed(run, 300, capture=(capture, False), env=env)
    except subprocess.TimeoutExpired:
        print("FAIL: timed out (where it waited: above)")
        return 1
    if capture:
        sys.stdout.write(proc.stdout)
        sys.stdout.flush()
    rc = proc.returncode
    if rc == SKIP and a.expect_exit != SKIP:
        print("no GPU: the app skipped (exit 77)")
        return SKIP

    f = Failures()
    if a.expect_signal is not None:
        f.eq(rc, -a.expect_signal, "exit status (negative: killed by that signal)")
    else:
        f.eq(rc, a.expect_exit, "exit status")

    traces = find_traces(out)
    f.check(bool(traces), f"no trace written in {out} (files: {[p.name for p in out.rglob('*')]})")
    if a.name:
        for t in traces:
            f.check(t.name.startswith(f"cuxfer-{a.name}-"), f"trace {t.name} not named after --name {a.name}")
    if traces:
        try:
            report = report_json(a.cuxfer, traces, cut=a.allow_incomplete)
        except (RuntimeError, json.JSONDecodeError) as e:
            f.check(False, str(e))
            report = None
        exp = None
        if report is not None and a.traffic == "exact":
            try:
                exp = ex.EXPECTATIONS[app](cmd[1:], proc.stdout) if capture else ex.EXPECTATIONS[app](cmd[1:])
            except ValueError as e:
                f.check(False, f"expectation from the app's output: {e}")
        if exp is not None:
            check_report(f, report, exp, mode, a.tier, a.allow_incomplete, binary)
            check_per_process(f, a.cuxfer, traces, exp)
            if a.rewrite:
                check_rewrite(f, report, exp, a.rewrite, stage_min_of(env), traces, a.cuxfer, env, a.rewrite_counts)
            if a.tier == "sim":  # the human-readable report must say so too
                text = subprocess.run([a.cuxfer, "report", *map(str, traces)], capture_output=True, text=True,
                                      timeout=120)
                f.eq(text.returncode, 0, "cuxfer report (text) exit status")
                f.check("simulated" in text.stdout.lower(), "text report does not say 'simulated'")
        elif report is not None and a.traffic == "none":  # a killed app's trace may stop early: only "it reads"
            f.eq(report.get("schema"), "cuxfer.report/1", "schema")

    if f.items:
        print(f"FAIL: {app} ({mode}), traces in {out}")
        for item in f.items:
            print("  -", item)
        return 1
    print(f"PASS: {app} ({mode}): {len(traces)} trace(s)")
    if not a.workdir and not a.keep:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(main())
