#include "common/http_get.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace {

// Closes the socket when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

absl::StatusOr<std::string> HttpGet(const std::string& host, int port, const std::string& path,
                                    absl::Duration timeout) {
  const std::string url = absl::StrCat("http://", host, ":", port, path);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(absl::StrCat(url, ": ", gai_strerror(rc)));
  }
  Fd s;
  s.fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv = absl::ToTimeval(timeout);
  if (s.fd >= 0) {
    setsockopt(s.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(s.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  }
  const bool connected = s.fd >= 0 && connect(s.fd, found->ai_addr, found->ai_addrlen) == 0;
  const int connect_errno = errno;
  freeaddrinfo(found);
  if (!connected) {
    return absl::UnavailableError(
        absl::StrCat(url, ": cannot connect: ", std::strerror(connect_errno)));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host, ":", port, "\r\n\r\n");
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = send(s.fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      return absl::UnavailableError(absl::StrCat(url, ": send: ", std::strerror(errno)));
    }
    sent += static_cast<size_t>(n);
  }
  std::string answer;
  char buf[16384];
  while (true) {
    const ssize_t n = recv(s.fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return absl::DeadlineExceededError(
            absl::StrCat(url, ": no complete answer within ", absl::FormatDuration(timeout)));
      }
      return absl::UnavailableError(absl::StrCat(url, ": recv: ", std::strerror(errno)));
    }
    answer.append(buf, static_cast<size_t>(n));
  }
  const size_t line_end = answer.find("\r\n");
  const size_t body = answer.find("\r\n\r\n");
  if (answer.rfind("HTTP/", 0) != 0 || line_end == std::string::npos || body == std::string::npos) {
    return absl::InternalError(absl::StrCat(url, ": not an HTTP answer"));
  }
  const std::string status_line = answer.substr(0, line_end);
  if (status_line.find(" 200") == std::string::npos) {
    return absl::FailedPreconditionError(absl::StrCat(url, ": ", status_line));
  }
  return answer.substr(body + 4);
}

}  // namespace lockstep
