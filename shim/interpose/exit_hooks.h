// The _exit/_Exit hooks (interpose/exit_hooks.cpp).
#pragma once

namespace cuxfer::shim {

// Looks up libc's _exit and _Exit; called from the shim's constructor, before
// the app can end through them. `recording`: the shim records (the hooks
// then finish the trace first).
void resolve_exit_hooks(bool recording);

}  // namespace cuxfer::shim
