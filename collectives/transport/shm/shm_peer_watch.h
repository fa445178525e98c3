// PeerProcessWatch: how a rank of a shared-memory group tells that a peer's process died,
// without a socket to see closed: a pidfd (readable once the process exited; immune to pid
// reuse), its /proc/<pid>/stat where pidfds are missing (kernels before 5.3), or not at all
// when the peer runs in another PID namespace (its pid means nothing here; its crash then
// shows at the deadline of the call waiting for it, and a warning says so at connect).
//
// Ownership: owns the pidfd. Thread model: Dead() may be called from any thread; Start() once.
#ifndef LOCKSTEP_COLLECTIVES_TRANSPORT_SHM_SHM_PEER_WATCH_H_
#define LOCKSTEP_COLLECTIVES_TRANSPORT_SHM_SHM_PEER_WATCH_H_

#include <cstdint>

#include "collectives/transport/tcp/socket_util.h"

namespace lockstep {
namespace collectives {
namespace shm {

// True when `pid` has exited (zombies count as dead: their sockets and mappings are gone).
bool ProcessDead(int pid);

class PeerProcessWatch {
 public:
  enum class Kind { kUnknown, kPidfd, kProc };

  PeerProcessWatch() = default;
  // Starts watching rank `peer` (process `pid` in PID namespace `peer_pid_ns`), as seen by rank
  // `rank` in `own_pid_ns` (0: unknown, as PidNamespace()).
  static PeerProcessWatch Start(int rank, int peer, int pid, uint64_t own_pid_ns,
                                uint64_t peer_pid_ns);

  // Whether the peer's process is known to have exited; false when it cannot be known.
  bool Dead() const;
  Kind kind() const { return kind_; }

 private:
  Kind kind_ = Kind::kUnknown;
  int pid_ = 0;
  UniqueFd pidfd_;
};

}  // namespace shm
}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_TRANSPORT_SHM_SHM_PEER_WATCH_H_
