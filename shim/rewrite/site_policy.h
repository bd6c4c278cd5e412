// The policy file (CUXFER_POLICY, docs/policy.md) inside the shim: which path
// each call or allocation site takes. Sites are matched by the captured call
// stack (policy/site_matcher.h); the decision is cached per interned stack, so
// a call pays one relaxed load after its stack's first call.
#pragma once

#include <cstdint>

#include "policy/policy.h"

namespace cuxfer::shim::rewrite {

// A policy was loaded (CUXFER_POLICY named a valid file).
bool policy_loaded();

struct SiteDecision {
  bool matched = false;
  policy::Path path = policy::Path::Passthrough;
};

// The decision for the current user call of this thread (its interned call
// site), for a call of `kind` moving or allocating `bytes`.
SiteDecision site_decision(policy::SiteKind kind, uint64_t bytes);

// Loads CUXFER_POLICY (once; a bad file is reported in one line and ignored).
void load_policy();

}  // namespace cuxfer::shim::rewrite
