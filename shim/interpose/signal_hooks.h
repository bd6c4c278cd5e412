// The end-signal hooks (interpose/signal_hooks.cpp).
#pragma once

namespace cuxfer::shim {

// Looks up libc's sigaction, signal, bsd_signal and sysv_signal; called from
// the shim's constructor. `hold`: the shim records and CUXFER_FINISH_ON_SIGNAL
// is on (hold_end_signals() then does something).
void resolve_signal_hooks(bool hold);

// Once the process records (the recorder's start, on the app's thread): puts
// the shim's handler on each of SIGTERM, SIGINT, SIGHUP and SIGPIPE whose disposition
// is still the default (interpose/signal_route.h).
void hold_end_signals();

}  // namespace cuxfer::shim
