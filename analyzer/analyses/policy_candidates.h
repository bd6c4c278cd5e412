// `cuxfer policy`: the policy entries (policy/policy.h, docs/policy.md) that
// the report's findings support, each with its estimated gain and the
// findings behind it.
//
//   rewrite_candidates, large_pageable, async_pageable  -> per call site:
//       `register` when the site copies the same host buffer (>= the
//       registration minimum) more than once, else `stage`;
//       gain: the largest of the findings' estimates for the site (findings
//       overlap: a copy can be in several, so their estimates are not added).
//   tiny_storm -> per device allocation site: `zero_copy` for the allocation
//       that the storm's tiny H2D copies write into / D2H copies read from
//       (the copy's device pointer, recorded with its content fingerprint,
//       inside a live DeviceAlloc of the same process); gain: the copies'
//       CPU-blocked time minus an estimate of the host memcpy that replaces
//       each (kZeroCopyAccessNs + bytes at the host memcpy bandwidth).
//   whole_uploads (speculative: not a report finding) -> per device
//       allocation site: `zero_copy` for an allocation uploaded whole at
//       least twice; gain: the uploads' time. A win only if kernels read the
//       buffer about once per upload, which no trace shows: proposed only
//       when asked for (Speculation::Propose), and marked so.
//
// Sites are named by build id + offset; a site whose frame lies in no
// recorded module, or in one without a build id, cannot be named so and is
// skipped with a line in `skipped`. Sites of several processes of the same
// binary are one entry (their gains add up).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/analyses/report.h"
#include "policy/policy.h"

namespace cuxfer::analyses {

// The host-side cost that zero-copy leaves of a tiny copy: a fixed cost per
// access (the call, and the ordering the shim must keep with the stream) and
// the memcpy itself at the profile's one-thread host memcpy bandwidth, else
// kNominalHostMemcpyGbps. Deliberately pessimistic next to a bare memcpy.
inline constexpr uint64_t kZeroCopyAccessNs = 200;
inline constexpr double kNominalHostMemcpyGbps = 5.0;

// Whether candidates that no report finding supports (whole_uploads) become
// entries. `cuxfer policy` holds them back unless asked (the report and the
// policy then agree on what was found); `cuxfer tune` measures them.
enum class Speculation : uint8_t { HoldBack, Propose };

// The name of the speculative pattern, as entries' "findings" give it.
inline constexpr const char* kWholeUploads = "whole_uploads";

struct PolicyCandidates {
  policy::Policy policy;              // entries, largest estimated gain first
  std::vector<std::string> skipped;   // one line per site (or group of copies) not proposed, and why
  // Per entry (same order as policy.entries): the copy call sites whose copies
  // the entry changes, named like call entries (kind call, build id + offset):
  // the entry's own site for a call entry; for zero_copy, the sites of the
  // tiny copies tied to the allocation (those that could be named). What
  // `cuxfer tune` measures an entry by.
  std::vector<std::vector<policy::Site>> copy_sites;
  // Per entry: it rests on speculative patterns only (no report finding
  // supports it). Only with Speculation::Propose.
  std::vector<bool> speculative;
  // With Speculation::HoldBack: one line per speculative candidate left out
  // ("SITE: zero_copy: all 4.00 MiB of this allocation uploaded 8 times (5.74 ms)").
  std::vector<std::string> held_back;
};

PolicyCandidates derive_policy(const model::Job& job, const Report& report, const Thresholds& t,
                               Speculation speculation);

// Names a job site as a policy does: a Python line (file, function, line)
// when the site is one, else its module's build id and the return address's
// offset. False with `why` when it cannot be named (no module, no build id).
bool identify_site(const model::Job& job, uint32_t site_index, policy::SiteKind kind, policy::Site& out,
                   std::string& why);

}  // namespace cuxfer::analyses
