// Graph captures, as the rewrite needs to know them (rewrite/capture_watch.h):
// while a capture in global mode is open anywhere in the process, copies are
// left as the app made them. Nothing here is recorded; each hook is the real
// call plus a few atomic operations.
#include "core/export.h"
#include "symbols/cuda_headers.h"
#include "interpose/hook_macros.h"
#include "rewrite/capture_watch.h"
#include "rewrite/driver_calls.h"

using namespace cuxfer::shim;

namespace {

void began(CUresult r, CUstream s, CUstreamCaptureMode mode, bool per_thread) {
  if (r == CUDA_SUCCESS && mode == CU_STREAM_CAPTURE_MODE_GLOBAL)
    rewrite::global_capture_began(rewrite::capture_key(reinterpret_cast<uint64_t>(s), per_thread));
}

// EndCapture ends the capture when it succeeds and when the capture had been
// invalidated; called from the wrong thread it does not, and the capture goes
// on. The driver is asked where it can be.
void ended(CUresult r, CUstream s, bool per_thread) {
  bool over = r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  if (const rewrite::DriverCalls* d = rewrite::driver_calls()) over = !d->capturing(per_thread, s);
  if (over) rewrite::global_capture_ended(rewrite::capture_key(reinterpret_cast<uint64_t>(s), per_thread));
}

}  // namespace

CUXFER_DRIVER_HOOK_BEGIN(cuStreamBeginCapture_v2, (CUstream s, CUstreamCaptureMode mode))
  CUresult r = real(s, mode);
  began(r, s, mode, false);
  return r;
}

CUXFER_HOOK_BEGIN_AS(CUresult, cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture_v2,
                     (CUstream s, CUstreamCaptureMode mode), CUDA_ERROR_NOT_INITIALIZED)
  CUresult r = real(s, mode);
  began(r, s, mode, true);
  return r;
}

CUXFER_DRIVER_HOOK_BEGIN(cuStreamBeginCaptureToGraph,
                         (CUstream s, CUgraph g, const CUgraphNode* deps, const CUgraphEdgeData* edges, size_t n,
                          CUstreamCaptureMode mode))
  CUresult r = real(s, g, deps, edges, n, mode);
  began(r, s, mode, false);
  return r;
}

CUXFER_HOOK_BEGIN_AS(CUresult, cuStreamBeginCaptureToGraph_ptsz, cuStreamBeginCaptureToGraph,
                     (CUstream s, CUgraph g, const CUgraphNode* deps, const CUgraphEdgeData* edges, size_t n,
                      CUstreamCaptureMode mode),
                     CUDA_ERROR_NOT_INITIALIZED)
  CUresult r = real(s, g, deps, edges, n, mode);
  began(r, s, mode, true);
  return r;
}

CUXFER_DRIVER_HOOK_BEGIN(cuStreamEndCapture, (CUstream s, CUgraph* g))
  CUresult r = real(s, g);
  ended(r, s, false);
  return r;
}

CUXFER_HOOK_BEGIN_AS(CUresult, cuStreamEndCapture_ptsz, cuStreamEndCapture, (CUstream s, CUgraph* g),
                     CUDA_ERROR_NOT_INITIALIZED)
  CUresult r = real(s, g);
  ended(r, s, true);
  return r;
}
