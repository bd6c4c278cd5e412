#!/usr/bin/env python3
"""The preloaded libraries hold no C++ exception machinery of their own
(issue 14): built with -fno-exceptions, they import neither the throwing and
catching entry points of the C++ ABI nor the unwinder's resume nor the C++
personality routine, so no try, catch, throw or cleanup landing pad of the
shim's can run inside the app's process.

  check_no_exceptions.py LIB...

What is left, and printed for the record (not a failure): libstdc++'s own
std::__throw_* helpers, which its inline container code calls on exhaustion
(bad_alloc, length_error); those raise inside libstdc++. Exit 0 pass, 1 fail.
"""
import subprocess
import sys

FORBIDDEN = ("__cxa_throw", "__cxa_rethrow", "__cxa_allocate_exception", "__cxa_free_exception",
             "__cxa_begin_catch", "__cxa_end_catch", "__cxa_call_unexpected", "__cxa_guard_abort",
             "__gxx_personality_v0", "_Unwind_Resume")


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: check_no_exceptions.py LIB...")
        return 2
    bad = False
    for lib in sys.argv[1:]:
        out = subprocess.run(["nm", "-D", "--undefined-only", lib], capture_output=True, text=True, check=True).stdout
        names = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
        found = sorted(n for n in names if n in FORBIDDEN)
        helpers = sorted(n for n in names if n.startswith("_ZSt") and "__throw_" in n)
        print(f"{lib}: {len(names)} imports; exception machinery: {' '.join(found) or 'none'}; "
              f"libstdc++ throw helpers still called: {len(helpers)}")
        bad |= bool(found)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
