"""Small pieces the e2e check scripts share: the command after `--`, a fresh
work directory, the arguments of a Python app recorded on the simulated CUDA, a CPython of a given
version, a test script's `# site:` lines, a report's calls per line, the verdict (each failure on its own line, exit status), and a run that says where a hung
command waits."""
import argparse
import glob
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path


def command_after_dashes(rest: list[str]) -> list[str]:
    return rest[1:] if rest and rest[0] == "--" else rest


def fresh_dir(path: str) -> Path:
    out = Path(path)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    return out


def recorded_python_app_args() -> argparse.Namespace:
    """--cuxfer B/bin/cuxfer --shim B/lib/libcuxfer.so --libcudart B/simcuda/lib/libcudart.so --workdir DIR
    [--cupti B/simcuda/lib/libcupti.so]: what a check that records one of testapps/python's scripts is
    given (--cupti: the stand-in CUPTI, for checks that need one)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--libcudart", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--cupti")
    return ap.parse_args()


def shim_app_args(doc: str) -> tuple[argparse.Namespace, list[str]]:
    """--cuxfer B/bin/cuxfer --shim B/lib/libcuxfer.so --workdir DIR -- APP ARGS...: what a check that
    records one test app is given. Returns the options and the app's command line."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuxfer", required=True)
    ap.add_argument("--shim", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    return a, command_after_dashes(a.command)


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without cuxfer's or the simulated driver's variables or a preload, with no machine
    profile to read (the defaults' thresholds), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUXFER_", "SIMCUDA_")) and k != "LD_PRELOAD"}
    env["CUXFER_PROFILE_DIR"] = "/nonexistent/cuxfer-test-profiles"
    env.update(extra)
    return env


def site_markers(path: Path) -> dict[str, int]:
    """The lines of a test script marked `# site: TAG`, by tag (the lines a report must name)."""
    lines = {}
    for n, text in enumerate(path.read_text().splitlines(), start=1):
        m = re.search(r"# site: (\w+)", text)
        if m:
            lines[m.group(1)] = n
    return lines


def calls_by_line(report: dict) -> dict[tuple[str, int], int]:
    """A `cuxfer report --json` report's calls per (file, line) of its call sites, summed over
    processes; a real file by its resolved path, a pseudo-file (<string>) as it is."""
    out: dict[tuple[str, int], int] = {}
    for s in report["callsites"]:
        f = s["file"] or ""
        key = (str(Path(f).resolve()) if f.startswith("/") else f, s["line"])
        out[key] = out.get(key, 0) + s["calls"]
    return out


def verdict(fails: list[str]) -> int:
    """Prints PASS, or FAIL with one line per failure; returns the exit status."""
    if fails:
        print("FAIL:")
        for f in fails:
            print("  -", f)
        return 1
    print("PASS")
    return 0


def find_python(version: str, debug: bool = False) -> str | None:
    """An interpreter of CPython `version` ("3.12"): on PATH, under pyenv, in /usr; None when absent.
    debug: its debug build (python3.Nd) instead."""
    name = "python" + version + ("d" if debug else "")
    candidates = [shutil.which(name)]
    home = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates += sorted(glob.glob(f"{home}/versions/{version}.*/bin/{name}"))
    candidates += [f"/usr/bin/{name}", f"/usr/local/bin/{name}"]
    want = f"{version} {debug}"
    for c in candidates:
        if c and os.access(c, os.X_OK):
            out = subprocess.run([c, "-c", "import sys; print('%d.%d' % sys.version_info[:2], "
                                  "hasattr(sys, 'gettotalrefcount'))"], capture_output=True, text=True)
            if out.returncode == 0 and out.stdout.strip() == want:
                return c
    return None


def _process_tree(root: int) -> list[int]:
    """`root` and its descendants, parents first (from /proc: no psutil)."""
    children: dict[int, list[int]] = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            text = Path(stat).read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2:].split()  # the name may hold spaces and parentheses
        children.setdefault(int(fields[1]), []).append(int(stat.split("/")[2]))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop(0)
        tree.append(pid)
        todo += sorted(children.get(pid, []))
    return tree


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace").strip()
    except OSError:
        return "?"


def hang_report(root: int) -> str:
    """Where each thread of `root`'s process tree waits: its state, kernel wait channel and system
    call (/proc), and with gdb on the machine every thread's stack."""
    lines = []
    for pid in _process_tree(root):
        cmdline = _read(f"/proc/{pid}/cmdline").replace("\0", " ")
        lines.append(f"pid {pid}: {cmdline[:200]}")
        for task in sorted(glob.glob(f"/proc/{pid}/task/*"), key=lambda t: int(t.rsplit("/", 1)[1])):
            stat = _read(f"{task}/stat")
            state = stat[stat.rfind(")") + 2:].split()[0] if ")" in stat else "?"
            syscall = _read(f"{task}/syscall").split(" ")[0]
            lines.append(f"  tid {task.rsplit('/', 1)[1]} {_read(task + '/comm'):<16} state {state} "
                         f"wchan {_read(task + '/wchan')} syscall {syscall}")
        gdb = shutil.which("gdb")
        if gdb:
            try:
                bt = subprocess.run([gdb, "-p", str(pid), "-batch", "-nx", "-ex", "set pagination off",
                                     "-ex", "thread apply all bt 25"], capture_output=True, text=True, timeout=60)
                frames = [l for l in bt.stdout.splitlines() if l.startswith(("Thread ", "#"))]
                lines += ["  " + l for l in frames[:400]]
            except (OSError, subprocess.TimeoutExpired) as e:
                lines.append(f"  gdb: {e}")
    return "\n".join(lines)


def run_diagnosed(cmd: list[str], timeout: float, capture: tuple[bool, bool] = (True, True),
                  **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run(cmd, text=True), stdout and stderr captured as `capture` says (else they go
    where ours go). If it outlives `timeout`, prints where every thread of its process tree waits
    (hang_report) and the tail of what it wrote, kills that tree, and raises
    subprocess.TimeoutExpired: a hang says where it is."""
    pipe = [subprocess.PIPE if c else None for c in capture]
    p = subprocess.Popen(cmd, stdout=pipe[0], stderr=pipe[1], text=True, **kwargs)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"HUNG after {timeout} s: {' '.join(cmd)[:300]}\n{hang_report(p.pid)}", flush=True)
        for pid in reversed(_process_tree(p.pid)):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        out, err = p.communicate()
        for name, text in (("stdout", out), ("stderr", err)):
            for line in (text or "").splitlines()[-20:]:
                print(f"  [{name}] {line}")
        raise
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def zero_copy_policy(a, app: list[str], work: Path, env: dict[str, str], fails: list[str]) -> Path | None:
    """The zero-copy context tests' policy: `app` recorded under a.shim, `cuxfer
    policy` of that run, kept to its one zero_copy entry (alloc_buffer's
    allocation: the tests are about it, not the copies' own paths), written to
    work/policy.json. None, with the reason in `fails`, when a step fails."""
    import json
    observed = run_diagnosed([a.cuxfer, "record", "-q", "--shim", a.shim, "-o", str(work / "observe"), "--", *app],
                             120, env=clean_env(CUXFER_FINGERPRINT_MIN="1"))
    if observed.returncode != 0:
        fails.append(f"observed run exited {observed.returncode}: {observed.stderr}")
        return None
    policy = work / "policy.json"
    p = run_diagnosed([a.cuxfer, "policy", "-q", "-o", str(policy), str(work / "observe")], 60, env=env)
    if p.returncode != 0:
        fails.append(f"cuxfer policy exited {p.returncode}: {p.stderr}")
        return None
    doc = json.loads(policy.read_text())
    entries = doc["entries"]
    zero = [e for e in entries if e["path"] == "zero_copy"]
    print("policy:", [(e["path"], e["site"].get("symbol"), e["site"].get("source")) for e in entries])
    if len(zero) != 1 or "alloc_buffer" not in zero[0]["site"].get("symbol", ""):
        fails.append(f"expected one zero_copy entry for alloc_buffer's allocation: {entries}")
        return None
    doc["entries"] = zero
    policy.write_text(json.dumps(doc))
    return policy


def zero_copy_report_says_mapped(a, run_dir: Path, env: dict[str, str], fails: list[str]) -> bool:
    """The zero-copy context tests' report check: `cuxfer report` of run_dir says
    the policy's allocations were mapped host memory, with no fallback note.
    False, with the reason in `fails`, when the report itself failed."""
    rep = run_diagnosed([a.cuxfer, "report", str(run_dir)], 60, env=env)
    if rep.returncode != 0:
        fails.append(f"report failed: {rep.stderr}")
        return False
    if "device allocations named by the policy are mapped host memory" not in rep.stdout:
        fails.append("the report does not say the policy's allocations were mapped host memory")
    if "allocations stay on the device" in rep.stdout:
        fails.append("zero copy fell back: " + next(l for l in rep.stdout.splitlines() if "stay on the device" in l))
    return True
