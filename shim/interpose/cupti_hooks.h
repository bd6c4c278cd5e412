// The CUPTI calls with which an application's own profiler (the PyTorch
// profiler's kineto, XLA's, a tool of its own) takes CUPTI over. CUPTI has one
// set of activity buffer callbacks per process: registering new ones would
// deliver buffers the shim handed out to the app's callbacks (kineto: "bufferCompleted
// called with unknown buffer") and silently end the shim's GPU records. These
// hooks give CUPTI back first: the collector returns its buffers and stops,
// and the trace says from when GPU times are missing.
#pragma once

namespace cuxfer::shim {

// dlsym(handle, name) found `fn`: our hook when `name` is one of these calls
// and `fn` is in the libcupti the collector uses (or the collector has not
// loaded one yet), else null.
void* cupti_hook_for(const char* name, void* fn);
// Whether `name` is one of these calls.
bool cupti_hooks_name(const char* name);

}  // namespace cuxfer::shim
