// The profiler API (cudaProfilerStart/Stop, cuProfilerStart/Stop): the
// program's own markers of the part worth profiling, which `cuxfer record
// --capture-range=cudaProfilerApi` records alone (record/capture_range.h).
// The call always reaches the real function first (another profiler may be
// listening); the range follows the program's intent whatever it returns.
// Nothing is recorded.
#include "core/export.h"
#include "symbols/cuda_headers.h"
#include "interpose/hook_macros.h"
#include "record/recorder.h"

using namespace cuxfer::shim;

CUXFER_DRIVER_HOOK_BEGIN(cuProfilerStart, ())
  const CUresult r = real();
  Recorder::instance().profiler_call(true);
  return r;
}

CUXFER_DRIVER_HOOK_BEGIN(cuProfilerStop, ())
  const CUresult r = real();
  Recorder::instance().profiler_call(false);
  return r;
}

CUXFER_RUNTIME_HOOK_BEGIN(cudaProfilerStart, ())
  const cudaError_t r = real();
  Recorder::instance().profiler_call(true);
  return r;
}

CUXFER_RUNTIME_HOOK_BEGIN(cudaProfilerStop, ())
  const cudaError_t r = real();
  Recorder::instance().profiler_call(false);
  return r;
}
