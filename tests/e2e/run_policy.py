#!/usr/bin/env python3
"""`cuxfer policy` end to end (stdlib only): records test apps on the
simulated CUDA, writes their policy files and checks the entries.

  run_policy.py --cuxfer build/bin/cuxfer --sim build/testapps/sim --mode simshared --workdir DIR

  - tiny_storm 5000 64, recorded with CUXFER_FINGERPRINT_MIN=64 (tiny copies
    then carry their device pointer): exactly one entry, zero_copy for the
    cudaMalloc site, supported by tiny_storm, with a gain; recorded without it,
    no zero_copy entry and a note that says how to get one;
  - pageable_loop 8 32M: the H2D and the D2H call sites, each `register` (the
    same 32 MiB buffers every iteration), supported by rewrite_candidates; the
    device buffer uploaded whole every iteration is a speculative zero_copy
    candidate: held back and named by default, written and marked so with
    --speculative; a default policy names only findings the report lists;
  - an existing file is replaced (a new file renamed over it: a hard link to
    the old one keeps the old content), --force still accepted; `cuxfer
    record --policy` takes the written file and refuses a bad one with one
    line and exit 2.

Exit status: 0 pass, 1 fail, 77 skip (the app printed "no GPU" and exited 77).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

SKIP = 77
failures: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        failures.append(what)
        print("FAIL: " + what, flush=True)


def run(cmd: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    print("+ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    sys.stdout.write(p.stdout + p.stderr)
    return p


def source_line(app_source: Path, pattern: str) -> int:
    for i, line in enumerate(app_source.read_text().splitlines(), 1):
        if re.search(pattern, line):
            return i
    raise SystemExit(f"{pattern!r} not in {app_source}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--sim", required=True, help="directory of the simulated test apps")
    ap.add_argument("--mode", default="simshared")
    ap.add_argument("--testapps", required=True, help="testapps/ source directory (for line numbers)")
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    out = Path(a.workdir)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    env = dict(os.environ)
    env["CUXFER_PROFILE_DIR"] = "/nonexistent/cuxfer-test-profiles"  # hermetic estimates
    for k in ("CUXFER_REWRITE", "CUXFER_POLICY", "CUXFER_FINGERPRINT", "CUXFER_FINGERPRINT_MIN"):
        env.pop(k, None)
    sim = Path(a.sim)
    tiny_app = sim / f"tiny_storm-{a.mode}"
    loop_app = sim / f"pageable_loop-{a.mode}"

    # tiny_storm, its device pointers recorded.
    p = run([a.cuxfer, "record", "-q", "-o", str(out / "tiny"), "--", str(tiny_app), "5000", "64"],
            dict(env, CUXFER_FINGERPRINT_MIN="64"))
    if p.returncode == SKIP:
        return SKIP
    check(p.returncode == 0, f"record tiny_storm exited {p.returncode}")
    policy = out / "tiny.json"
    p = run([a.cuxfer, "policy", "-o", str(policy), str(out / "tiny")], env)
    check(p.returncode == 0, f"policy tiny exited {p.returncode}")
    doc = json.loads(policy.read_text())
    check(doc["schema"] == "cuxfer.policy/1", f"schema {doc['schema']!r}")
    zero = [e for e in doc["entries"] if e["path"] == "zero_copy"]
    check(len(zero) == 1, f"expected one zero_copy entry, got {len(zero)}: {doc['entries']}")
    if zero:
        e = zero[0]
        site = e["site"]
        check(site["kind"] == "allocation", f"zero_copy site kind {site['kind']!r}")
        check(re.fullmatch(r"[0-9a-f]{2,128}", site["build_id"]) is not None, f"build id {site['build_id']!r}")
        check(re.fullmatch(r"0x[0-9a-f]+", site["offset"]) is not None, f"offset {site['offset']!r}")
        check(site.get("module") == str(tiny_app), f"module {site.get('module')!r}")
        malloc_line = source_line(Path(a.testapps) / "tiny_storm.cpp", r"cudaMalloc\(")
        if "source" in site:  # line info (Debug/RelWithDebInfo builds)
            check(site["source"].endswith(f"tiny_storm.cpp:{malloc_line}"),
                  f"zero_copy source {site['source']!r}, expected the cudaMalloc line {malloc_line}")
        check(e["findings"] == ["tiny_storm"], f"zero_copy findings {e['findings']}")
        check(e.get("estimated_gain_ns", 0) > 0, "zero_copy without a gain")
        check("5000 tiny H2D" in e.get("reason", ""), f"zero_copy reason {e.get('reason')!r}")
    check(all(e["site"]["kind"] == "call" for e in doc["entries"] if e["path"] != "zero_copy"),
          "only the zero_copy entry is an allocation site")

    # An existing file is replaced, as every command's output is (docs/cli.md,
    # "Files the commands write"): renamed over, so a hard link keeps the old
    # content; --force is still accepted.
    written = policy.read_text()
    old_link = out / "policy.old"
    os.link(policy, old_link)
    p = run([a.cuxfer, "policy", "-q", "-o", str(policy), str(out / "tiny")], env)
    check(p.returncode == 0 and p.stdout == "", f"policy over an existing file exited {p.returncode}, {p.stderr!r}")
    check(policy.read_text() == written and old_link.read_text() == written and not os.path.samefile(policy, old_link),
          "policy over an existing file: not replaced by a new file")
    p = run([a.cuxfer, "policy", "-q", "--force", "-o", str(policy), str(out / "tiny")], env)
    check(p.returncode == 0 and p.stdout == "", f"policy --force -q exited {p.returncode}, printed {p.stdout!r}")

    # Without device pointers: no zero_copy entry, and a note says why.
    p = run([a.cuxfer, "record", "-q", "-o", str(out / "tiny_nofp"), "--", str(tiny_app), "5000", "64"], env)
    check(p.returncode == 0, f"record tiny_storm (no fingerprints) exited {p.returncode}")
    p = run([a.cuxfer, "policy", "-o", str(out / "tiny_nofp.json"), str(out / "tiny_nofp")], env)
    check(p.returncode == 0, f"policy tiny_nofp exited {p.returncode}")
    check("CUXFER_FINGERPRINT_MIN=1" in p.stdout, "no note about recording device pointers")
    nofp = json.loads((out / "tiny_nofp.json").read_text())
    check(not [e for e in nofp["entries"] if e["path"] == "zero_copy"], "zero_copy without device pointers")

    # pageable_loop: both copy sites registered. The rewrite_candidates finding compares the
    # simulated copies with a nominal 50 GB/s pinned reference, and memmove of cache-resident
    # buffers beat that now and then (2 MiB: 38-42 us a copy), so simcuda makes these pageable
    # copies 2 GB/s (docs/simcuda.md); 32 MiB buffers leave the caches as well.
    p = run([a.cuxfer, "record", "-q", "-o", str(out / "loop"), "--", str(loop_app), "8", "32M"],
            dict(env, SIMCUDA_PAGEABLE_US_PER_MIB="500"))
    check(p.returncode == 0, f"record pageable_loop exited {p.returncode}")
    # The device buffer is uploaded whole every iteration: a speculative
    # zero_copy candidate, which no report finding supports. Held back by
    # default (the summary names it); --speculative writes it, marked.
    held_policy = out / "loop-held.json"
    p = run([a.cuxfer, "policy", "-o", str(held_policy), str(out / "loop")], env)
    check(p.returncode == 0, f"policy loop exited {p.returncode}")
    held = json.loads(held_policy.read_text())
    check([e["path"] for e in held["entries"]] == ["register", "register"],
          f"default policy: expected the two register entries only: {held['entries']}")
    check("held back 1 speculative candidate" in p.stdout and "--speculative" in p.stdout and
          "zero_copy: all 32.0 MiB of this allocation uploaded 8 times" in p.stdout,
          "default policy: the summary does not name the held-back speculative candidate")
    loop_policy = out / "loop.json"
    p = run([a.cuxfer, "policy", "--speculative", "-o", str(loop_policy), str(out / "loop")], env)
    check(p.returncode == 0, f"policy --speculative loop exited {p.returncode}")
    loop = json.loads(loop_policy.read_text())
    regs = [e for e in loop["entries"] if e["path"] == "register"]
    whole = [e for e in loop["entries"] if e["path"] == "zero_copy"]
    check(len(loop["entries"]) == 3 and len(regs) == 2, f"expected two register entries and one zero_copy: "
                                                       f"{loop['entries']}")
    check(len(whole) == 1 and whole[0]["findings"] == ["whole_uploads"] and
          whole[0]["site"]["kind"] == "allocation" and "speculative" in whole[0].get("reason", "") and
          whole[0].get("comment", "").startswith("SPECULATIVE: ") and "cuxfer tune" in whole[0]["comment"],
          f"whole_uploads zero_copy entry: {whole}")
    check(all("comment" not in e for e in regs), f"register entries marked: {regs}")
    check("1 entry is SPECULATIVE" in loop.get("comment", ""), f"file comment {loop.get('comment')!r}")
    summary_rows = [l for l in p.stdout.splitlines() if l.startswith("  zero_copy ")]
    check(len(summary_rows) == 1 and "whole_uploads (speculative)" in summary_rows[0],
          f"--speculative summary rows {summary_rows}")
    check("3 entries (2 call sites, 1 allocation site), 1 of them SPECULATIVE" in p.stdout and
          "SPECULATIVE: 1 entry" in p.stdout, "--speculative summary does not say which entry is speculative")

    # The report and the policy agree on what was found: every finding a
    # default policy's entries name is one the report lists; also for the
    # demo's app (scripts/demo.sh), whose buffers are uploaded whole too.
    demo_app = sim / f"async_streams-{a.mode}"
    p = run([a.cuxfer, "record", "-q", "-o", str(out / "demo"), "--", str(demo_app), "8", "4M"], env)
    check(p.returncode == 0, f"record async_streams exited {p.returncode}")
    demo_policy = out / "demo.json"
    p = run([a.cuxfer, "policy", "-o", str(demo_policy), str(out / "demo")], env)
    check(p.returncode == 0 and "held back 2 speculative candidates" in p.stdout,
          f"policy of the demo's run: exit {p.returncode}, no held-back candidates said")
    for run_dir, policy_file in ((out / "loop", held_policy), (out / "tiny", policy), (out / "demo", demo_policy)):
        r = run([a.cuxfer, "report", "--json", str(run_dir)], env)
        listed = {f["kind"] for f in json.loads(r.stdout).get("findings", [])} if r.returncode == 0 else set()
        named = {f for e in json.loads(policy_file.read_text())["entries"] for f in e.get("findings", [])}
        check(named <= listed, f"{policy_file.name}: entries name findings {sorted(named - listed)} "
                               f"that the report does not list ({sorted(listed)})")
    lines = {source_line(Path(a.testapps) / "pageable_loop.cpp", r"cudaMemcpyHostToDevice"),
             source_line(Path(a.testapps) / "pageable_loop.cpp", r"cudaMemcpyDeviceToHost")}
    for e in regs:
        check(e["site"]["kind"] == "call", f"register site kind {e['site']['kind']!r}")
        check("rewrite_candidates" in e["findings"], f"register findings {e['findings']}")
        check(e.get("min_bytes") == 1 << 20, f"register min_bytes {e.get('min_bytes')}")
        check(e.get("estimated_gain_ns", 0) > 0, "register entry without a gain")
    if all("source" in e["site"] for e in regs):
        got = {int(e["site"]["source"].rsplit(":", 1)[1]) for e in regs}
        check(got == lines, f"register sites at lines {sorted(got)}, expected {sorted(lines)}")
    gains = [e["estimated_gain_ns"] for e in loop["entries"]]
    # For applying each call-site path on its own below.
    only_calls = dict(loop, entries=regs)
    loop_policy_calls = out / "loop_calls.json"
    loop_policy_calls.write_text(json.dumps(only_calls))
    check(gains == sorted(gains, reverse=True), "entries not sorted by gain")

    # cuxfer record --policy: the written file is accepted; a bad one is one line, exit 2.
    p = run([a.cuxfer, "record", "-q", "-o", str(out / "applied"), "--policy", str(loop_policy), "--",
             str(loop_app), "2", "64K"], env)
    check(p.returncode == 0, f"record --policy exited {p.returncode}")
    bad = out / "bad.json"
    bad.write_text('{"schema": "cuxfer.policy/1", "entries": [{"site": {"kind": "call", "build_id": "ab", '
                   '"offset": "0x10"}, "path": "pin"}]}\n')
    p = run([a.cuxfer, "record", "-q", "-o", str(out / "bad"), "--policy", str(bad), "--", str(loop_app), "2", "64K"],
            env)
    check(p.returncode == 2, f"record --policy BAD exited {p.returncode}")
    check(p.stderr == f"cuxfer record: --policy {bad}: entries[0].path: unknown path 'pin' "
                      "(passthrough, stage, register, zero_copy or exclude)\n", f"stderr {p.stderr!r}")

    # The shim applies them (the data checks of the apps must pass in every run).
    def report(trace_dir: Path) -> dict:
        p = run([a.cuxfer, "report", "--json", str(trace_dir)], env)
        check(p.returncode == 0, f"report {trace_dir} exited {p.returncode}")
        return json.loads(p.stdout) if p.returncode == 0 else {}

    def apply(name: str, policy_file: Path, app: list[str], extra: list[str] | None = None) -> dict:
        p = run([a.cuxfer, "record", "-q", "-o", str(out / name), "--policy", str(policy_file), *(extra or []),
                 "--", *app], env)
        check(p.returncode == 0, f"record --policy {policy_file.name} ({name}) exited {p.returncode}")
        r = report(out / name)
        notes = [n for proc in r.get("processes", []) for n in proc.get("notes", [])]
        check(any(n.startswith("policy: ") and " bound to loaded modules" in n for n in notes),
              f"{name}: no policy note: {notes}")
        return r.get("rewrite", {})

    # zero_copy: the tiny copies' device buffer is mapped host memory; the
    # 5000 uploads and the final download are host memcpys.
    rw = apply("tiny_zero_copy", policy, [str(tiny_app), "5000", "64"])
    check(rw.get("zero_copy_allocations") == 1, f"zero_copy_allocations {rw.get('zero_copy_allocations')}")
    check(rw.get("zero_copy_calls") == 5001, f"zero_copy_calls {rw.get('zero_copy_calls')} (5000 H2D + 1 D2H)")
    check(rw.get("staged_calls") == 0 and rw.get("registered_calls") == 0, f"tiny: other paths used: {rw}")

    # register: from the first copy of each site, not after reuse.
    rw = apply("loop_register", loop_policy_calls, [str(loop_app), "8", "2M"])
    check(rw.get("registered_calls") == 16, f"registered_calls {rw.get('registered_calls')} (8 H2D + 8 D2H)")
    check(rw.get("registrations") == 2, f"registrations {rw.get('registrations')} (the two 2 MiB buffers)")

    # stage, and exclude (which wins over --rewrite=pin's defaults).
    for path, extra, want in (("stage", [], {"staged_calls": 16, "registered_calls": 0}),
                              # no libc hooks without a register entry: still the app's own calls
                              ("passthrough", [], {"staged_calls": 0, "registered_calls": 0,
                                                   "passthrough_pageable_calls": 16}),
                              ("exclude", ["--rewrite=pin"], {"staged_calls": 0, "registered_calls": 0,
                                                              "passthrough_pageable_calls": 16})):
        doc = json.loads(loop_policy_calls.read_text())
        for e in doc["entries"]:
            e["path"] = path
        f = out / f"loop_{path}.json"
        f.write_text(json.dumps(doc))
        rw = apply(f"loop_{path}", f, [str(loop_app), "8", "2M"], extra)
        for k, v in want.items():
            check(rw.get(k) == v, f"{path}: {k} {rw.get(k)}, expected {v}")

    # The whole policy: the device buffer becomes mapped host memory, so both
    # copies are host memcpys and the call-site entries have nothing to do.
    rw = apply("loop_all", loop_policy, [str(loop_app), "8", "2M"])
    check(rw.get("zero_copy_allocations") == 1 and rw.get("zero_copy_calls") == 16,
          f"loop_all: zero copy {rw.get('zero_copy_allocations')} allocations, {rw.get('zero_copy_calls')} copies")

    if not failures:
        print("PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
