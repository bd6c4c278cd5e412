// Renders `cuxfer check`'s verdicts (check/verdicts.h): one line per
// violation, and JUnit XML for CI systems (one test case per budget entry, a
// failure per entry with violations, its lines in the failure's text).
#pragma once

#include <string>

#include "analyzer/check/budget.h"
#include "analyzer/check/verdicts.h"

namespace cuxfer::render {

// "entries[1] H2D pageable: bytes: measured 8388608 (8.00 MiB), limit 4194304 (4.00 MiB)".
std::string verdict_line(const check::Budget& budget, const check::Verdict& verdict);

// The violations, one line each ("over budget: " + verdict_line), a note per
// site entry that matched no call site, and a last line with the outcome.
std::string render_check_text(const check::Budget& budget, const check::CheckResult& result,
                              const std::string& budget_path);

// JUnit XML: <testsuites><testsuite name=budget_path><testcase .../>...; each
// test case is named after its entry ("entries[1] H2D pageable", or the
// entry's name).
std::string render_junit(const check::Budget& budget, const check::CheckResult& result,
                         const std::string& budget_path);

}  // namespace cuxfer::render
