"""Shared prologue of the framework snippets: skip (exit 77) cleanly when the
framework is not importable or there is no GPU, so a GPU-tier test never
passes by testing nothing."""
import importlib
import sys

SKIP = 77
SIZE = 64 * 1024 * 1024  # bytes per transfer; run_framework.py asserts at least this much


def need(module: str):
    try:
        return importlib.import_module(module)
    except Exception as e:  # ImportError, or a broken install raising something else
        print(f"SKIP: {module} not importable ({type(e).__name__}: {e})")
        sys.exit(SKIP)


def no_gpu(why: str):
    print(f"no GPU: {why}")
    sys.exit(SKIP)
