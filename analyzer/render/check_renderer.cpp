#include "analyzer/render/check_renderer.h"

#include <fmt/format.h>

#include "analyzer/render/markup.h"
#include "analyzer/text/units.h"

namespace cuxfer::render {

namespace {

using check::Measure;

std::string entry_label(const check::Budget& budget, uint32_t entry) {
  const check::BudgetEntry& e = budget.entries[entry];
  return fmt::format("entries[{}] {}", entry, e.name.empty() ? check::scope_label(e) : e.name);
}

std::string bytes_value(uint64_t b) { return fmt::format("{} ({})", b, text::format_bytes(b)); }

}  // namespace

std::string verdict_line(const check::Budget& budget, const check::Verdict& v) {
  const std::string where = entry_label(budget, v.entry);
  switch (v.measure) {
    case Measure::Bytes:
      return fmt::format("{}: bytes: measured {}, limit {}", where, bytes_value(v.measured), bytes_value(v.limit));
    case Measure::Copies:
      return fmt::format("{}: copies: measured {}, limit {}", where, v.measured, v.limit);
    case Measure::PageableBytes:
      return fmt::format("{}: pageable bytes: measured {}, limit {}", where, bytes_value(v.measured),
                         bytes_value(v.limit));
    case Measure::CpuBlocked: {
      const std::string stated =
          v.time ? fmt::format(" (baseline {} + {:g} %)", text::format_duration(v.time->baseline_ns),
                               v.time->tolerance_percent)
                 : "";
      return fmt::format("{}: CPU-blocked time: measured {} ({} ns), limit {} ({} ns){}", where,
                         text::format_duration(v.measured), v.measured, text::format_duration(v.limit), v.limit,
                         stated);
    }
    case Measure::Finding:
      if (v.measured == 0)
        return fmt::format("{}: finding {}: absent, must not appear", where, analyses::finding_kind_name(v.finding));
      return fmt::format("{}: finding {}: raised ({} copies), must not appear", where,
                         analyses::finding_kind_name(v.finding), v.measured);
  }
  return where;
}

std::string render_check_text(const check::Budget& budget, const check::CheckResult& result,
                              const std::string& budget_path) {
  std::string out;
  for (const check::Verdict& v : result.verdicts)
    if (!v.kept) out += "over budget: " + verdict_line(budget, v) + "\n";
  for (uint32_t e : result.unmatched_site_entries)
    out += "note: " + entry_label(budget, e) +
           (budget.entries[e].scope == check::Scope::Range ? ": no copy of the run ran inside this range"
                                                            : ": matched no call site of the run") +
           " (checked against 0)\n";
  const size_t violations = result.violations();
  if (violations == 0)
    out += fmt::format("cuxfer check: {} keeps the budget: {} limits in {} entries\n", budget_path,
                       result.verdicts.size(), budget.entries.size());
  else
    out += fmt::format("cuxfer check: {} limit(s) of {} exceeded (budget {})\n", violations, result.verdicts.size(),
                       budget_path);
  return out;
}

std::string render_junit(const check::Budget& budget, const check::CheckResult& result,
                         const std::string& budget_path) {
  std::vector<std::string> failures(budget.entries.size());
  std::vector<size_t> violations(budget.entries.size(), 0);
  for (const check::Verdict& v : result.verdicts) {
    if (v.kept) continue;
    failures[v.entry] += verdict_line(budget, v) + "\n";
    ++violations[v.entry];
  }
  size_t failed = 0;
  for (size_t n : violations) failed += n > 0;
  const std::string suite = markup_escaped(budget_path);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format("<testsuites name=\"cuxfer check\" tests=\"{}\" failures=\"{}\" errors=\"0\">\n",
                     budget.entries.size(), failed);
  out += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"0\">\n", suite,
                     budget.entries.size(), failed);
  for (uint32_t e = 0; e < budget.entries.size(); ++e) {
    const std::string name = markup_escaped(entry_label(budget, e));
    if (violations[e] == 0) {
      out += fmt::format("    <testcase classname=\"{}\" name=\"{}\"/>\n", suite, name);
      continue;
    }
    out += fmt::format("    <testcase classname=\"{}\" name=\"{}\">\n", suite, name);
    out += fmt::format("      <failure type=\"budget\" message=\"{} limit(s) exceeded\">{}</failure>\n", violations[e],
                       markup_escaped(failures[e]));
    out += "    </testcase>\n";
  }
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

}  // namespace cuxfer::render
