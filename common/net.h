// Network helpers shared by every binary: host:port parsing (IPv4, names, bracketed IPv6),
// port files (a server writes the port it bound, scripts and tests read it back), and a
// reserved TCP port (a listening socket kept open so that its port stays ours).
// Thread model: free functions are thread-safe; a ReservedPort is owned by one thread.
#ifndef LOCKSTEP_COMMON_NET_H_
#define LOCKSTEP_COMMON_NET_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace lockstep {

struct HostPort {
  std::string host;  // without brackets for IPv6: "::1"
  int port = 0;      // 1..65535
  // "host:port", with brackets around an IPv6 host.
  std::string ToString() const;
};

// Parses "host:port" ("10.0.0.1:2222", "worker-0.svc:2222", "[::1]:2222").
// INVALID_ARGUMENT saying what is wrong (no port, port out of range, unbracketed IPv6).
absl::StatusOr<HostPort> ParseHostPort(absl::string_view address);

// Parses an address to listen on: as ParseHostPort, but port 0 (any free port) is allowed.
// `flag` ("--metrics_address") prefixes every message.
absl::StatusOr<HostPort> ParseListenAddress(absl::string_view address, absl::string_view flag);

// Writes `port` to `path` atomically (a temporary file renamed into place), so a reader
// never sees a partial number.
absl::Status WritePortFile(const std::string& path, int port);

// Waits until `path` holds a port number or `deadline` passes (DEADLINE_EXCEEDED naming
// the file). Polls every few milliseconds.
absl::StatusOr<int> WaitForPortFile(const std::string& path, absl::Time deadline,
                                    Clock* clock = Clock::Real());

// A TCP socket bound and listening on `host`:port (0 = any free port), kept open so that no
// other process takes the port. A worker reserves its data-plane address this way.
class ReservedPort {
 public:
  static absl::StatusOr<std::unique_ptr<ReservedPort>> Create(const std::string& host, int port);
  ~ReservedPort();
  ReservedPort(const ReservedPort&) = delete;
  ReservedPort& operator=(const ReservedPort&) = delete;

  int port() const { return port_; }
  int fd() const { return fd_; }

 private:
  ReservedPort(int fd, int port) : fd_(fd), port_(port) {}
  int fd_;
  int port_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_NET_H_
