// Copies of a Python program whose call site has no Python line: made on a
// thread with no Python code on its stack (PyTorch's autograd engine threads,
// NCCL's, JAX's transfer threads, a C++ library's own pool), or before the
// interpreter started and after it ended. The report names such a site by its
// native frame; this says why, so that a Python user does not take it for a
// failure to read their script.
#include <unordered_set>

#include <fmt/format.h>

#include "analyzer/analyses/report.h"
#include "analyzer/text/units.h"

namespace cuxfer::analyses {

std::optional<std::string> copies_without_python_note(const model::Job& job) {
  // Per site: whether its stack holds a Python frame.
  std::vector<uint8_t> python_site(job.sites.size());
  std::vector<uint8_t> python_process(job.processes.size());
  for (size_t i = 0; i < job.sites.size(); ++i)
    for (const auto& f : job.sites[i].stack)
      if (f.python) {
        python_site[i] = 1;
        python_process[job.sites[i].process] = 1;  // its stacks were read: Python ran there
        break;
      }
  uint64_t copies = 0, bytes = 0, all_copies = 0;
  std::unordered_set<uint64_t> threads;  // (process, thread id)
  std::unordered_set<uint32_t> processes;
  for (const model::Call& c : job.calls) {
    if (c.kind() != trace::EventKind::Copy || c.site == model::kNoSite || !python_process[c.process])
      continue;
    ++all_copies;
    if (python_site[c.site]) continue;
    ++copies;
    bytes += c.bytes();
    threads.insert(uint64_t{c.process} << 32 | c.event->thread_id);
    processes.insert(c.process);
  }
  if (copies == 0) return std::nullopt;
  const std::string where =
      processes.size() > 1 ? fmt::format(" of {} processes", processes.size()) : std::string();
  return fmt::format(
      "{} of the {} copies Python programs made have no Python line ({}, on {} thread{}{}): their threads "
      "ran no Python code at the time (a framework's own threads, such as PyTorch's autograd engine's, "
      "NCCL's "
      "and JAX's transfer threads; or before the interpreter started or after it ended), or ran Python that "
      "cuxfer does not read (the processes' notes say which). Their call sites are native frames",
      text::format_count(copies), text::format_count(all_copies), text::format_bytes(bytes), threads.size(),
      threads.size() == 1 ? "" : "s", where);
}

}  // namespace cuxfer::analyses
