// Registration in place, off the app's thread. A buffer's registration
// (cuMemHostRegister, ~0.05 ms per MiB under the driver's lock: 1.6 ms at
// 32 MiB, 2.9 ms at 60 MiB on an H100) was paid inside the app's copy that
// proved the buffer reused. Now that copy reserves the range in the cache
// (RegistrationCache::reserve: the range answers Touches, and a free()
// withdraws it), is staged (or made as the app made it), and then hands the
// driver call to this thread (pinned_rewrite.h: DeferredRegistration), so
// that the driver's pinning does not slow the copy's own DMA; the copies
// after it find the range Live and run in place.
//
// One thread, started at the first large device allocation (or on first use), in relaxed capture mode, with the
// requesting copy's context pushed while it registers. A bounded queue: when
// it is full, or the thread could not be started, submit() says no and the
// caller registers inline as before.
#pragma once

#include <cstdint>

#include "rewrite/registration_cache.h"
#include "symbols/cuda_headers.h"

namespace cuxfer::shim::rewrite {

// What the registrar calls for each request, on its own thread, with the
// request's context current: completes the reservation and records it.
using CompleteFn = void (*)(const RegistrationCache::Reservation&);

// Starts the thread now if it is not running (the first copy that hands it a
// registration would otherwise pay the thread's start, ~0.1 ms, inside the
// app's call): called at the app's first device allocation as large as a
// staged copy, where the staging pool is first made. Idempotent.
void start_registrar();

// Queues `r` (a successful reservation) for `ctx`. False when it was not
// queued: the caller completes it itself.
bool submit_registration(const RegistrationCache::Reservation& r, CUcontext ctx, CompleteFn complete);

// Waits (at most `limit_ms`) until every queued request is complete: before
// a context goes (its requests would push a dead context) and in tests.
// True when the queue is empty and nothing is being registered.
bool wait_registrations_idle(uint32_t limit_ms);

// The context `gone` was destroyed: requests still queued for it are made
// without binding it (they fail, and their ranges are let go).
void forget_registrar_context(CUcontext gone);

// In a forked child (the atfork child handler): forgets the parent's
// registrar, whose thread the child does not have; the next use starts anew.
void registrar_after_fork_child();

// Registrations made on the registrar's thread (for the shutdown note).
uint64_t background_registrations();

}  // namespace cuxfer::shim::rewrite
