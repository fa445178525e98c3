// Loopback TCP between two processes, without Lockstep's transport: the measurements behind
// TcpTransport's connection per direction and its padding of small messages
// (collectives/tcp_transport.h).
//
// Forks a peer; the two processes are pinned to the first two allowed CPUs (one each), open
// TCP_NODELAY connections with 4 MiB buffers, and exchange --bytes each way --reps times,
// each exchange preceded by one of --small bytes each way (0: none). Prints the median and
// the 10th/90th percentiles of the bulk exchanges as the parent saw them.
//
//   bazel build //bench:tcp_loopback_probe
//   for s in 0 1 8 16 64; do bazel-bin/bench/tcp_loopback_probe --small=$s; done
//   bazel-bin/bench/tcp_loopback_probe --connections=shared
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "common/sched.h"

ABSL_FLAG(int64_t, bytes, 1 << 20, "bytes each way per bulk exchange");
ABSL_FLAG(int64_t, small, 0, "bytes each way of the exchange before each bulk one; 0: none");
ABSL_FLAG(int, reps, 200, "bulk exchanges");
ABSL_FLAG(std::string, connections, "split",
          "split: one connection per direction (as TcpTransport); shared: one for both");

namespace {

[[noreturn]] void Die(const char* what) {
  std::perror(what);
  std::exit(1);
}

void Tune(int fd) {
  const int one = 1, buffer = 4 << 20;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
}

int ConnectTo(const sockaddr_in& address) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) Die("socket");
  Tune(fd);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    Die("connect");
  }
  return fd;
}

int AcceptOne(int listen_fd) {
  const int fd = accept(listen_fd, nullptr, nullptr);
  if (fd < 0) Die("accept");
  Tune(fd);
  return fd;
}

// Sends `n` bytes on `out` while receiving `n` on `in`, both non-blocking, yielding when
// neither moves (as TcpTransport does before it sleeps).
void Exchange(int out, int in, const char* send, char* recv, size_t n) {
  size_t sent = 0, received = 0;
  while (sent < n || received < n) {
    bool progress = false;
    if (sent < n) {
      const ssize_t k = ::send(out, send + sent, n - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (k > 0) {
        sent += k;
        progress = true;
      } else if (k < 0 && errno != EAGAIN) {
        Die("send");
      }
    }
    if (received < n) {
      const ssize_t k = ::recv(in, recv + received, n - received, MSG_DONTWAIT);
      if (k > 0) {
        received += k;
        progress = true;
      } else if (k == 0 || (k < 0 && errno != EAGAIN)) {
        Die("recv");
      }
    }
    if (!progress) sched_yield();
  }
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const size_t bytes = absl::GetFlag(FLAGS_bytes), small = absl::GetFlag(FLAGS_small);
  const int reps = absl::GetFlag(FLAGS_reps);
  const std::string connections = absl::GetFlag(FLAGS_connections);
  if (connections != "split" && connections != "shared") {
    std::fprintf(stderr, "--connections must be split or shared, not \"%s\"\n",
                 connections.c_str());
    return 2;
  }
  const bool split = connections == "split";
  if (reps < 1 || bytes < 1) {
    std::fprintf(stderr, "--reps and --bytes must be at least 1\n");
    return 2;
  }
  const std::vector<int> cpus = lockstep::AllowedCpus();

  const int listen_fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (listen_fd < 0 || bind(listen_fd, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      listen(listen_fd, 4) != 0 ||
      getsockname(listen_fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    Die("listen");
  }
  std::vector<char> send(std::max(bytes, small), 1), recv(send.size());

  const pid_t child = fork();
  if (child < 0) Die("fork");
  const bool parent = child != 0;
  if (cpus.size() >= 2) {
    // Best effort: without two CPUs the processes share one, which the output does not hide.
    (void)lockstep::SetCpuAffinity({cpus[parent ? 0 : 1]});
  }
  // The parent's first connection carries parent -> child; with --connections=split the
  // second carries child -> parent.
  int out, in;
  if (parent) {
    out = AcceptOne(listen_fd);
    in = split ? AcceptOne(listen_fd) : out;
  } else {
    in = ConnectTo(address);
    out = split ? ConnectTo(address) : in;
  }
  std::vector<double> us;
  for (int i = 0; i < reps; ++i) {
    if (small > 0) Exchange(out, in, send.data(), recv.data(), small);
    const absl::Time start = absl::Now();
    Exchange(out, in, send.data(), recv.data(), bytes);
    us.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
  }
  close(out);
  if (in != out) close(in);
  if (!parent) return 0;
  int status = 0;
  waitpid(child, &status, 0);
  std::sort(us.begin(), us.end());
  std::printf(
      "tcp loopback, %s connections, %zu bytes each way after %zu: median %.1f us, p10 %.1f, "
      "p90 %.1f (%d exchanges)\n",
      split ? "split" : "shared", bytes, small, us[us.size() / 2], us[us.size() / 10],
      us[us.size() * 9 / 10], reps);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
