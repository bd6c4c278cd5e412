#!/usr/bin/env python3
"""The preloaded libraries hold no C++ exception machinery of their own
(issue 14): built with -fno-exceptions, they import neither the throwing and
catching entry points of the C++ ABI nor the unwinder's resume nor the C++
personality routine, so no try, catch, throw or cleanup landing pad of the
shim's can run inside the app's process.

  check_no_exceptions.py LIB... [--libc-only LIB] [--objects FILE...]

--libc-only: that library must need nothing but libc (libcuxfer_memhooks.so
runs inside malloc and free, before and after anything else is loaded).

Nor does it import libstdc++'s std::__throw_* helpers (its inline code's way
to throw: the shim defines its own, which abort on a bug, core/no_throw.cpp)
or the global operator new and delete (the shim's own never throw and stop
recording when memory runs out, core/allocation.cpp).

A library that carries libstdc++ statically (the shim does: cmake/Linking.cmake)
holds libstdc++'s own code, compiled with exceptions: its cleanup landing pads
import the unwinder's _Unwind_Resume, and its throw machinery is linked in,
local. There the import check cannot see the shim's own code, so --objects
names the shim's object files and static archives, each of which must refer
to none of the machinery (a throw, catch or landing pad of the shim's own);
the throw helpers they refer to are the shim's aborting ones, which the link
would refuse to have twice.

Nor do the shim's own objects refer to __cxa_atexit: an object of static
storage with a destructor, which the exit would destroy while other threads
may still be inside a hook that uses it (a destroyed polymorphic object calls
its base's pure virtual). The shim's long-lived objects are made with new
and never destroyed. Exit 0 pass, 1 fail.
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
    objects = []
    if "--objects" in args:
        i = args.index("--objects")
        objects = args[i + 1:]
        del args[i:]
    if not args and not libc_only:
        print("usage: check_no_exceptions.py LIB... [--libc-only LIB] [--objects FILE...]")
        return 2
    bad = False
    for lib in libc_only:
        out = subprocess.run(["readelf", "-d", lib], capture_output=True, text=True, check=True).stdout
        needed = [l.split("[")[1].rstrip("]") for l in out.splitlines() if "(NEEDED)" in l]
        extra = [n for n in needed if not n.startswith("libc.so")]
        print(f"{lib}: needs {' '.join(needed) or 'nothing'}" + (f"; more than libc: {' '.join(extra)}" if extra else ""))
        bad |= bool(extra)
    static_cxx = False
    for lib in args + libc_only:
        dyn = subprocess.run(["readelf", "-d", lib], capture_output=True, text=True, check=True).stdout
        carries_libstdcxx = "libstdc++.so" not in dyn and lib not in libc_only
        out = subprocess.run(["nm", "-D", "--undefined-only", lib], capture_output=True, text=True, check=True).stdout
        names = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
        # libstdc++'s own landing pads, linked in: the shim's are checked in its objects.
        allowed = {"_Unwind_Resume", "_Unwind_Resume_or_Rethrow"} if carries_libstdcxx and names & {"_Unwind_Resume"} else set()
        static_cxx |= bool(allowed)
        found = sorted(n for n in names if n in FORBIDDEN and n not in allowed)
        helpers = sorted(n for n in names if n.startswith("_ZSt") and "__throw_" in n)
        allocators = sorted(n for n in names if n.startswith(("_Znw", "_Zna", "_Zdl", "_Zda")))
        print(f"{lib}: {len(names)} imports; exception machinery: {' '.join(found) or 'none'}; "
              f"libstdc++ throw helpers: {' '.join(helpers) or 'none'}; "
              f"global operator new/delete: {' '.join(allocators) or 'none'}")
        bad |= bool(found) or bool(helpers) or bool(allocators)
    if static_cxx and not objects:
        print("a library carries libstdc++ statically: name the shim's own objects with --objects")
        bad = True
    for obj in objects:
        out = subprocess.run(["nm", "--undefined-only", obj], capture_output=True, text=True, check=True).stdout
        names = {line.split()[-1] for line in out.splitlines() if line.strip() and not line.endswith(":")}
        found = sorted(n for n in names if n in FORBIDDEN)
        if found:
            print(f"{obj}: refers to exception machinery: {' '.join(found)}")
        if "__cxa_atexit" in names:
            print(f"{obj}: registers a destructor to run at exit (an object of static storage that has one)")
        bad |= bool(found) or "__cxa_atexit" in names
    if objects:
        print(f"{len(objects)} object file(s) and archive(s) of the shim's own code: "
              f"{'no exception machinery, no destructor run at exit' if not bad else 'see above'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
