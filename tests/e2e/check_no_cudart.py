#!/usr/bin/env python3
"""check_no_cudart.py READELF BINARY...: fails if a binary needs libcudart.so*.

The -simstatic test apps stand in for nvcc's default static cudart; if one of
them picked up a shared libcudart the static-linkage tests would test nothing.
"""
import subprocess
import sys


def main() -> int:
    readelf, binaries = sys.argv[1], sys.argv[2:]
    if not binaries:
        print("usage: check_no_cudart.py READELF BINARY...")
        return 2
    bad = 0
    for b in binaries:
        out = subprocess.run([readelf, "-d", b], capture_output=True, text=True)
        if out.returncode != 0:
            print(f"FAIL: readelf {b}: {out.stderr.strip()}")
            bad += 1
            continue
        needed = [l.split("[", 1)[1].rstrip("]") for l in out.stdout.splitlines() if "(NEEDED)" in l]
        if any(n.startswith("libcudart") for n in needed):
            print(f"FAIL: {b} needs {needed}")
            bad += 1
        elif not needed:
            print(f"FAIL: {b}: no NEEDED entries parsed (readelf output changed?)")
            bad += 1
        else:
            print(f"ok: {b} needs {needed}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
