"""Small pieces the e2e check scripts share: the command after `--`, a fresh
work directory, and the verdict (each failure on its own line, exit status)."""
import shutil
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
