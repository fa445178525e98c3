// Small POSIX socket helpers for the TCP transport: an fd owner, full reads and writes
// bounded by a deadline, listening on port 0 and connecting with retries, over IPv4 or IPv6.
// Thread model: free functions; a UniqueFd is owned by one thread at a time.
#ifndef LOCKSTEP_COLLECTIVES_TRANSPORT_TCP_SOCKET_UTIL_H_
#define LOCKSTEP_COLLECTIVES_TRANSPORT_TCP_SOCKET_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace lockstep {
namespace collectives {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      Reset();
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }
  int get() const { return fd_; }
  void Reset();

 private:
  int fd_ = -1;
};

// Milliseconds until `deadline`, clamped to [0, cap_ms].
int PollTimeoutMs(absl::Time deadline, int cap_ms);

absl::Status WriteFull(int fd, const void* data, size_t len, absl::Time deadline);
absl::Status ReadFull(int fd, void* data, size_t len, absl::Time deadline);

// Listens on host:port, port 0 for an ephemeral one; returns the socket and "host:port"
// ("[host]:port" for an IPv6 host). `host` is bare ("10.0.0.1", "fd00::2", a name) and may be
// IPv4 or IPv6: the first of its addresses that binds is used. A fixed port is bound with
// SO_REUSEADDR, so a restarted process rebinds it at once (its old connections in TIME_WAIT
// notwithstanding). FAILED_PRECONDITION when a fixed port is in use by another listener,
// INVALID_ARGUMENT for a port outside 0..65535, UNAVAILABLE when no address binds otherwise.
absl::StatusOr<std::pair<UniqueFd, std::string>> Listen(const std::string& host, int port,
                                                        int backlog);
inline absl::StatusOr<std::pair<UniqueFd, std::string>> ListenEphemeral(const std::string& host,
                                                                        int backlog) {
  return Listen(host, 0, backlog);
}
// Connects to "host:port" or "[ipv6]:port" (common/net's ParseHostPort), trying every address
// the host resolves to, IPv4 or IPv6, and retrying refused connections until `deadline`.
// The deadline bounds each attempt too: a peer that answers nothing (its packets dropped)
// gives DEADLINE_EXCEEDED at the deadline. The socket returned is blocking.
absl::StatusOr<UniqueFd> ConnectWithRetry(const std::string& address, absl::Time deadline);

// TCP_NODELAY, send/receive buffers of `buffer_bytes` (0: leave the kernel's autotuning), and
// the first congestion control of the comma-separated `congestion` list that the kernel lets
// this process set (TCP_CONGESTION; empty: the system's default). Returns the one set, or "".
std::string TuneSocket(int fd, int buffer_bytes, const std::string& congestion);
absl::Status SetNonBlocking(int fd);

}  // namespace collectives
}  // namespace lockstep

#endif  // LOCKSTEP_COLLECTIVES_TRANSPORT_TCP_SOCKET_UTIL_H_
