#!/usr/bin/env bash
# Every CUDA hook is declared through hook_macros.h (one line, the real
# function reached one way). Only the hooks that find their next definition
# another way may be written out: dlsym (dlsym_entry.cpp, to glibc's or to
# lookup_hooks.cpp) and cuGetProcAddress (lookup_hooks.cpp),
# dlclose (dlclose_hook.cpp, libc's through RTLD_NEXT), _exit and _Exit
# (exit_hooks.cpp, libc's through RTLD_NEXT, looked up at load), the exec
# family (exec_hooks.cpp, likewise), sigaction and signal (signal_hooks.cpp,
# likewise), CUPTI's (cupti_hooks.cpp),
# the memhooks API (memhooks_api.cpp) and NVTX's injection entry point
# (nvtx_injection.cpp: NVTX calls it; no real function stands behind it).
#   check_hook_declarations.sh SHIM_DIR
set -euo pipefail
dir=${1:?usage: check_hook_declarations.sh SHIM_DIR}
allowed='^(lookup_hooks|dlclose_hook|exit_hooks|exec_hooks|signal_hooks|dlsym_entry|dlsym_entry_tsan|cupti_hooks|memhooks_api|nvtx_injection)\.cpp$'
bad=0
for f in "$dir"/interpose/*.cpp; do
  base=$(basename "$f")
  [[ $base =~ $allowed ]] && continue
  if grep -n 'extern "C"' "$f"; then
    echo "check_hook_declarations: $base defines a hook by hand; use CUXFER_*_HOOK_BEGIN or a CUXFER_*_HOOK line" >&2
    bad=1
  fi
  if grep -n 'real_function_as\|real_function(' "$f"; then
    echo "check_hook_declarations: $base reaches a real function directly; use CUXFER_REAL or the hook's \`real\`" >&2
    bad=1
  fi
done
n=$(cat "$dir"/interpose/*.cpp | grep -cE '^\s*(CUXFER_[A-Z_]*HOOK(_BEGIN(_AS)?)?|RT_ALLOC|RT_FREE|ALLOC_ASYNC|ALLOC_FROM_POOL)\(' || true)
(( n >= 40 )) || { echo "check_hook_declarations: only $n hook declarations found under $dir/interpose: is this the shim?" >&2; bad=1; }
(( bad == 0 )) && echo "check_hook_declarations: $n declarations, none written out by hand"
exit $bad
