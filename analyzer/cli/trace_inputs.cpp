#include "analyzer/cli/trace_inputs.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "analyzer/analyses/ranks.h"
#include "analyzer/cli/output_file.h"
#include "analyzer/cli/summary_inputs.h"
#include "analyzer/model/job.h"

namespace cuxfer::cli {

bool SymbolOptions::take(ArgReader& in) {
  std::string value;
  if (in.flag("no-symbols")) {
    enabled = false;
    return true;
  }
  if (in.option("python-frames", 0, value)) {
    if (value == "user")
      python_sites.frames = symbolize::PythonFrames::User;
    else if (value == "all")
      python_sites.frames = symbolize::PythonFrames::All;
    else in.fail("--python-frames takes user or all, got '" + value + "'");
    return true;
  }
  if (in.option("python-user", 0, value)) {
    // Top-level import names, comma-separated or repeated: installed packages that are the user's code.
    for (size_t at = 0; at <= value.size();) {
      size_t end = value.find(',', at);
      if (end == std::string::npos) end = value.size();
      const std::string name = value.substr(at, end - at);
      const bool ok = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
      }) && !std::isdigit(static_cast<unsigned char>(name.front()));
      if (!ok) {
        in.fail("--python-user takes top-level package names (myproj or myproj,mylib), got '" + value + "'");
        return true;
      }
      python_sites.user_packages.push_back(name);
      at = end + 1;
    }
    return true;
  }
  if (in.option("sysroot", 0, value)) {
    sysroot = value;
    while (sysroot.size() > 1 && sysroot.back() == '/') sysroot.pop_back();
    return true;
  }
  return false;
}

std::vector<trace::Trace> load_traces(const std::vector<std::string>& paths, const char* command,
                                      std::vector<std::string>& errors, size_t jobs,
                                      const trace::EventBlocks& events) {
  std::set<std::string> seen;
  std::vector<std::string> unique;
  for (const auto& p : expand_directories(paths, errors))
    if (seen.insert(p).second) unique.push_back(p);
  std::vector<trace::Trace> traces;
  if (jobs <= 1 || unique.size() <= 1) {
    traces = model::read_traces(unique, errors, events);
  } else {
    // Each file on a worker, the results in the order of the paths.
    std::vector<std::vector<trace::Trace>> read(unique.size());
    std::vector<std::vector<std::string>> why(unique.size());
    for_each_parallel(unique.size(), jobs, [&](size_t i) { read[i] = model::read_traces({unique[i]}, why[i], events); });
    for (size_t i = 0; i < unique.size(); ++i) {
      for (auto& t : read[i]) traces.push_back(std::move(t));
      errors.insert(errors.end(), why[i].begin(), why[i].end());
    }
  }
  for (const auto& e : errors) std::fprintf(stderr, "%s: %s\n", command, e.c_str());
  return traces;
}

bool choose_profile(const model::Job& job, const std::string& path, bool none, const char* command,
                    std::optional<model::MachineProfile>& profile, std::string& note) {
  profile.reset();
  note.clear();
  if (!path.empty()) {
    model::MachineProfile p;
    std::string error;
    if (!model::read_machine_profile(path, p, error)) {
      std::fprintf(stderr, "%s: --profile: %s\n", command, error.c_str());
      return false;
    }
    profile = std::move(p);
  } else if (!none && !job.processes.empty()) {
    const auto& first = job.processes.front().trace;
    profile = model::find_machine_profile(first.process.hostname);
    if (profile && profile->simulated != (first.has_status && first.status.simulated)) profile.reset();
    if (!profile)
      note = "estimates: no machine profile for host " + first.process.hostname +
             " (cuxfer calibrate makes one); they use the run's own pinned transfers, else nominal figures";
  }
  if (profile)
    note = "estimates: machine profile " + profile->path + " (" + profile->gpu_name + ", " + profile->created + ")";
  return true;
}

bool write_output(const std::string& path, const std::string& text, const char* command) {
  if (path.empty() || path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return std::fflush(stdout) == 0;
  }
  return replace_file(path, text, command);
}

// A directory stands for the cuxfer-*.trace files in it (a job's output
// directory), in name order.
std::vector<std::string> expand_directories(const std::vector<std::string>& paths,
                                            std::vector<std::string>& errors) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  for (const auto& p : paths) {
    std::error_code ec;
    if (!fs::is_directory(p, ec)) {
      out.push_back(p);
      continue;
    }
    std::vector<std::string> found;
    for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (name.starts_with("cuxfer-") && name.ends_with(".trace") && it->is_regular_file(ec))
        found.push_back(it->path().string());
    }
    if (ec)
      errors.push_back(fmt::format("{}: cannot list: {}", p, ec.message()));
    else if (found.empty())
      errors.push_back(fmt::format("{}: directory holds no cuxfer-*.trace file", p));
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

namespace {

bool holds_trace(const std::filesystem::path& dir) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with("cuxfer-") && name.ends_with(".trace") && it->is_regular_file(ec)) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> run_folders(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || holds_trace(dir)) return {};
  std::vector<std::string> out;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec) && holds_trace(it->path())) out.push_back(it->path().string());
  std::sort(out.begin(), out.end());
  return out;
}

bool say_if_no_ranges(const model::Job& job, const std::string& name, const char* command) {
  if (!job.ranges.empty()) return false;
  std::fprintf(stderr, "%s: --range %s: the traces hold no NVTX range (the program pushed none, or the shim "
               "was preloaded by hand without NVTX_INJECTION64_PATH naming it)\n", command, name.c_str());
  return true;
}

void say_no_call_inside(const model::Job& job, const std::string& name, const char* command) {
  std::string known;
  for (size_t i = 0; i < job.ranges.size() && i < 8; ++i) known += (i ? ", '" : "'") + job.ranges[i].path() + "'";
  if (job.ranges.size() > 8) known += ", ...";
  std::fprintf(stderr, "%s: --range %s: no call ran inside a range of that name (ranges: %s)\n", command,
               name.c_str(), known.c_str());
}

std::string range_note(const std::string& name, size_t kept, size_t calls) {
  return fmt::format("--range {}: {} of {} calls ran inside it; the report covers those only", name, kept, calls);
}

bool keep_only_range(model::Job& job, const std::string& name, const char* command) {
  const size_t before = job.calls.size();
  if (say_if_no_ranges(job, name, command)) return false;
  const size_t kept = model::keep_range(job, name);
  if (kept == 0) {
    say_no_call_inside(job, name, command);
    return false;
  }
  job.notes.push_back(range_note(name, kept, before));
  return true;
}

bool refuse_mixed_runs(const model::Job& job, const char* command) {
  if (const auto separate = analyses::separate_recordings(job))
    std::fprintf(stderr, "%s: warning: %s\n", command, separate->c_str());
  const auto mixed = analyses::mixed_runs(job);
  if (mixed) std::fprintf(stderr, "%s: %s\n", command, mixed->c_str());
  return mixed.has_value();
}

}  // namespace cuxfer::cli
