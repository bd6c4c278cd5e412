#!/usr/bin/env python3
"""`cuxfer export --sqlite` end to end (stdlib only), on the simulated CUDA with
two apps of exactly known traffic (docs/testapps.md): mixed 2 1M (2 x 1 MiB each
way from pageable, pinned and registered memory) and tiny_storm 1200 64 (1200
pageable H2D copies of 64 B and one D2H of 76 800 B, a tiny_storm finding).

  - the database of both recordings agrees with `cuxfer report --json` of the
    same traces: processes, copies/bytes/CPU time per class, per call site
    (names, processes, stack depths), findings per call site; and with the
    apps' declared traffic;
  - meta says cuxfer.sqlite/1; the computed columns (class, cpu_blocked_ns);
  - the three example queries of docs/sqlite.md, read from the file, run and
    give the report's numbers;
  - an existing FILE is replaced (exit 0, one line on stdout naming it), and
    --force is still accepted;
  - an unwritable directory, and traces that cannot be read: exit 1, one
    line, no file (nor temporary file) left behind.

  run_sqlite_export.py --cuxfer build/bin/cuxfer --sim build/testapps/sim --docs docs/sqlite.md --workdir DIR

Exit status: 0 pass, 1 fail, 77 skip (the app printed "no GPU" and exited 77).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from e2e_util import fresh_dir, verdict

SKIP = 77
MiB = 1 << 20
fails: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        fails.append(what)
        print("FAIL: " + what, flush=True)


def run(cmd: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    print("+ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    sys.stdout.write(p.stderr)
    return p


def lines(text: str) -> list[str]:
    return [l for l in text.splitlines() if l]


def doc_queries(path: Path) -> dict[str, str]:
    text = path.read_text()
    return {m.group(1): m.group(2) for m in
            re.finditer(r"<!-- query: (\w+) -->\s*```sql\n(.*?)```", text, re.S)}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--sim", required=True, help="directory of the simulated test apps")
    ap.add_argument("--docs", required=True, help="docs/sqlite.md (its example queries are run)")
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    out = fresh_dir(a.workdir)
    env = dict(os.environ)
    env.setdefault("CUXFER_PROFILE_DIR", "/nonexistent/cuxfer-test-profiles")
    env.pop("CUXFER_REWRITE", None)
    env.pop("CUXFER_POLICY", None)
    apps = {"mixed": ["2", "1M"], "tiny_storm": ["1200", "64"]}
    dirs = []
    for app, args in apps.items():
        d = out / app
        p = run([a.cuxfer, "record", "-q", "-o", str(d), "--", f"{a.sim}/{app}-simshared", *args], env)
        if p.returncode == SKIP:
            return SKIP
        if p.returncode != 0:
            print(f"FAIL: record {app} exited {p.returncode}")
            return 1
        dirs.append(str(d))

    db = out / "job.db"
    p = run([a.cuxfer, "export", "--sqlite", str(db), *dirs])
    check(p.returncode == 0, f"export exited {p.returncode}")
    check(db.is_file(), "no database written")
    check(sorted(x.name for x in out.iterdir()) == ["job.db", "mixed", "tiny_storm"],
          f"files beside the database: {sorted(x.name for x in out.iterdir())}")
    if fails:
        return verdict(fails)
    p = run([a.cuxfer, "report", "--json", *dirs])
    check(p.returncode == 0, f"report exited {p.returncode}")
    rep = json.loads(p.stdout)
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    q = lambda sql, *args: con.execute(sql, args).fetchall()

    meta = dict(q("SELECT key, value FROM meta"))
    check(meta.get("schema") == "cuxfer.sqlite/1", f"meta schema {meta.get('schema')!r}")
    check(bool(meta.get("cuxfer_version")) and bool(meta.get("created")), f"meta {meta}")
    check(meta.get("timing") == rep["timing"], f"meta timing {meta.get('timing')} != report {rep['timing']}")

    # Processes: one per trace, as the report lists them.
    procs = q("SELECT id, pid, ppid, trace_path, simulated, cupti_state, complete FROM processes ORDER BY id")
    check(len(procs) == len(rep["processes"]) == 2, f"{len(procs)} processes, report {len(rep['processes'])}")
    for row, rp in zip(procs, rep["processes"]):
        check(row[1:] == (rp["pid"], rp["ppid"], rp["trace"], 1, rp["cupti"]["state"], 1),
              f"process row {row} vs report {rp['pid'], rp['ppid'], rp['trace'], rp['cupti']}")

    # Copies per class: the database, the report and the apps' declared traffic agree.
    app_copies = "kind = 'copy' AND failed = 0 AND shim = 0"
    got = {(r[0], r[1]): r[2:] for r in q(
        f"SELECT direction, memory, count(*), sum(bytes), sum(cpu_blocked_ns), min(class = direction || ' ' || memory)"
        f" FROM calls WHERE {app_copies} GROUP BY direction, memory")}
    want = {(c["direction"], c["memory"]): (c["calls"], c["bytes"], c["cpu_blocked_ns"], 1) for c in rep["classes"]}
    check(got == want, f"classes: database {got} != report {want}")
    declared = {("H2D", "pageable"): (2 + 1200, 2 * MiB + 1200 * 64), ("D2H", "pageable"): (2 + 1, 2 * MiB + 1200 * 64),
                ("H2D", "pinned"): (2, 2 * MiB), ("D2H", "pinned"): (2, 2 * MiB),
                ("H2D", "registered"): (2, 2 * MiB), ("D2H", "registered"): (2, 2 * MiB)}
    check({k: v[:2] for k, v in got.items()} == declared, f"classes: database {got} != declared traffic {declared}")
    n_calls, cpu_ok = q("SELECT count(*), min(cpu_blocked_ns = end_ns - start_ns) FROM calls")[0]
    check(cpu_ok == 1, "cpu_blocked_ns is not end_ns - start_ns")
    total = q(f"SELECT count(*), sum(bytes) FROM calls WHERE {app_copies}")[0]
    check(total == (rep["totals"]["calls"], rep["totals"]["bytes"]), f"totals {total} vs report {rep['totals']}")
    allocs = q("SELECT count(*) FROM calls WHERE kind = 'device_alloc' AND shim = 0")[0][0]
    check(allocs == rep["allocations"]["device"]["calls"] == 2, f"{allocs} device allocations")

    # Call sites: ids, names, processes, stacks and per-site sums as the report's.
    pid_of = {row[0]: row[1] for row in procs}
    sites = {r[0]: r[1:] for r in q("SELECT id, process, name FROM call_sites")}
    per_site = {r[0]: r[1:] for r in q(
        f"SELECT call_site, count(*), sum(bytes), sum(cpu_blocked_ns), max(cpu_blocked_ns) FROM calls"
        f" WHERE {app_copies} GROUP BY call_site")}
    depth = dict(q("SELECT call_site, count(*) FROM call_site_frames GROUP BY call_site"))
    check(len(rep["callsites"]) >= 4, f"only {len(rep['callsites'])} call sites in the report")
    for cs in rep["callsites"]:
        i = cs["id"]
        check(i in sites and sites[i][1] == cs["location"] and pid_of[sites[i][0]] == cs["pid"],
              f"site {i}: database {sites.get(i)} vs report {cs['location']!r} pid {cs['pid']}")
        check(per_site.get(i) == (cs["calls"], cs["bytes"], cs["cpu_blocked_ns"], cs["max_cpu_blocked_ns"]),
              f"site {i}: database {per_site.get(i)} vs report {cs['calls'], cs['bytes'], cs['cpu_blocked_ns']}")
        check(depth.get(i, 0) == len(cs["stack"]) > 0, f"site {i}: {depth.get(i)} frames, report {len(cs['stack'])}")
    innermost = q("SELECT count(*) FROM call_site_frames WHERE depth = 0 AND kind = 'native' AND address > 0")[0][0]
    check(innermost == len(sites), f"{innermost} innermost native frames for {len(sites)} sites")

    # Findings: per finding and site, as the report's.
    got_f = sorted(q("SELECT kind, call_site, calls, bytes, time_ns FROM findings WHERE call_site IS NOT NULL"))
    want_f = sorted((f["kind"], s["callsite"], s["calls"], s["bytes"], s["time_ns"])
                    for f in rep["findings"] for s in f["sites"])
    check(got_f == want_f and any(k == "tiny_storm" for k, *_ in got_f), f"findings {got_f} vs report {want_f}")
    storm = q("SELECT f.calls, p.pid FROM findings f JOIN processes p ON p.id = f.process WHERE kind = 'tiny_storm'")
    check([r[0] for r in storm] == [1200], f"tiny_storm finding rows {storm}")

    # The documented queries.
    queries = doc_queries(Path(a.docs))
    # bytes_by_nvtx_range needs a recording with NVTX ranges: e2e.nvtx runs it.
    check(set(queries) == {"pageable_by_site", "slowest_copies", "gpu_vs_cpu_by_direction", "bytes_by_nvtx_range"},
          f"docs/sqlite.md queries: {sorted(queries)}")
    if "pageable_by_site" in queries:
        rows = q(queries["pageable_by_site"])
        check(sum(r[3] for r in rows) == rep["pageable_share"]["pageable_bytes"] == 4 * MiB + 2 * 1200 * 64,
              f"pageable_by_site: {rows} vs report {rep['pageable_share']}")
        names = {cs["location"] for cs in rep["callsites"]}
        check(all(r[0] in names for r in rows) and rows == sorted(rows, key=lambda r: -r[3]),
              f"pageable_by_site rows {rows}")
        check(sum(r[2] for r in rows) == 2 + 2 + 1200 + 1, f"pageable_by_site copies {rows}")
    if "slowest_copies" in queries:
        rows = q(queries["slowest_copies"])
        slowest = sorted((c[0] for c in q(f"SELECT cpu_blocked_ns FROM calls WHERE kind = 'copy' AND shim = 0")),
                         reverse=True)[:10]
        check(len(rows) == 10 and [r[5] for r in rows] == slowest, f"slowest_copies {rows} vs {slowest}")
        check(rows[0][5] == max(cs["max_cpu_blocked_ns"] for cs in rep["callsites"]), "slowest copy is not the report's")
        names = {cs["location"] for cs in rep["callsites"]}
        check(all(r[6] in names for r in rows), f"slowest_copies lines {[r[6] for r in rows]}")
    if "gpu_vs_cpu_by_direction" in queries:
        rows = {r[0]: r[1:] for r in q(queries["gpu_vs_cpu_by_direction"])}
        by_dir = defaultdict(lambda: [0, 0, 0])
        for c in rep["classes"]:
            for k, f in enumerate(("calls", "bytes", "cpu_blocked_ns")):
                by_dir[c["direction"]][k] += c[f]
        # Simulated CUDA: no CUPTI, so no GPU time anywhere.
        want_dir = {d: (v[0], v[1], v[2], None, 0) for d, v in by_dir.items()}
        check(rows == want_dir, f"gpu_vs_cpu_by_direction {rows} vs report {want_dir}")
    con.close()

    # An existing file is replaced, as every command's output is (docs/cli.md,
    # "Files the commands write"); --force is still accepted.
    p = run([a.cuxfer, "export", "--sqlite", str(db), dirs[0]])
    check(p.returncode == 0 and len(lines(p.stdout)) == 1 and f"wrote {db}" in p.stdout,
          f"existing file: exit {p.returncode}, stdout {p.stdout!r}, stderr {p.stderr!r}")
    n = sqlite3.connect(str(db)).execute("SELECT count(*) FROM processes").fetchone()[0]
    check(n == 1, f"replaced: {n} processes, expected the one trace given")
    p = run([a.cuxfer, "export", "--sqlite", str(db), "--force", *dirs])
    check(p.returncode == 0, f"--force: exit {p.returncode}")
    n = sqlite3.connect(str(db)).execute("SELECT count(*) FROM processes").fetchone()[0]
    check(n == len(dirs), f"--force: {n} processes, expected {len(dirs)}")

    # An unwritable directory: one line, exit 1, nothing left behind.
    targets = [Path("/proc/self/cuxfer.db"), out / "missing" / "x.db"]
    if os.geteuid() != 0:  # root writes into a 0555 directory anyway
        ro = out / "readonly"
        ro.mkdir()
        ro.chmod(0o555)
        targets.append(ro / "x.db")
    for t in targets:
        p = run([a.cuxfer, "export", "--sqlite", str(t), *dirs])
        # The two runs exported together are said first (a warning line); then one line.
        errors = [l for l in lines(p.stderr) if "warning:" not in l]
        check(p.returncode == 1 and len(errors) == 1 and "cannot write" in p.stderr,
              f"{t}: exit {p.returncode}, stderr {p.stderr!r}")
        check(not t.exists(), f"{t} exists")
    if os.geteuid() != 0:
        check(list((out / "readonly").iterdir()) == [], "files left in the read-only directory")
    # Traces that cannot be read: exit 1 and no database.
    bad = out / "bad.trace"
    bad.write_bytes(b"not a trace")
    p = run([a.cuxfer, "export", "--sqlite", str(out / "bad.db"), str(bad)])
    check(p.returncode == 1 and not (out / "bad.db").exists(), f"unreadable trace: exit {p.returncode}")
    check(not [x for x in out.iterdir() if x.name.startswith(".")], "a temporary file was left behind")
    return verdict(fails)


if __name__ == "__main__":
    sys.exit(main())
