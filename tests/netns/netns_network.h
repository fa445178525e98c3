// NetnsNetwork: a small network of Linux network namespaces for multi-host tests. Each
// "host" is a namespace with its own loopback and one interface, eth0, a veth pair whose
// other end is a port of a bridge living in a namespace of its own; every host has an IPv4
// address in 10.77.0.0/24 (host i: 10.77.0.<i+1>) and an IPv6 ULA in fd00::/64 (host i:
// fd00::<i+1>). Nothing is added to the namespace this process started in, and no packet
// can leave these namespaces: the bridge has no uplink.
//
// Faults: Partition() drops every packet in and out of a host (an nftables table in its
// namespace; its loopback still works), Heal() removes it; Loss() drops a share of them at
// random (nftables); Delay() delays (and may drop) every frame between a host and the bridge
// in userspace (delay_relay.cc), for kernels without the netem qdisc; it works on the
// connections already open. The destructor stops the relays and deletes every namespace (which
// deletes their interfaces); Create() first deletes the namespaces a dead earlier run left
// behind (names carry the creating process's pid).
//
// Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2; Create() answers
// FAILED_PRECONDITION saying what is missing (only then: any other failure of `ip` is
// INTERNAL), so that tests can skip with the reason locally and fail under CI
// (LS_SKIP_OR_FAIL_UNLESS_CI, common/ci_skip.h).
// Ownership: owns the namespaces. Thread model: one owner thread; EnterHost() moves only
// the calling thread (and the threads it starts afterwards) into a host's namespace.
#ifndef LOCKSTEP_TESTS_NETNS_NETNS_NETWORK_H_
#define LOCKSTEP_TESTS_NETNS_NETNS_NETWORK_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace lockstep {
namespace testing {

class NetnsNetwork {
 public:
  // `hosts` namespaces (at most 200) joined by one bridge; `log_dir` receives the output
  // of every command run (netns_commands.log). FAILED_PRECONDITION when this process may
  // not make namespaces (not root, no `ip`, `ip netns add` refused: no CAP_SYS_ADMIN or
  // CAP_NET_ADMIN, /run/netns not writable), INTERNAL when a step fails otherwise.
  static absl::StatusOr<std::unique_ptr<NetnsNetwork>> Create(int hosts,
                                                              const std::string& log_dir);
  ~NetnsNetwork();
  NetnsNetwork(const NetnsNetwork&) = delete;
  NetnsNetwork& operator=(const NetnsNetwork&) = delete;

  int hosts() const;
  // The namespace's name (for `ip netns exec`).
  const std::string& ns(int host) const;
  std::string Ipv4(int host) const;  // "10.77.0.2"
  std::string Ipv6(int host) const;  // "fd00::2" (bare; bracket it in host:port)
  // argv prefix that runs a program inside host's namespace: {ip, netns, exec, <ns>}.
  std::vector<std::string> ExecPrefix(int host) const;

  // Moves the calling thread into host's namespace (setns). Threads it starts afterwards
  // are born there; threads started before stay where they were.
  absl::Status EnterHost(int host);

  // Drops every packet to and from `host` except on its loopback (nftables), as a cut cable
  // or a dead switch port would: peers see silence, not resets. FAILED_PRECONDITION when
  // `nft` is missing.
  absl::Status Partition(int host);
  absl::Status Heal(int host);
  // Drops `percent`% of the packets in and out of `host`, at random (nftables numgen), for
  // kernels without netem. FAILED_PRECONDITION when `nft` is missing.
  absl::Status Loss(int host, int percent);
  absl::Status ClearLoss(int host);
  // Every frame between `host` and the bridge arrives `delay` late, and `loss_percent` % of
  // them are dropped (seeded by `seed`): the link is spliced, in the bridge's namespace, into
  // `relay_bin` (tests/netns:delay_relay), which runs until ClearDelay() or the destructor.
  // Open connections stay open: only the layer-2 path changes. Returns once it relays.
  absl::Status Delay(int host, absl::Duration delay, int loss_percent, uint32_t seed,
                     const std::string& relay_bin);
  absl::Status ClearDelay(int host);

  // Runs a command to completion (30 s at most); INTERNAL with its output when it fails.
  absl::Status Run(const std::vector<std::string>& argv);

 private:
  NetnsNetwork(std::string prefix, std::string log) : prefix_(prefix), log_(log) {}
  absl::Status Build(int hosts);
  // An nftables table of two chains (input, output) in host's namespace, with the rules
  // given ("policy drop; iif lo accept;").
  absl::Status AddNftTable(int host, const std::string& table, const std::string& in_rule,
                           const std::string& out_rule);
  absl::Status DeleteNftTable(int host, const std::string& table);

  const std::string prefix_;  // "lsnt<pid>-"
  const std::string log_;
  std::string bridge_ns_;
  // Created so far, deleted by the destructor: the bridge's first, then host 0, 1, ...
  std::vector<std::string> namespaces_;
  std::map<int, pid_t> relays_;  // host -> its delay_relay process (Delay())
};

// The path of iproute2's `ip`, or "" when there is none.
std::string IpTool();

}  // namespace testing
}  // namespace lockstep

#endif  // LOCKSTEP_TESTS_NETNS_NETNS_NETWORK_H_
