// Copies of a Python program whose call site has no Python line: made on a
// thread with no Python code on its stack (PyTorch's autograd engine threads,
// NCCL's, JAX's transfer threads, a C++ library's own pool), or before the
// interpreter started and after it ended. The report names such a site by its
// native frame; this says why, so that a Python user does not take it for a
// failure to read their script.
#include <fmt/format.h>

#include "analyzer/analyses/tally.h"
#include "analyzer/text/units.h"

namespace cuxfer::analyses {

std::optional<std::string> copies_without_python_note(const JobTally& tally) {
  // The counts are per process (ProcessTally): (process, thread) pairs are
  // distinct across processes, so the threads add up.
  uint64_t copies = 0, bytes = 0, all_copies = 0, threads = 0, processes = 0, unknown = 0;
  for (const ProcessTally& p : tally.processes) {
    if (!p.python_lines_known) {
      ++unknown;
      continue;
    }
    all_copies += p.python_site_copies;
    if (p.copies_without_python == 0) continue;
    copies += p.copies_without_python;
    bytes += p.bytes_without_python;
    threads += p.threads_without_python;
    ++processes;
  }
  // A count over the other processes alone would read as the job's: said
  // unknown instead.
  if (unknown > 0)
    return fmt::format(
        "copies without a Python line: not counted in {} Python process{} of summaries made by an earlier "
        "cuxfer (summarize their traces again to count them)",
        unknown, unknown == 1 ? "" : "es");
  if (copies == 0) return std::nullopt;
  const std::string where = processes > 1 ? fmt::format(" of {} processes", processes) : std::string();
  return fmt::format(
      "{} of the {} copies Python programs made have no Python line ({}, on {} thread{}{}): their threads "
      "ran no Python code at the time (a framework's own threads, such as PyTorch's autograd engine's, "
      "NCCL's "
      "and JAX's transfer threads; or before the interpreter started or after it ended), or ran Python that "
      "cuxfer does not read (the processes' notes say which). Their call sites are native frames",
      text::format_count(copies), text::format_count(all_copies), text::format_bytes(bytes), threads,
      threads == 1 ? "" : "s", where);
}

}  // namespace cuxfer::analyses
