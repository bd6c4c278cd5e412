"""cuxfer: finds the slow host<->device copies of CUDA programs.

The package carries the native tool: ``bin/cuxfer`` (the command),
``bin/cuxfer-calibrate``, ``lib/libcuxfer.so`` (the library preloaded into the
recorded program) and ``lib/libcuxfer_memhooks.so``. The ``cuxfer`` console
script and ``python -m cuxfer`` run the command; see ``cuxfer help``.
"""
from __future__ import annotations

import os

__all__ = ["command_path", "shim_path", "cupti_search_path"]

_HERE = os.path.dirname(os.path.abspath(__file__))


def command_path() -> str:
    """The native ``cuxfer`` program inside the package."""
    return os.path.join(_HERE, "bin", "cuxfer")


def shim_path() -> str:
    """``libcuxfer.so``, which ``cuxfer record`` preloads."""
    return os.path.join(_HERE, "lib", "libcuxfer.so")


# Where the nvidia wheels put libcupti.so.13: CUDA 13 wheels share one
# folder (nvidia/cu13/lib); the older layout gave CUPTI a folder of its own.
_CUPTI_FOLDERS = ("nvidia/cu13/lib", "nvidia/cuda_cupti/lib")


def cupti_search_path(paths: list[str] | None = None) -> list[str]:
    """The folders on ``paths`` (default ``sys.path``) that hold the
    nvidia-cuda-cupti wheel's ``libcupti.so.13``, first first.

    The shim looks beside the CUDA runtime the program loaded first; these
    folders are its fallback for a program whose runtime came from elsewhere.
    """
    import sys

    found: list[str] = []
    for entry in sys.path if paths is None else paths:
        for sub in _CUPTI_FOLDERS:
            folder = os.path.join(entry or os.curdir, sub)
            if os.path.isfile(os.path.join(folder, "libcupti.so.13")):
                folder = os.path.abspath(folder)
                if folder not in found:
                    found.append(folder)
    return found
