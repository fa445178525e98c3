// delay_relay: a userspace stand-in for `tc netem delay D loss P%`, for kernels without the
// netem qdisc. It joins two interfaces of the namespace it runs in at layer 2: every Ethernet
// frame that arrives on one leaves through the other `--delay_ms` later, except a share of
// `--loss_percent` % that is dropped (a seeded generator, so a run can be repeated).
// NetnsNetwork::Delay() splices it into a host's link to the bridge; see netns_network.h.
//
//   delay_relay <if_a> <if_b> --delay_ms=200 --loss_percent=1 --seed=1
//
// Frames are read and sent with AF_PACKET sockets that carry the virtio-net header
// (PACKET_VNET_HDR), so a TCP segment the kernel left unsegmented (GSO, up to 64 KiB) is
// forwarded whole and segmented on the way out, checksums included.
// Thread model: one thread per direction; each receives into a FIFO of (due time, frame) and
// sends the frames that are due. Runs until SIGTERM or SIGINT; prints "relaying" when ready.
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace {

constexpr int kSocketBufferBytes = 64 << 20;

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

// An AF_PACKET socket bound to `ifname` that sees every frame arriving on it; -1 on failure
// (printed).
int OpenPacketSocket(const std::string& ifname) {
  const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, htons(ETH_P_ALL));
  if (fd < 0) {
    perror("socket(AF_PACKET)");
    return -1;
  }
  int one = 1;
  if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)) != 0) {
    perror("PACKET_VNET_HDR");
    return -1;
  }
  // Room for a delay's worth of frames, so that only --loss_percent drops any: the frames of
  // 200 ms arrive, and later leave, in bursts (the FORCE variants pass net.core.*mem_max).
  int bytes = kSocketBufferBytes;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes));
  setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof(bytes));
  sockaddr_ll addr{};
  addr.sll_family = AF_PACKET;
  addr.sll_protocol = htons(ETH_P_ALL);
  addr.sll_ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
  if (addr.sll_ifindex == 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    fprintf(stderr, "bind to %s: %s\n", ifname.c_str(), strerror(errno));
    return -1;
  }
  return fd;
}

struct Frame {
  absl::Time due;
  std::vector<char> bytes;  // virtio-net header, then the Ethernet frame
};

// Sends one frame, waiting (briefly) for room; false if it could not be sent.
bool SendFrame(int fd, const std::vector<char>& f) {
  for (int tries = 0; tries < 100; ++tries) {
    if (send(fd, f.data(), f.size(), 0) >= 0) return true;
    if (errno != EAGAIN && errno != ENOBUFS && errno != EINTR) return false;
    pollfd p{fd, POLLOUT, 0};
    poll(&p, 1, 1);
  }
  return false;
}

// Moves frames arriving on `in` to `out`, each `delay` later, dropping `loss_percent` % of
// them; prints what it did when it stops.
void Relay(int in, int out, absl::Duration delay, int loss_percent, uint32_t seed,
           const char* name) {
  int64_t relayed = 0, lost = 0, unsent = 0;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> percent(0, 99);
  std::deque<Frame> queue;
  std::vector<char> buf(1 << 18);  // a GSO frame (<= 64 KiB by default) and then some
  while (!g_stop.load()) {
    const absl::Time now = absl::Now();
    while (!queue.empty() && queue.front().due <= now) {
      if (SendFrame(out, queue.front().bytes)) {
        ++relayed;
      } else {
        ++unsent;
      }
      queue.pop_front();
    }
    int wait_ms = 100;  // looks at g_stop at least this often
    if (!queue.empty()) {
      wait_ms = static_cast<int>(
          std::min<int64_t>(wait_ms, absl::ToInt64Milliseconds(queue.front().due - now) + 1));
    }
    pollfd p{in, POLLIN, 0};
    if (poll(&p, 1, wait_ms) <= 0) continue;
    for (;;) {
      sockaddr_ll from{};
      socklen_t from_len = sizeof(from);
      const ssize_t n = recvfrom(in, buf.data(), buf.size(), MSG_TRUNC,
                                 reinterpret_cast<sockaddr*>(&from), &from_len);
      if (n <= 0) break;
      if (static_cast<size_t>(n) > buf.size()) {  // cut short: never forward a partial frame
        ++unsent;
        continue;
      }
      // What this relay itself sent out of `in` (the other direction) comes back as outgoing.
      if (from.sll_pkttype == PACKET_OUTGOING) continue;
      if (percent(rng) < loss_percent) {
        ++lost;
        continue;
      }
      queue.push_back({absl::Now() + delay, std::vector<char>(buf.data(), buf.data() + n)});
    }
  }
  fprintf(stderr, "delay_relay %s: %lld frames relayed, %lld dropped at random, %lld unsent\n",
          name, static_cast<long long>(relayed), static_cast<long long>(lost),
          static_cast<long long>(unsent));
}

bool Flag(absl::string_view arg, absl::string_view name, int64_t* value) {
  if (!absl::ConsumePrefix(&arg, name)) return false;
  if (!absl::SimpleAtoi(arg, value) || *value < 0) {
    fprintf(stderr, "bad value in %s\n", std::string(name).c_str());
    exit(2);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s IF_A IF_B [--delay_ms=N] [--loss_percent=N] [--seed=N]\n", argv[0]);
    return 2;
  }
  int64_t delay_ms = 0, loss_percent = 0, seed = 1;
  for (int i = 3; i < argc; ++i) {
    if (!Flag(argv[i], "--delay_ms=", &delay_ms) &&
        !Flag(argv[i], "--loss_percent=", &loss_percent) && !Flag(argv[i], "--seed=", &seed)) {
      fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (loss_percent > 100) {
    fprintf(stderr, "--loss_percent=%lld is over 100\n", static_cast<long long>(loss_percent));
    return 2;
  }
  const int a = OpenPacketSocket(argv[1]);
  const int b = OpenPacketSocket(argv[2]);
  if (a < 0 || b < 0) return 1;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  const absl::Duration delay = absl::Milliseconds(delay_ms);
  const std::string a_to_b_name = std::string(argv[1]) + " -> " + argv[2];
  const std::string b_to_a_name = std::string(argv[2]) + " -> " + argv[1];
  std::thread a_to_b(Relay, a, b, delay, static_cast<int>(loss_percent),
                     static_cast<uint32_t>(seed), a_to_b_name.c_str());
  std::thread b_to_a(Relay, b, a, delay, static_cast<int>(loss_percent),
                     static_cast<uint32_t>(seed + 1), b_to_a_name.c_str());
  printf("relaying\n");
  fflush(stdout);
  a_to_b.join();
  b_to_a.join();
  close(a);
  close(b);
  return 0;
}
