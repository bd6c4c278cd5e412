#include "interpose/signal_route.h"

namespace cuxfer::shim {

bool is_default_disposition(const struct sigaction& a) {
  return !(a.sa_flags & SA_SIGINFO) && a.sa_handler == SIG_DFL;
}

SigactionRoute route_sigaction(int sig, bool held, const struct sigaction* act) {
  if (end_signal_index(sig) < 0 || !held) return SigactionRoute::PassThrough;
  if (!act || is_default_disposition(*act)) return SigactionRoute::Answer;
  return SigactionRoute::Release;
}

}  // namespace cuxfer::shim
