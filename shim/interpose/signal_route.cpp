#include "interpose/signal_route.h"

namespace cuxfer::shim {

SigactionRoute route_sigaction(int sig, bool held, const struct sigaction* act, bool holding) {
  if (end_signal_index(sig) < 0) return SigactionRoute::PassThrough;
  const bool sets_default = act && is_default_disposition(*act);
  if (!held) return sets_default && holding ? SigactionRoute::Take : SigactionRoute::PassThrough;
  if (!act || sets_default) return SigactionRoute::Answer;
  return SigactionRoute::Release;
}

}  // namespace cuxfer::shim
