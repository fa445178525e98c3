// Loopback TCP between two processes, without Lockstep's transport: the measurements behind
// TcpTransport's connection per direction and its padding of small messages
// (collectives/transport/tcp/tcp_transport.h).
//
// Forks a peer; the two processes are pinned to the first two allowed CPUs (one each), open
// connections tuned as TcpTransport tunes them (collectives/transport/tcp/socket_util.h:
// TCP_NODELAY, TcpOptions' buffers and, unless --congestion says otherwise, its congestion
// control), and exchange --bytes each way --reps times, each exchange preceded by --small_count of
// --small bytes each way (0: none). Prints the median and the 10th/90th percentiles of the bulk
// exchanges as the parent saw them; --tcp_info also prints both sockets' TCP_INFO (cwnd, MSS,
// RTT, receive window) before a few of them. --small_lane sends the small exchanges over
// connections of their own, which tells the bulk connections' TCP state apart from the host's:
// a 2000 KiB exchange after 100 of 40 KiB is slower on either (see the note by MeasureFusion in
// bench/allreduce_rank.cc).
//
//   bazel build //bench:tcp_loopback_probe
//   for s in 0 1 8 16 64; do bazel-bin/bench/tcp_loopback_probe --small=$s; done
//   bazel-bin/bench/tcp_loopback_probe --connections=shared [--congestion=bbr]
//   bazel-bin/bench/tcp_loopback_probe --bytes=2048000 --small=64 --small_count=100 --tcp_info
//   bazel-bin/bench/tcp_loopback_probe --bytes=2048000 --small=40960 --small_count=100 --small_lane
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "collectives/transport/tcp/socket_util.h"
#include "collectives/transport/tcp/tcp_transport.h"
#include "common/child_processes.h"
#include "common/sched.h"

ABSL_FLAG(int64_t, bytes, 1 << 20, "bytes each way per bulk exchange");
ABSL_FLAG(int64_t, small, 0, "bytes each way of the exchange before each bulk one; 0: none");
ABSL_FLAG(int, reps, 200, "bulk exchanges");
ABSL_FLAG(int, small_count, 1, "exchanges of --small bytes before each bulk one");
ABSL_FLAG(bool, tcp_info, false, "print both sockets' TCP_INFO before a few bulk exchanges");
ABSL_FLAG(std::string, congestion, lockstep::collectives::TcpOptions().congestion_control,
          "congestion control list, as TcpOptions::congestion_control (\"\": the host's)");
ABSL_FLAG(bool, small_lane, false, "small exchanges on their own connections");
ABSL_FLAG(std::string, connections, "split",
          "split: one connection per direction (as TcpTransport); shared: one for both");

