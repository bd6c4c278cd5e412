// Running a command under the cuxfer shim, as a library: what `cuxfer record`
// does between parsing its options and printing which traces were written,
// and what `cuxfer tune` does for each of its runs. Errors are values: one
// line (without the command's name) and the exit status to give.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analyzer/launcher/child_process.h"
#include "analyzer/launcher/manifest.h"

namespace cuxfer::launcher {

struct RecordSettings {
  std::string output_dir = ".";
  std::string name;
  // Not given: the command inherits CUXFER_STACK_DEPTH / CUXFER_CUPTI, as it
  // does CUXFER_REWRITE (unset: 16 frames, auto).
  uint64_t stack_depth = 16;
  bool stack_depth_given = false;
  std::string cupti;  // "auto" | "on" | "off" | "" (not given)
  bool kernels = false;
  std::string capture_range;  // "cudaProfilerApi" | "none" | "" (not given: CUXFER_CAPTURE_RANGE passes through)
  std::string rewrite;  // "pin" | "off" | "" (not set: CUXFER_REWRITE passes through)
  std::string shim;     // "" = $CUXFER_SHIM, else default_shim_path()
  std::string policy;   // a policy file; "" = CUXFER_POLICY passes through
  bool quiet = false;   // no notes on stderr (machine profile); a degraded rewrite is said anyway
  const char* command_name = "cuxfer record";  // prefix of the notes it prints
  std::map<std::string, std::string> extra_env;  // more variables for the child (after the ones above)
  std::vector<std::string> command;
};

// Everything checked and resolved; ready to run (any number of times).
struct PreparedRecording {
  std::string program;  // the resolved executable
  std::vector<std::string> argv;
  std::string output_dir;  // absolute
  std::string shim;        // absolute
  std::string policy;      // absolute, "" when none
  std::map<std::string, std::string> set;
  std::vector<std::string> unset;
};

struct PrepareResult {
  bool ok = false;
  int exit_status = 0;  // when !ok: 2 usage, 126 not executable, 127 not found
  std::string error;    // when !ok: one line
};

// Checks the policy file (a bad one is one line before the command starts),
// creates and checks the output directory, resolves the program, checks it can
// take LD_PRELOAD, finds the shim, and builds the child's environment.
PrepareResult prepare_recording(const RecordSettings& settings, PreparedRecording& out);

struct RecordedRun {
  ChildResult child;
  uint64_t wall_ns = 0;                // the child process, fork to reaped, by the steady clock
  std::vector<ManifestEntry> traces;   // what its processes wrote
  std::string error;                   // set when the manifest could not be made (child not run)
};

// Runs it once, with a fresh manifest.
RecordedRun run_recording(const PreparedRecording& prepared, const ChildIo& io = {});

}  // namespace cuxfer::launcher
