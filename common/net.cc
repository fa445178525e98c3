#include "common/net.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace lockstep {

std::string HostPort::ToString() const {
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<HostPort> ParseHostPort(absl::string_view address) {
  HostPort out;
  absl::string_view port_text;
  if (absl::StartsWith(address, "[")) {
    size_t close = address.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", address, "\": IPv6 host has no closing ']'"));
    }
    out.host = std::string(address.substr(1, close - 1));
    absl::string_view rest = address.substr(close + 1);
    if (!absl::ConsumePrefix(&rest, ":")) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", address, "\": expected host:port, e.g. \"[::1]:2222\""));
    }
    port_text = rest;
    if (out.host.empty() || out.host.find(':') == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", address, "\": brackets must hold an IPv6 address"));
    }
  } else {
    size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", address, "\": expected host:port, e.g. \"host0:2222\""));
    }
    out.host = std::string(address.substr(0, colon));
    port_text = address.substr(colon + 1);
    if (out.host.find(':') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", address, "\": an IPv6 host must be in brackets, e.g. \"[::1]:2222\""));
    }
    if (out.host.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("\"", address, "\": empty host"));
    }
    for (char c : out.host) {
      if (!(isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_')) {
        return absl::InvalidArgumentError(absl::StrCat(
            "\"", address, "\": host has an invalid character '", std::string(1, c), "'"));
      }
    }
  }
  int port = 0;
  bool digits =
      !port_text.empty() && port_text.find_first_not_of("0123456789") == absl::string_view::npos;
  if (!digits || !absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", address, "\": port must be a number in 1..65535"));
  }
  out.port = port;
  return out;
}

absl::StatusOr<HostPort> ParseListenAddress(absl::string_view address, absl::string_view flag) {
  // ParseHostPort wants a port a peer can dial: check the rest with a stand-in for port 0.
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " \"", address,
                     "\": expected HOST:PORT (PORT 0: any free port), e.g. \"0.0.0.0:9400\""));
  }
  absl::StatusOr<HostPort> checked =
      ParseHostPort(absl::StrCat(address.substr(0, colon), ":", port == 0 ? 1 : port));
  if (!checked.ok())
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", checked.status().message()));
  checked->port = port;
  return checked;
}

absl::Status WritePortFile(const std::string& path, int port) {
  std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << port << "\n";
    f.close();
    if (!f) {
      return absl::InternalError(
          absl::StrCat("cannot write port file ", tmp, ": ", std::strerror(errno)));
    }
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot rename ", tmp, " to ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> WaitForPortFile(const std::string& path, absl::Time deadline, Clock* clock) {
  while (true) {
    std::ifstream f(path);
    int port = 0;
    if (f && (f >> port) && port > 0) return port;
    if (clock->Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("no port in ", path, " by the deadline; did the server start?"));
    }
    clock->SleepFor(absl::Milliseconds(2));
  }
}

absl::StatusOr<std::unique_ptr<ReservedPort>> ReservedPort::Create(const std::string& host,
                                                                   int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve \"", host, "\": ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(res, freeaddrinfo);
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 128) != 0) {
    std::string err = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port, ": ", err));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  int bound_port = bound.ss_family == AF_INET6
                       ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                       : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return std::unique_ptr<ReservedPort>(new ReservedPort(fd, bound_port));
}

ReservedPort::~ReservedPort() { close(fd_); }

}  // namespace lockstep
