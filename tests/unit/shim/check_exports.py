#!/usr/bin/env python3
"""libcuxfer.so exports exactly the symbols it interposes and nothing of its
own dependencies (spdlog, fmt, zstd, the C++ runtime's templates): every
exported symbol an app could bind to by accident changes that app.

  check_exports.py --lib libcuxfer.so --hooks shim/symbols/hook_list.def

Allowed: the names in hook_list.def, dlsym, dlclose (the unwinder's rules), _exit and _Exit
(the ends that run no exit handler: interpose/exit_hooks.cpp), the exec family (the image
replaced: interpose/exec_hooks.cpp), sigaction and the signal family (the signals that end a
process: interpose/signal_hooks.cpp), the CUPTI calls with which an app
takes CUPTI (interpose/cupti_hooks.cpp), NVTX's injection entry point (interpose/nvtx_injection.cpp), and the cuxfer_mem_* entry points the
libc-hook library calls. Every hook must also be exported. Exit 0 pass, 1 fail.
"""
import argparse
import re
import subprocess
import sys

EXTRA = {"dlsym", "dlclose", "_exit", "_Exit", "execve", "execv", "execvp", "execvpe", "execveat", "fexecve",
         "execl", "execlp", "execle", "sigaction", "signal", "bsd_signal", "sysv_signal", "InitializeInjectionNvtx2", "cuptiActivityRegisterCallbacks", "cuptiActivityRegisterTimestampCallback", "cuptiFinalize"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--hooks", required=True)
    a = ap.parse_args()
    hooks = set(re.findall(r"^CUXFER_(?:DRIVER|RUNTIME)\((\w+)\)", open(a.hooks).read(), re.M))
    out = subprocess.run(["nm", "-D", "--defined-only", a.lib], capture_output=True, text=True, check=True).stdout
    exported = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
    unexpected = sorted(s for s in exported - hooks - EXTRA if not s.startswith("cuxfer_mem_"))
    missing = sorted(hooks - exported)
    print(f"{len(exported)} exported, {len(hooks)} hooks")
    if unexpected:
        print("exported but not interposed:", " ".join(unexpected[:40]))
    if missing:
        print("hooks not exported:", " ".join(missing))
    return 1 if unexpected or missing else 0


if __name__ == "__main__":
    sys.exit(main())
