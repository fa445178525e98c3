// Subprocess: a child process started with fork+exec, owned by this object (a group of
// forked ranks that live and fail together is common/child_processes.h). The child
// gets an empty signal mask, optionally its own log file for stdout and stderr, and
// PR_SET_PDEATHSIG, so it is sent `parent_death_signal` if the parent dies (even by
// SIGKILL): `lockstep local` and the multi-process tests leave no process behind.
// Destroying a Subprocess that still runs kills it with SIGKILL and reaps it.
//
// Ownership: owns the child (its pid) until it is reaped.
// Thread model: one owner thread. PR_SET_PDEATHSIG fires when the *thread* that started
// the child exits, so start children from a thread that lives as long as they should.
#ifndef LOCKSTEP_COMMON_SUBPROCESS_H_
#define LOCKSTEP_COMMON_SUBPROCESS_H_

#include <signal.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace lockstep {

struct SubprocessOptions {
  std::vector<std::string> argv;  // argv[0] is the program's path
  // Added to (or replacing in) this process's environment.
  std::vector<std::pair<std::string, std::string>> env;
  // Variables removed from the child's environment.
  std::vector<std::string> unset_env;
  std::string log_file;  // "": inherit stdout/stderr
  // One stream on a file of its own instead of log_file's (or the inherited one), for a
  // program whose stdout is data (JSON lines) and whose stderr is its messages. Appended to.
  std::string stdout_file;
  std::string stderr_file;
  int parent_death_signal = SIGTERM;
  // The child leads a process group of its own, so that a terminal's Ctrl-C reaches only
  // this process (which then stops its children in order), and SignalGroup reaches what it
  // started (a launcher's ranks).
  bool new_process_group = false;
};

class Subprocess {
 public:
  // Errors: NOT_FOUND (program missing or not executable), INTERNAL (fork failed).
  static absl::StatusOr<std::unique_ptr<Subprocess>> Start(const SubprocessOptions& options);
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }
  bool running();
  // Sends `sig` if the child still runs.
  void Signal(int sig);
  // Sends `sig` to the child's process group (options.new_process_group): the child and
  // what it started, even once the child itself has exited. Without a group of its own, the
  // same as Signal (the group would be the caller's).
  void SignalGroup(int sig);
  // Waits until the child exits or `deadline` passes. Returns its wait status
  // (WIFEXITED / WEXITSTATUS apply) or DEADLINE_EXCEEDED.
  absl::StatusOr<int> Wait(absl::Time deadline);
  // SIGTERM, up to `grace` to exit, then SIGKILL; always reaps. Returns the wait status.
  int Stop(absl::Duration grace);

 private:
  Subprocess(pid_t pid, std::string name, bool own_group)
      : pid_(pid), name_(std::move(name)), own_group_(own_group) {}
  bool Reap(bool block);

  pid_t pid_;
  std::string name_;
  const bool own_group_;
  bool reaped_ = false;
  int wait_status_ = 0;
};

// A short description of a wait status: "exit 0", "killed by SIGKILL".
std::string DescribeWaitStatus(int status);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_SUBPROCESS_H_
