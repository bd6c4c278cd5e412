// Runs the traced command as a child and makes cuxfer's own exit look like
// the child's: same exit code, or death by the same signal.
#pragma once

#include <string>
#include <vector>

namespace cuxfer::launcher {

struct ChildResult {
  bool started = false;  // false: fork or exec failed (error_number says why)
  int error_number = 0;
  int wait_status = 0;  // as from waitpid, when started
};

// Where the child's standard output and error go: -1 = inherited from cuxfer,
// else a descriptor of cuxfer's that becomes the child's (dup2 after fork).
struct ChildIo {
  int stdout_fd = -1;
  int stderr_fd = -1;
};

// fork + execve(path, argv, env) and wait. While the child runs, SIGINT,
// SIGTERM, SIGHUP and SIGQUIT sent to cuxfer by another process (kill) are
// forwarded to it; those the terminal sends reach the child directly (same
// process group) and are not sent twice. An exec failure is reported through
// a close-on-exec pipe, so the caller can tell "could not run" from "ran".
ChildResult run_child(const std::string& path, const std::vector<std::string>& argv,
                      const std::vector<std::string>& env, const ChildIo& io = {});

// Exits with the child's code, or resets the signal's handler and raises the
// same signal (without dumping a core of cuxfer itself: the child already
// did). Flushes stdio first.
[[noreturn]] void exit_like(int wait_status);

// "killed by SIGKILL", "exited with status 3".
std::string describe_wait_status(int wait_status);

}  // namespace cuxfer::launcher
