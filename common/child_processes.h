// ChildProcesses: a group of child processes that live and fail together, such as the ranks
// of a multi-process benchmark (bench/peers, `lockstep bench allreduce`), so that nothing
// outlives or hangs the program: the first child that fails or the watchdog deadline kills
// the others, and every child is reaped. One child supervised on its own (a daemon, a
// command) is common/subprocess.h's Subprocess.
//
// Ownership: owns the children it started; the destructor kills (SIGKILL) and reaps any
// still running. Thread model: single-threaded. Construct it before the process starts
// any thread (it forks) and keep one per process: it blocks SIGCHLD in the calling
// thread while it lives, to wait for children with sigtimedwait instead of polling.
#ifndef LOCKSTEP_COMMON_CHILD_PROCESSES_H_
#define LOCKSTEP_COMMON_CHILD_PROCESSES_H_

#include <signal.h>
#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace lockstep {

class ChildProcesses {
 public:
  ChildProcesses();
  ~ChildProcesses();
  ChildProcesses(const ChildProcesses&) = delete;
  ChildProcesses& operator=(const ChildProcesses&) = delete;

  // Forks a child that runs `body` and exits with its return value. The child dies with
  // its parent (PR_SET_PDEATHSIG). `name` ("rank 1") is used in error messages.
  absl::StatusOr<pid_t> Fork(std::string name, const std::function<int()>& body);

  // Forks and executes argv[0] (searched in PATH) in a new process group, so that a
  // launcher such as mpirun and whatever it starts can be stopped together. `stdout_file`
  // (not ""): the child's stdout goes to that file, created or truncated (a rank whose
  // figures the caller reads); INTERNAL naming it when it cannot be opened.
  absl::StatusOr<pid_t> Exec(std::string name, const std::vector<std::string>& argv,
                             const std::string& stdout_file = "");

  // Waits for every child. Returns OK when all exited with status 0. Otherwise kills the
  // others and returns INTERNAL naming the first child that failed (DescribeWaitStatus), or
  // DEADLINE_EXCEEDED "... did not finish within <timeout>" when `timeout` passed first
  // (callers add what to check). Every child is reaped either way.
  absl::Status WaitAll(absl::Duration timeout);

  // Stops every running child now (SIGTERM to a process group, up to 3 s to go, then
  // SIGKILL; SIGKILL to a forked child) and reaps it: when starting the group failed midway.
  void KillAll();

 private:
  struct Child {
    std::string name;
    pid_t pid = -1;
    bool own_group = false;  // Started by Exec: signals go to the whole process group.
    bool running = true;
  };

  // Reaps every child that has exited; returns the first failure seen, if any.
  absl::Status ReapExited();
  int RunningCount() const;

  sigset_t old_mask_;
  std::vector<Child> children_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_CHILD_PROCESSES_H_
