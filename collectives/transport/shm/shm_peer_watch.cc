#include "collectives/transport/shm/shm_peer_watch.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace lockstep {
namespace collectives {
namespace shm {

bool ProcessDead(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  if (!std::getline(in, stat)) return true;
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return false;
  char state = stat[paren + 2];
  return state == 'Z' || state == 'X';
}

PeerProcessWatch PeerProcessWatch::Start(int rank, int peer, int pid, uint64_t own_pid_ns,
                                         uint64_t peer_pid_ns) {
  PeerProcessWatch w;
  w.pid_ = pid;
  if (own_pid_ns == 0 || peer_pid_ns != own_pid_ns) {
    spdlog::warn(
        "collectives: rank {}: rank {} (pid {}) runs in another PID namespace, so a crash of "
        "it shows only at the deadline of the call waiting for it (an abort shows at once); "
        "to see crashes at once, share the PID namespace (Kubernetes: "
        "shareProcessNamespace) or use TCP",
        rank, peer, pid);
    w.kind_ = Kind::kUnknown;
    return w;
  }
  // A pidfd names the process, not its number: a reused pid cannot fool it.
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd >= 0) {
    w.pidfd_ = UniqueFd(fd);
    w.kind_ = Kind::kPidfd;
  } else {
    w.kind_ = Kind::kProc;  // no pidfd (kernels before 5.3), or already gone (ESRCH)
  }
  return w;
}

bool PeerProcessWatch::Dead() const {
  switch (kind_) {
    case Kind::kPidfd: {
      pollfd f{pidfd_.get(), POLLIN, 0};  // readable once the process has exited
      return poll(&f, 1, 0) == 1;
    }
    case Kind::kProc:
      return ProcessDead(pid_);
    case Kind::kUnknown:
      break;
  }
  return false;
}

}  // namespace shm
}  // namespace collectives
}  // namespace lockstep
