// Streams, as the zero-copy path needs to know them (rewrite/zero_copy.h): a
// synchronous copy on the legacy default stream is ordered after the work of
// every blocking stream, so its shortcut ("nothing is pending anywhere it
// would wait for: copy now") must be able to ask each of them. Blocking
// streams the app creates are listed; work on a per-thread default stream
// (which no other thread can query) turns the shortcut off for good.
// Nothing here is recorded, and each hook is one call plus a branch.
#include "core/export.h"
#include "symbols/cuda_headers.h"
#include "interpose/hook_macros.h"
#include "rewrite/zero_copy.h"

using namespace cuxfer::shim;

namespace {

void created(CUresult r, CUstream* s, unsigned int flags) {
  if (r == CUDA_SUCCESS && s && !(flags & CU_STREAM_NON_BLOCKING) && !thread_state().internal)
    rewrite::blocking_stream_created(*s);
}

}  // namespace

CUXFER_DRIVER_HOOK_BEGIN(cuStreamCreate, (CUstream* s, unsigned int flags))
  CUresult r = real(s, flags);
  created(r, s, flags);
  return r;
}

CUXFER_DRIVER_HOOK_BEGIN(cuStreamCreateWithPriority, (CUstream* s, unsigned int flags, int priority))
  CUresult r = real(s, flags, priority);
  created(r, s, flags);
  return r;
}

CUXFER_DRIVER_HOOK_BEGIN(cuStreamDestroy_v2, (CUstream s))
  rewrite::stream_destroyed(s);  // before: the handle may be reused at once
  return real(s);
}

// Per-thread default stream work (the _ptsz variants only; the legacy ones
// are not interposed).
#define CUXFER_PTSZ_HOOK(name, base, params, args)                                    \
  CUXFER_HOOK_BEGIN_AS(CUresult, name, base, params, CUDA_ERROR_NOT_INITIALIZED)     \
    rewrite::per_thread_stream_used();                                               \
    return real args;                                                                \
  }
CUXFER_PTSZ_HOOK(cuLaunchKernel_ptsz, cuLaunchKernel,
                 (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,
                  unsigned int bz, unsigned int shared, CUstream s, void** params, void** extra),
                 (f, gx, gy, gz, bx, by, bz, shared, s, params, extra))
CUXFER_PTSZ_HOOK(cuLaunchKernelEx_ptsz, cuLaunchKernelEx,
                 (const CUlaunchConfig* config, CUfunction f, void** params, void** extra), (config, f, params, extra))
CUXFER_PTSZ_HOOK(cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel,
                 (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,
                  unsigned int bz, unsigned int shared, CUstream s, void** params),
                 (f, gx, gy, gz, bx, by, bz, shared, s, params))
CUXFER_PTSZ_HOOK(cuLaunchHostFunc_ptsz, cuLaunchHostFunc, (CUstream s, CUhostFn fn, void* data), (s, fn, data))
CUXFER_PTSZ_HOOK(cuGraphLaunch_ptsz, cuGraphLaunch, (CUgraphExec g, CUstream s), (g, s))
