#include "tests/netns/netns_network.h"

#include <sys/stat.h>

#include <thread>

#include "absl/time/clock.h"
#include "collectives/transport/tcp/socket_util.h"
#include "common/ci_skip.h"
#include "common/net.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace lockstep {
namespace testing {
namespace {

using collectives::ConnectWithRetry;
using collectives::ListenEphemeral;
using collectives::UniqueFd;

// Runs `fn` on a thread of its own inside host's namespace (this thread stays where it is).
template <typename Fn>
void InHost(NetnsNetwork* net, int host, Fn fn) {
  std::thread t([&] {
    absl::Status entered = net->EnterHost(host);
    ASSERT_TRUE(entered.ok()) << entered;
    fn();
  });
  t.join();
}

// Connects from host 1 to `address` (on host 0) within `limit`.
absl::Status ConnectFromHost1(NetnsNetwork* net, const std::string& address, absl::Duration limit) {
  absl::Status result;
  InHost(net, 1, [&] { result = ConnectWithRetry(address, absl::Now() + limit).status(); });
  return result;
}

bool Exists(const std::string& ns) {
  struct stat st;
  return stat(("/run/netns/" + ns).c_str(), &st) == 0;
}

// Two hosts reach each other over IPv4 and IPv6 (the data plane's own socket helpers); a
// partition makes host 0 silent (connects time out rather than being refused) and healing
// it restores the path; the destructor deletes every namespace.
TEST(NetnsNetworkTest, HostsConnectOverBothFamiliesAndAPartitionSilencesOne) {
  auto net = NetnsNetwork::Create(2, TmpDir("network"));
  if (net.status().code() == absl::StatusCode::kFailedPrecondition) {
    LS_SKIP_OR_FAIL_UNLESS_CI("network namespaces (root)") << net.status().message();
  }
  ASSERT_TRUE(net.ok()) << net.status();
  const std::vector<std::string> names = {(*net)->ns(0), (*net)->ns(1)};
  for (const std::string& host : {(*net)->Ipv4(0), (*net)->Ipv6(0)}) {
    SCOPED_TRACE(host);
    std::string address;
    UniqueFd listening;
    InHost(net->get(), 0, [&] {
      auto l = ListenEphemeral(host, 8);
      ASSERT_TRUE(l.ok()) << l.status();
      listening = std::move(l->first);
      address = l->second;
    });
    ASSERT_FALSE(address.empty());
    EXPECT_EQ(ParseHostPort(address)->host, host);
    EXPECT_TRUE(ConnectFromHost1(net->get(), address, absl::Seconds(5)).ok());
    ASSERT_TRUE((*net)->Partition(0).ok());
    const absl::Status cut = ConnectFromHost1(net->get(), address, absl::Milliseconds(500));
    EXPECT_EQ(cut.code(), absl::StatusCode::kDeadlineExceeded) << cut;
    ASSERT_TRUE((*net)->Heal(0).ok());
    EXPECT_TRUE(ConnectFromHost1(net->get(), address, absl::Seconds(5)).ok());
  }
  for (const std::string& ns : names) EXPECT_TRUE(Exists(ns)) << ns;
  net->reset();
  for (const std::string& ns : names) EXPECT_FALSE(Exists(ns)) << ns;
}

}  // namespace
}  // namespace testing
}  // namespace lockstep
