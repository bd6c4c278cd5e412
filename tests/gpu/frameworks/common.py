"""Shared prologue of the framework snippets: skip (exit 77) cleanly when the
framework is not importable or there is no GPU, so a GPU-tier test never
passes by testing nothing."""
import ctypes
import importlib
import sys

SKIP = 77
SIZE = 64 * 1024 * 1024  # bytes per transfer; run_framework.py asserts at least this much


def require_driver():
    """No NVIDIA driver (libcuda.so.1 cannot be loaded): "no GPU", skip. Asked
    before any framework is imported, so that a machine without a GPU says so
    whatever else it lacks."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        no_gpu(f"libcuda.so.1 cannot be loaded (no NVIDIA driver: {e})")


def need(module: str):
    require_driver()
    try:
        return importlib.import_module(module)
    except Exception as e:  # ImportError, or a broken install raising something else
        print(f"SKIP: {module} not importable ({type(e).__name__}: {e})")
        sys.exit(SKIP)


def no_gpu(why: str):
    print(f"no GPU: {why}")
    sys.exit(SKIP)
