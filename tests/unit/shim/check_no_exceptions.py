#!/usr/bin/env python3
"""The preloaded libraries hold no C++ exception machinery of their own
(issue 14): built with -fno-exceptions, they import neither the throwing and
catching entry points of the C++ ABI nor the unwinder's resume nor the C++
personality routine, so no try, catch, throw or cleanup landing pad of the
shim's can run inside the app's process.

  check_no_exceptions.py LIB... [--libc-only LIB]

--libc-only: that library must need nothing but libc (libcuxfer_memhooks.so
runs inside malloc and free, before and after anything else is loaded).

Nor does it import libstdc++'s std::__throw_* helpers (its inline code's way
to throw: the shim defines its own, which abort on a bug, core/no_throw.cpp)
or the global operator new and delete (the shim's own never throw and stop
recording when memory runs out, core/allocation.cpp). Exit 0 pass, 1 fail.
"""
import subprocess
import sys

FORBIDDEN = ("__cxa_throw", "__cxa_rethrow", "__cxa_allocate_exception", "__cxa_free_exception",
             "__cxa_begin_catch", "__cxa_end_catch", "__cxa_call_unexpected", "__cxa_guard_abort",
             "__gxx_personality_v0", "_Unwind_Resume")


def main() -> int:
    args = sys.argv[1:]
    libc_only = []
    while "--libc-only" in args:
        i = args.index("--libc-only")
        if i + 1 >= len(args):
            print("usage: check_no_exceptions.py LIB... [--libc-only LIB]")
            return 2
        libc_only.append(args[i + 1])
        del args[i:i + 2]
    if not args and not libc_only:
        print("usage: check_no_exceptions.py LIB... [--libc-only LIB]")
        return 2
    bad = False
    for lib in libc_only:
        out = subprocess.run(["readelf", "-d", lib], capture_output=True, text=True, check=True).stdout
        needed = [l.split("[")[1].rstrip("]") for l in out.splitlines() if "(NEEDED)" in l]
        extra = [n for n in needed if not n.startswith("libc.so")]
        print(f"{lib}: needs {' '.join(needed) or 'nothing'}" + (f"; more than libc: {' '.join(extra)}" if extra else ""))
        bad |= bool(extra)
    for lib in args + libc_only:
        out = subprocess.run(["nm", "-D", "--undefined-only", lib], capture_output=True, text=True, check=True).stdout
        names = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
        found = sorted(n for n in names if n in FORBIDDEN)
        helpers = sorted(n for n in names if n.startswith("_ZSt") and "__throw_" in n)
        allocators = sorted(n for n in names if n.startswith(("_Znw", "_Zna", "_Zdl", "_Zda")))
        print(f"{lib}: {len(names)} imports; exception machinery: {' '.join(found) or 'none'}; "
              f"libstdc++ throw helpers: {' '.join(helpers) or 'none'}; "
              f"global operator new/delete: {' '.join(allocators) or 'none'}")
        bad |= bool(found) or bool(helpers) or bool(allocators)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
