#include "collectives/socket_util.h"

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

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"

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
absl::StatusOr<sockaddr_in> Resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve host '", host, "': ", gai_strerror(rc)));
  }
  sockaddr_in addr = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
  freeaddrinfo(res);
  addr.sin_port = htons(port);
  return addr;
}

absl::StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& address) {
  size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(absl::StrCat("bad address '", address, "' (host:port)"));
  }
  return std::make_pair(address.substr(0, colon), port);
}
}  // namespace

absl::StatusOr<std::pair<UniqueFd, std::string>> ListenEphemeral(const std::string& host,
                                                                 int backlog) {
  auto addr = Resolve(host, 0);
  if (!addr.ok()) return addr.status();
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&*addr), sizeof(*addr)) != 0 ||
      listen(fd.get(), backlog) != 0) {
    return absl::UnavailableError(absl::StrCat("listen on ", host, ":0: ", std::strerror(errno)));
  }
  sockaddr_in bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len);
  return std::make_pair(std::move(fd), absl::StrCat(host, ":", ntohs(bound.sin_port)));
}

absl::StatusOr<UniqueFd> ConnectWithRetry(const std::string& address, absl::Time deadline) {
  auto hp = SplitHostPort(address);
  if (!hp.ok()) return hp.status();
  auto addr = Resolve(hp->first, hp->second);
  if (!addr.ok()) return addr.status();
  absl::Duration backoff = absl::Milliseconds(1);
  while (true) {
    UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (connect(fd.get(), reinterpret_cast<sockaddr*>(&*addr), sizeof(*addr)) == 0) return fd;
    int err = errno;
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