namespace {

[[noreturn]] void Die(const char* what) {
  std::perror(what);
  std::exit(1);
}

using lockstep::collectives::UniqueFd;

// A connection tuned as TcpTransport tunes its own.
UniqueFd Tuned(absl::StatusOr<UniqueFd> fd) {
  if (!fd.ok()) {
    std::fprintf(stderr, "%s\n", fd.status().ToString().c_str());
    std::exit(1);
  }
  lockstep::collectives::TuneSocket(fd->get(),
                                    lockstep::collectives::TcpOptions().socket_buffer_bytes,
                                    absl::GetFlag(FLAGS_congestion));
  return std::move(fd).value();
}

UniqueFd AcceptOne(int listen_fd) {
  const int fd = accept(listen_fd, nullptr, nullptr);
  if (fd < 0) Die("accept");
  return Tuned(UniqueFd(fd));
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
  const int small_count = absl::GetFlag(FLAGS_small_count);
  const bool print_tcp_info = absl::GetFlag(FLAGS_tcp_info);
  if (reps < 1 || bytes < 1 || small_count < 1) {
    std::fprintf(stderr, "--reps, --bytes and --small_count must be at least 1\n");
    return 2;
  }
  const std::vector<int> cpus = lockstep::AllowedCpus();

  auto listening = lockstep::collectives::ListenEphemeral("127.0.0.1", 4);
  if (!listening.ok()) {
    std::fprintf(stderr, "%s\n", listening.status().ToString().c_str());
    return 1;
  }
  UniqueFd listen_fd = std::move(listening->first);
  const std::string address = listening->second;
  std::vector<char> send(std::max(bytes, small), 1), recv(send.size());

  // Both ends run the same exchange: this process the parent's, a forked child the peer's.
  std::vector<double> us;
  auto run_side = [&](bool parent) {
    if (cpus.size() >= 2) {
      // Best effort: without two CPUs the processes share one, which the output does not hide.
      (void)lockstep::SetCpuAffinity({cpus[parent ? 0 : 1]});
    }
    // The parent's first connection carries parent -> child; with --connections=split the
    // second carries child -> parent.
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    UniqueFd first = parent ? AcceptOne(listen_fd.get())
                            : Tuned(lockstep::collectives::ConnectWithRetry(address, deadline));
    UniqueFd second;
    if (split) {
      second = parent ? AcceptOne(listen_fd.get())
                      : Tuned(lockstep::collectives::ConnectWithRetry(address, deadline));
    }
    const int out = parent || !split ? first.get() : second.get();
    const int in = !parent || !split ? first.get() : second.get();
    UniqueFd third, fourth;
    int small_out = out, small_in = in;
    if (absl::GetFlag(FLAGS_small_lane)) {
      third = parent ? AcceptOne(listen_fd.get())
                     : Tuned(lockstep::collectives::ConnectWithRetry(address, deadline));
      fourth = parent ? AcceptOne(listen_fd.get())
                      : Tuned(lockstep::collectives::ConnectWithRetry(address, deadline));
      small_out = parent ? third.get() : fourth.get();
      small_in = parent ? fourth.get() : third.get();
    }
    for (int i = 0; i < reps; ++i) {
      if (small > 0) {
        for (int k = 0; k < small_count; ++k) {
          Exchange(small_out, small_in, send.data(), recv.data(), small);
        }
      }
      if (parent && print_tcp_info && (i < 3 || i == reps / 2)) {
        for (int fd : {out, in}) {
          tcp_info ti{};
          socklen_t len = sizeof(ti);
          getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len);
          std::printf(
              "rep %d %s: cwnd %u ssthresh %u snd_mss %u rcv_mss %u rtt %u us rcv_rtt %u us "
              "rcv_ssthresh %u rcv_space %u ato %u us unacked %u\n",
              i, fd == out ? "out" : "in ", ti.tcpi_snd_cwnd, ti.tcpi_snd_ssthresh, ti.tcpi_snd_mss,
              ti.tcpi_rcv_mss, ti.tcpi_rtt, ti.tcpi_rcv_rtt, ti.tcpi_rcv_ssthresh,
              ti.tcpi_rcv_space, ti.tcpi_ato, ti.tcpi_unacked);
        }
      }
      const absl::Time start = absl::Now();
      Exchange(out, in, send.data(), recv.data(), bytes);
      us.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
    }
    first = UniqueFd();
    second = UniqueFd();
  };
  absl::Status peer;
  {
    lockstep::ChildProcesses children;
    peer = children
               .Fork("the peer",
                     [&] {
                       listen_fd = UniqueFd();  // the peer must not hold the listening socket
                       run_side(/*parent=*/false);
                       return 0;
                     })
               .status();
    if (!peer.ok()) {
      std::fprintf(stderr, "%s\n", peer.ToString().c_str());
      return 1;
    }
    run_side(/*parent=*/true);
    peer = children.WaitAll(absl::Seconds(60));
  }
  std::sort(us.begin(), us.end());
  std::printf(
      "tcp loopback, %s connections, %zu bytes each way after %d x %zu: median %.1f us, p10 "
      "%.1f, p90 %.1f (%d exchanges)\n",
      split ? "split" : "shared", bytes, small > 0 ? small_count : 0, small, us[us.size() / 2],
      us[us.size() / 10], us[us.size() * 9 / 10], reps);
  if (!peer.ok()) {
    std::fprintf(stderr, "%s\n", peer.ToString().c_str());
    return 1;
  }
  return 0;
}
