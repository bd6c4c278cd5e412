"""``cuxfer`` and ``python -m cuxfer``: run the native command.

The process is replaced by the native program (as the cmake and ninja wheels
do), so exit status and signals are the command's own. One thing is added on
the way: the nvidia wheels' CUPTI folders on this Python's ``sys.path``, as
``CUXFER_CUPTI_SEARCH_PATH``, for machines without a CUDA toolkit.
"""
from __future__ import annotations

import os
import sys

from cuxfer import command_path, cupti_search_path


def main() -> None:
    exe = command_path()
    if not os.access(exe, os.X_OK):
        sys.stderr.write(
            f"cuxfer: the native program {exe} is missing or not executable; "
            "reinstall the package (pip install --force-reinstall cuxfer)\n"
        )
        sys.exit(2)
    env = dict(os.environ)
    folders = cupti_search_path()
    if folders:
        given = env.get("CUXFER_CUPTI_SEARCH_PATH", "")
        env["CUXFER_CUPTI_SEARCH_PATH"] = ":".join([p for p in (given,) if p] + folders)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(exe, [exe] + sys.argv[1:], env)


if __name__ == "__main__":
    main()
