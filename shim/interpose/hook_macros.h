// Declarative hook definitions, after compiler-rt's INTERCEPTOR: one line per
// exported entry point, naming how to describe the call from its arguments.
#pragma once

#include "core/export.h"
#include "interpose/call_scope.h"
#include "symbols/cuda_headers.h"
#include "symbols/symbol_table.h"
#include "rewrite/pinned_rewrite.h"
#include "rewrite/zero_copy.h"

// A hook's call of the real function (and the rewrite's choice of path before
// it), inlined into the hook: as a lambda of its own it sat in another page of
// .text, one more cold page and line for every copy (export.h, CUXFER_INLINE).
#define CUXFER_INLINE_LAMBDA __attribute__((always_inline))

// The real function behind hook `name`, with the hook's own type (in the
// hook's own body: the caller is its return address).
#define CUXFER_REAL(name)                                                                       \
  ::cuxfer::shim::real_function_as<decltype(&::name)>(::cuxfer::shim::HookId::h_##name, \
                                                      __builtin_return_address(0))

// Every hook's first lines: the exported definition, and the API's own
// "not initialised" answer when no real function can be found (as without a
// driver). The hook's body follows, with `real` in scope: for a runtime hook,
// the function its caller would have bound to (symbols/symbol_table.h), so
// the return address is passed.
//
// Every hook is declared by one such line, followed by its body and the
// closing brace (compiler-rt's `INTERCEPTOR(ret, name, params) { ... }`):
//   CUXFER_DRIVER_HOOK_BEGIN(cuMemAlloc_v2, (CUdeviceptr* p, size_t n))
//     ...
//     return real(p, n);
//   }
// `name` must be in symbols/hook_list.def (HookId::h_##name is its table slot,
// so a hook missing from the list does not compile) and declared by the CUDA
// headers: the real function has the header's type. Only the lookup hooks
// (dlsym, cuGetProcAddress) and CUPTI's, which find their next definition
// another way, are written out.
#define CUXFER_HOOK_BEGIN(ret, name, params, missing) CUXFER_HOOK_BEGIN_AS(ret, name, name, params, missing)

// The same, for an entry point the headers do not declare under its own name
// (the _ptsz variants): the real function has `like`'s type.
#define CUXFER_HOOK_BEGIN_AS(ret, name, like, params, missing)                                                 \
  extern "C" CUXFER_EXPORT ret name params {                                                                    \
    auto real = ::cuxfer::shim::real_function_as<decltype(&::like)>(::cuxfer::shim::HookId::h_##name,         \
                                                                     __builtin_return_address(0));             \
    if (!real) return missing;

// With the driver's and the runtime's own "not initialised" answers.
#define CUXFER_DRIVER_HOOK_BEGIN(name, params) \
  CUXFER_HOOK_BEGIN(CUresult, name, params, CUDA_ERROR_NOT_INITIALIZED)
#define CUXFER_RUNTIME_HOOK_BEGIN(name, params) \
  CUXFER_HOOK_BEGIN(cudaError_t, name, params, cudaErrorInitializationError)

// A driver hook whose whole job is: describe, then intercept.
#define CUXFER_DRIVER_HOOK(name, params, args, describe)                                   \
  CUXFER_DRIVER_HOOK_BEGIN(name, params)                                                  \
  return ::cuxfer::shim::intercept<CUresult>(::cuxfer::shim::HookId::h_##name, describe,    \
                                             CUXFER_CALLER,                                 \
                                             [&]() CUXFER_INLINE_LAMBDA { return real args; });                   \
  }

#define CUXFER_RUNTIME_HOOK(name, params, args, describe)                                  \
  CUXFER_RUNTIME_HOOK_BEGIN(name, params)                                                 \
  return ::cuxfer::shim::intercept<cudaError_t>(::cuxfer::shim::HookId::h_##name, describe, \
                                                CUXFER_CALLER,                              \
                                                [&]() CUXFER_INLINE_LAMBDA { return real args; });                \
  }

// A copy the rewrite never takes over, but which must not run asynchronously
// on memory the rewrite registered (it would lose its pageable semantics):
// `guard(desc)` drops such registrations first. Costs one relaxed load
// while the rewrite holds none.
#define CUXFER_GUARDED_HOOK(name, params, args, describe, guard)                           \
  CUXFER_DRIVER_HOOK_BEGIN(name, params)                                                  \
  const ::cuxfer::shim::CallDesc desc = describe;                                           \
  if (::cuxfer::shim::rewrite::registrations_exist()) guard(desc);                          \
  return ::cuxfer::shim::intercept<CUresult>(::cuxfer::shim::HookId::h_##name, desc,        \
                                             CUXFER_CALLER,                                 \
                                             [&]() CUXFER_INLINE_LAMBDA { return real args; });                   \
  }

// A copy the pinned rewrite never takes over because of its shape (2D, 3D,
// arrays, batches): guarded as above, and its event says why it ran as made
// while the rewrite is on (one load while it is not).
#define CUXFER_SHAPED_COPY_HOOK(name, params, args, describe, guard)                       \
  CUXFER_DRIVER_HOOK_BEGIN(name, params)                                                  \
  const ::cuxfer::shim::CallDesc desc = describe;                                           \
  if (::cuxfer::shim::rewrite::registrations_exist()) guard(desc);                          \
  return ::cuxfer::shim::intercept<CUresult>(                                               \
      ::cuxfer::shim::HookId::h_##name, desc, CUXFER_CALLER, [&]() CUXFER_INLINE_LAMBDA {   \
        ::cuxfer::shim::rewrite::passthrough_not_one_dimensional();                         \
        return real args;                                                                   \
      });                                                                                   \
  }

// A copy the pinned rewrite may take over: the description is computed once
// and offered to the staging path before the original call is made.
#define CUXFER_STAGEABLE_HOOK(name, params, args, describe)                                \
  CUXFER_DRIVER_HOOK_BEGIN(name, params)                                                  \
  const ::cuxfer::shim::CallDesc desc = describe;                                           \
  return ::cuxfer::shim::intercept<CUresult>(                                               \
      ::cuxfer::shim::HookId::h_##name, desc, CUXFER_CALLER, [&]() CUXFER_INLINE_LAMBDA {   \
        namespace rw = ::cuxfer::shim::rewrite;                                             \
        int rewritten = 0;                                                                  \
        rw::DeferredRegistration later; /* handed over when this call is done */            \
        rw::Action act = rw::zero_copy_exists() ? rw::try_zero_copy(desc, rewritten)        \
                                                : rw::Action::Original;                     \
        if (act == rw::Action::Original) {                                                  \
          if (rw::enabled()) act = rw::try_rewrite(desc, rewritten, later);                 \
          else rw::passthrough_while_off();                                                 \
        }                                                                                   \
        if (act == rw::Action::Done) return static_cast<CUresult>(rewritten);               \
        CUresult r = real args;                                                             \
        if (act == rw::Action::OriginalThenWait && r == CUDA_SUCCESS)                       \
          r = static_cast<CUresult>(rw::wait_for(desc));                                    \
        return r;                                                                           \
      });                                                                                   \
  }
