"""Small pieces the e2e check scripts share: the command after `--`, a fresh
work directory, a CPython of a given version, and the verdict (each failure on its own line, exit status)."""
import glob
import os
import shutil
import subprocess
from pathlib import Path


def command_after_dashes(rest: list[str]) -> list[str]:
    return rest[1:] if rest and rest[0] == "--" else rest


def fresh_dir(path: str) -> Path:
    out = Path(path)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
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


def find_python(version: str) -> str | None:
    """An interpreter of CPython `version` ("3.12"): on PATH, under pyenv, in /usr; None when absent."""
    candidates = [shutil.which("python" + version)]
    home = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates += sorted(glob.glob(f"{home}/versions/{version}.*/bin/python{version}"))
    candidates += [f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            out = subprocess.run([c, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                 capture_output=True, text=True)
            if out.returncode == 0 and out.stdout.strip() == version:
                return c
    return None
