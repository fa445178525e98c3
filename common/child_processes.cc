#include "common/child_processes.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/subprocess.h"

namespace lockstep {

namespace {

// Waits up to `timeout` for a SIGCHLD (blocked by the constructor). Returns false on timeout.
bool WaitForSigchld(absl::Duration timeout) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  const timespec ts = absl::ToTimespec(std::max(timeout, absl::ZeroDuration()));
  while (true) {
    if (sigtimedwait(&set, nullptr, &ts) == SIGCHLD) return true;
    if (errno != EINTR) return false;  // EAGAIN: the timeout passed.
  }
}

}  // namespace

ChildProcesses::ChildProcesses() {
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGCHLD);
  sigprocmask(SIG_BLOCK, &block, &old_mask_);
}

ChildProcesses::~ChildProcesses() {
  KillAll();
  sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
}

absl::StatusOr<pid_t> ChildProcesses::Fork(std::string name, const std::function<int()>& body) {
  const pid_t parent = getpid();
  std::fflush(nullptr);  // Or the child would print the parent's buffered output again.
  const pid_t pid = fork();
  if (pid < 0) {
    return absl::InternalError(absl::StrCat("fork for ", name, " failed: ", strerror(errno)));
  }
  if (pid == 0) {
    sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);  // The parent died before prctl.
    const int code = body();
    std::fflush(nullptr);
    _exit(code);  // Not exit(): the parent's atexit handlers and destructors are not ours.
  }
  children_.push_back(Child{std::move(name), pid, /*own_group=*/false});
  return pid;
}

absl::StatusOr<pid_t> ChildProcesses::Exec(std::string name, const std::vector<std::string>& argv,
                                           const std::string& stdout_file) {
  if (argv.empty()) return absl::InvalidArgumentError(absl::StrCat(name, ": empty command"));
  std::vector<char*> c_argv;
  for (const std::string& arg : argv) c_argv.push_back(const_cast<char*>(arg.c_str()));
  c_argv.push_back(nullptr);
  int out_fd = -1;
  if (!stdout_file.empty()) {
    out_fd = open(stdout_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out_fd < 0) {
      return absl::InternalError(
          absl::StrCat(name, ": cannot open its stdout_file ", stdout_file, ": ", strerror(errno)));
    }
  }
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    if (out_fd >= 0) close(out_fd);
    return absl::InternalError(absl::StrCat("fork for ", name, " failed: ", strerror(errno)));
  }
  if (pid == 0) {
    setpgid(0, 0);
    sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
    if (out_fd >= 0) dup2(out_fd, STDOUT_FILENO);
    execvp(c_argv[0], c_argv.data());
    std::fprintf(stderr, "%s: cannot execute %s: %s (is it installed and in PATH?)\n", name.c_str(),
                 c_argv[0], strerror(errno));
    _exit(127);
  }
  if (out_fd >= 0) close(out_fd);
  setpgid(pid, pid);  // Also here, so that KillAll reaches the group even before exec.
  children_.push_back(Child{std::move(name), pid, /*own_group=*/true});
  return pid;
}

absl::Status ChildProcesses::ReapExited() {
  absl::Status first_failure;
  for (Child& child : children_) {
    if (!child.running) continue;
    int status = 0;
    const pid_t got = waitpid(child.pid, &status, WNOHANG);
    if (got != child.pid) continue;
    child.running = false;
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && first_failure.ok()) {
      first_failure = absl::InternalError(absl::StrCat(child.name, " (pid ", child.pid,
                                                       ") failed: ", DescribeWaitStatus(status),
                                                       "; see its messages above on stderr"));
    }
  }
  return first_failure;
}

int ChildProcesses::RunningCount() const {
  int running = 0;
  for (const Child& child : children_) running += child.running;
  return running;
}

absl::Status ChildProcesses::WaitAll(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (RunningCount() > 0) {
    absl::Status status = ReapExited();
    if (!status.ok()) {
      KillAll();
      return status;
    }
    if (RunningCount() == 0) break;
    if (!WaitForSigchld(deadline - absl::Now()) && absl::Now() >= deadline) {
      (void)ReapExited();
      if (RunningCount() == 0) break;
      KillAll();
      return absl::DeadlineExceededError(absl::StrCat("the child processes did not finish within ",
                                                      absl::FormatDuration(timeout),
                                                      " and were killed"));
    }
  }
  return absl::OkStatus();
}

void ChildProcesses::KillAll() {
  bool any_group = false;
  std::vector<pid_t> groups;
  for (const Child& child : children_) {
    if (!child.running) continue;
    if (child.own_group) {
      kill(-child.pid, SIGTERM);  // Let a launcher (mpirun) stop what it started.
      groups.push_back(child.pid);
      any_group = true;
    } else {
      kill(child.pid, SIGKILL);
    }
  }
  if (any_group) {
    const absl::Time grace_end = absl::Now() + absl::Seconds(3);
    while (absl::Now() < grace_end) {
      (void)ReapExited();
      bool group_running = false;
      for (const Child& child : children_) group_running |= child.running && child.own_group;
      if (!group_running) break;
      WaitForSigchld(std::min(grace_end - absl::Now(), absl::Milliseconds(100)));
    }
  }
  for (Child& child : children_) {
    if (!child.running) continue;
    kill(child.own_group ? -child.pid : child.pid, SIGKILL);
    waitpid(child.pid, nullptr, 0);
    child.running = false;
  }
  // A stopped launcher's process group may hold processes that outlived it.
  for (pid_t group : groups) kill(-group, SIGKILL);
}

}  // namespace lockstep
