#include "common/subprocess.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace lockstep {

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(const SubprocessOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("argv: empty");
  const std::string& program = options.argv[0];
  if (access(program.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("cannot execute ", program, ": ", std::strerror(errno),
                                            " (build it with `bazel build`, or pass its path)"));
  }
  // Everything the child needs is prepared before fork: after fork only
  // async-signal-safe calls are allowed.
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : options.env) env[k] = v;
  for (const std::string& k : options.unset_env) env.erase(k);
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(absl::StrCat(k, "=", v));
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = options.argv;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  // The files of stdout and stderr ("": log_file's; both "": inherited).
  const std::string out_path = options.stdout_file.empty() ? options.log_file : options.stdout_file;
  const std::string err_path = options.stderr_file.empty() ? options.log_file : options.stderr_file;
  std::vector<int> fds;
  auto close_fds = [&fds] {
    for (int fd : fds) close(fd);
  };
  auto open_log = [&](const std::string& path, const char* field) -> absl::StatusOr<int> {
    if (path.empty()) return -1;
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      return absl::InternalError(
          absl::StrCat("cannot open ", field, " ", path, ": ", std::strerror(errno)));
    }
    fds.push_back(fd);
    return fd;
  };
  absl::StatusOr<int> out_fd =
      open_log(out_path, options.stdout_file.empty() ? "log file" : "stdout_file");
  absl::StatusOr<int> err_fd = out_fd;
  if (out_fd.ok() && err_path != out_path) {
    err_fd = open_log(err_path, options.stderr_file.empty() ? "log file" : "stderr_file");
  }
  if (!out_fd.ok() || !err_fd.ok()) {
    close_fds();
    return !out_fd.ok() ? out_fd.status() : err_fd.status();
  }
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close_fds();
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, options.parent_death_signal);
    if (getppid() != parent) _exit(127);  // the parent died before prctl took effect
    if (options.new_process_group) setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (*out_fd >= 0) dup2(*out_fd, STDOUT_FILENO);
    if (*err_fd >= 0) dup2(*err_fd, STDERR_FILENO);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  // Also here, so that SignalGroup reaches the group even before the child ran setpgid.
  if (options.new_process_group) setpgid(pid, pid);
  close_fds();
  size_t slash = program.rfind('/');
  return std::unique_ptr<Subprocess>(
      new Subprocess(pid, slash == std::string::npos ? program : program.substr(slash + 1),
                     options.new_process_group));
}

Subprocess::~Subprocess() {
  if (!reaped_) {
    kill(pid_, SIGKILL);
    Reap(/*block=*/true);
  }
}

bool Subprocess::Reap(bool block) {
  if (reaped_) return true;
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &status, block ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) {
    reaped_ = true;
    wait_status_ = status;
  }
  return reaped_;
}

bool Subprocess::running() { return !Reap(/*block=*/false); }

void Subprocess::Signal(int sig) {
  if (!Reap(/*block=*/false)) kill(pid_, sig);
}

void Subprocess::SignalGroup(int sig) {
  if (own_group_) {
    kill(-pid_, sig);
  } else {
    Signal(sig);
  }
}

absl::StatusOr<int> Subprocess::Wait(absl::Time deadline) {
  while (!Reap(/*block=*/false)) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(name_, " (pid ", pid_, ") still running at the deadline"));
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
  return wait_status_;
}

int Subprocess::Stop(absl::Duration grace) {
  Signal(SIGTERM);
  if (!Wait(absl::Now() + grace).ok()) {
    kill(pid_, SIGKILL);
    Reap(/*block=*/true);
  }
  return wait_status_;
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exit ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("killed by ", strsignal(WTERMSIG(status)));
  return absl::StrCat("wait status ", status);
}

}  // namespace lockstep
