#include "collectives/transport/tcp/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "common/net.h"
#include "common/status.h"

namespace lockstep {
namespace collectives {

void UniqueFd::Reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

int PollTimeoutMs(absl::Time deadline, int cap_ms) {
  absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  int64_t ms = absl::ToInt64Milliseconds(left) + 1;
  return static_cast<int>(std::min<int64_t>(ms, cap_ms));
}

namespace {
absl::Status WaitFd(int fd, short events, absl::Time deadline, const char* what) {
  while (true) {
    pollfd p{fd, events, 0};
    int timeout = PollTimeoutMs(deadline, 1000);
    int rc = poll(&p, 1, timeout);
    if (rc > 0) return absl::OkStatus();
    if (rc < 0 && errno != EINTR) {
      return absl::UnavailableError(absl::StrCat(what, ": poll: ", std::strerror(errno)));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(what, ": deadline passed"));
    }
  }
}
}  // namespace

absl::Status WriteFull(int fd, const void* data, size_t len, absl::Time deadline) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= n;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (auto s = WaitFd(fd, POLLOUT, deadline, "write"); !s.ok()) return s;
      continue;
    }
    return absl::UnavailableError(absl::StrCat("write: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status ReadFull(int fd, void* data, size_t len, absl::Time deadline) {
  char* p = static_cast<char*>(data);
  while (len > 0) {
    ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= n;
      continue;
    }
    if (n == 0) return absl::UnavailableError("read: connection closed by the peer");
    if (errno == EAGAIN || errno == EINTR) {
      if (auto s = WaitFd(fd, POLLIN, deadline, "read"); !s.ok()) return s;
      continue;
    }
    return absl::UnavailableError(absl::StrCat("read: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

namespace {
// Every address `host` resolves to, IPv4 and IPv6 alike (getaddrinfo, AF_UNSPEC), in the
// resolver's order of preference; `host` is bare, without brackets ("::1", "10.0.0.1").
struct Resolved {
  sockaddr_storage addr{};
  socklen_t len = 0;
  int family = AF_UNSPEC;
};

absl::StatusOr<std::vector<Resolved>> Resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve host '", host, "': ", gai_strerror(rc)));
  }
  std::vector<Resolved> out;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    if (a->ai_family != AF_INET && a->ai_family != AF_INET6) continue;
    Resolved r;
    std::memcpy(&r.addr, a->ai_addr, a->ai_addrlen);
    r.len = a->ai_addrlen;
    r.family = a->ai_family;
    out.push_back(r);
  }
  freeaddrinfo(res);
  if (out.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("host '", host, "' has no IPv4 or IPv6 address"));
  }
  return out;
}

int PortOf(const sockaddr_storage& addr) {
  return addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port)
                                    : ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
}
}  // namespace

absl::StatusOr<std::pair<UniqueFd, std::string>> Listen(const std::string& host, int port,
                                                        int backlog) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen port ", port, " is not in 0..65535 (0: an ephemeral port)"));
  }
  LS_ASSIGN_OR_RETURN(std::vector<Resolved> addrs, Resolve(host, port, /*passive=*/true));
  std::string errors;
  bool in_use = false;
  for (const Resolved& addr : addrs) {
    UniqueFd fd(socket(addr.family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int one = 1;
    if (fd.get() < 0 ||
        (port != 0 && setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) ||
        bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr.addr), addr.len) != 0 ||
        listen(fd.get(), backlog) != 0) {
      in_use = in_use || errno == EADDRINUSE;
      absl::StrAppend(&errors, errors.empty() ? "" : "; ",
                      addr.family == AF_INET6 ? "IPv6: " : "IPv4: ", std::strerror(errno));
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len);
    return std::make_pair(std::move(fd), HostPort{host, PortOf(bound)}.ToString());
  }
  const std::string where = HostPort{host, port}.ToString();
  if (in_use && port != 0) {
    return absl::FailedPreconditionError(absl::StrCat("listen on ", where, ": port ", port,
                                                      " is in use by another process (", errors,
                                                      "); stop it or choose another port"));
  }
  return absl::UnavailableError(
      absl::StrCat("listen on ", where, ": ", errors, " (is the address on this host?)"));
}

namespace {
// One connection attempt, bounded by `deadline`: the connect runs non-blocking, so a peer
// whose packets are dropped (a partition answers nothing, not even a reset) costs the
// deadline, not the kernel's ~2 minutes of SYN retries. Returns a blocking socket, or -1
// with `*err` set (ETIMEDOUT at the deadline).
UniqueFd ConnectOnce(const Resolved& addr, absl::Time deadline, int* err) {
  UniqueFd fd(socket(addr.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (fd.get() < 0) {
    *err = errno;
    return UniqueFd();
  }
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr.addr), addr.len) != 0) {
    if (errno != EINPROGRESS) {
      *err = errno;
      return UniqueFd();
    }
    if (!WaitFd(fd.get(), POLLOUT, deadline, "connect").ok()) {
      *err = ETIMEDOUT;
      return UniqueFd();
    }
    int so_error = 0;
    socklen_t len = sizeof(so_error);
    if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) so_error = errno;
    if (so_error != 0) {
      *err = so_error;
      return UniqueFd();
    }
  }
  const int flags = fcntl(fd.get(), F_GETFL, 0);
  fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}
}  // namespace

absl::StatusOr<UniqueFd> ConnectWithRetry(const std::string& address, absl::Time deadline) {
  LS_ASSIGN_OR_RETURN(HostPort hp, ParseHostPort(address));
  LS_ASSIGN_OR_RETURN(std::vector<Resolved> addrs, Resolve(hp.host, hp.port, /*passive=*/false));
  absl::Duration backoff = absl::Milliseconds(1);
  while (true) {
    int err = 0;
    // Every address the host resolves to, in order (a name may resolve to both families).
    for (const Resolved& addr : addrs) {
      UniqueFd fd = ConnectOnce(addr, deadline, &err);
      if (fd.get() >= 0) return fd;
    }
    if (absl::Now() + backoff >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("connect to ", address, ": ", std::strerror(err), " until the deadline"));
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Milliseconds(100));
  }
}

std::string TuneSocket(int fd, int buffer_bytes, const std::string& congestion) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (buffer_bytes > 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof(buffer_bytes));
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof(buffer_bytes));
  }
  for (absl::string_view name : absl::StrSplit(congestion, ',', absl::SkipEmpty())) {
    // EPERM when not in net.ipv4.tcp_allowed_congestion_control; ENOENT when not built in.
    if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), name.size()) == 0) {
      return std::string(name);
    }
  }
  return "";
}

absl::Status SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return absl::UnavailableError(absl::StrCat("fcntl O_NONBLOCK: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace collectives
}  // namespace lockstep
