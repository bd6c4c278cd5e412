// The budget file of `cuxfer check` (docs/check.md is the reference): the
// limits a run's host<->device memory movement must keep, for CI. Versioned
// JSON like the policy file, read by a strict parser whose every error is one
// line naming the field, and written in a fixed layout.
//
// Byte and copy limits are exact (a deterministic program moves the same
// bytes every run); time limits are a baseline and a tolerance, because
// timings are noisy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/analyses/report.h"
#include "policy/policy.h"

namespace cuxfer::check {

inline constexpr std::string_view kBudgetSchemaName = "cuxfer.budget";
inline constexpr std::string_view kBudgetSchema = "cuxfer.budget/1";

// What an entry's limits apply to.
enum class Scope : uint8_t {
  Run,    // the whole job (all its processes)
  Class,  // one direction x host memory kind, as the report names it ("H2D pageable")
  Site,   // one call site (native: build id + offset; Python: file, function, line)
  Range,  // one NVTX range path as the report names it ("train / forward"), nested ranges included
};

// A time limit: at most baseline_ns x (1 + tolerance_percent / 100).
struct TimeLimit {
  uint64_t baseline_ns = 0;
  double tolerance_percent = 0;
  uint64_t limit_ns() const;
};

struct BudgetEntry {
  Scope scope = Scope::Run;
  std::string name;        // optional label (the JUnit test case's name when set)
  std::string class_name;  // Scope::Class
  policy::Site site;       // Scope::Site (kind call)
  std::string range;       // Scope::Range
  std::optional<uint64_t> max_bytes, max_copies;
  std::optional<uint64_t> max_pageable_bytes;  // Scope::Run and Scope::Range
  std::optional<TimeLimit> cpu_blocked;
  std::vector<analyses::FindingKind> forbid_findings;  // Scope::Run, Scope::Site and Scope::Range
};

struct Budget {
  std::string generator, comment;
  // The executable the budget is for (its base name, as the traces record
  // the processes' executables); empty: any. `command` is for people.
  std::string program;
  std::vector<std::string> command;
  std::vector<BudgetEntry> entries;
};

// "H2D pageable", ...: every class name the report can give, in a fixed order.
const std::vector<std::string>& class_names();

// Parses and validates a whole budget. On failure returns false and sets
// `error` to one line: "line 4, column 7: ..." for syntax, else the field
// path ("entries[2].max_bytes: must be a non-negative integer, got -1").
// `out` is filled only on success. Never throws.
bool parse_budget(std::string_view text, Budget& out, std::string& error);

// Reads and parses a file; the error line starts with the path ("b.json: ...").
bool read_budget_file(const std::string& path, Budget& out, std::string& error);

// Stable, pretty JSON (2-space indent, fixed key order, trailing newline);
// parse_budget reads it back equal.
std::string write_budget(const Budget& budget);

// A site as the report names it: "train.py:42 in load_batch" for a Python
// site, "symbol (source)" or "BUILDID+0xOFFSET" for a native one.
std::string site_label(const policy::Site& site);

// "run", "H2D pageable", "site train.py:42 in load_batch".
std::string scope_label(const BudgetEntry& entry);

}  // namespace cuxfer::check
