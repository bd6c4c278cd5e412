#!/usr/bin/env python3
"""check_skip.py -- COMMAND [ARGS...]: the command must print a line containing
"no GPU" and exit 77 (run with SIMCUDA_DEVICE_COUNT=0). Proves the test apps'
skip path works, so a GPU-tier test on a machine without a GPU is reported as
skipped rather than passing silently or failing obscurely."""
import subprocess
import sys


def main() -> int:
    cmd = sys.argv[2:] if len(sys.argv) > 1 and sys.argv[1] == "--" else sys.argv[1:]
    if not cmd:
        print("usage: check_skip.py -- COMMAND [ARGS...]")
        return 2
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    ok = r.returncode == 77 and any("no GPU" in line for line in r.stdout.splitlines())
    print(("PASS" if ok else "FAIL") + f": exit {r.returncode} (want 77 and a 'no GPU' line)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
