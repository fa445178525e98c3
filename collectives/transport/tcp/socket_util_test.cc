#include "collectives/transport/tcp/socket_util.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstring>
#include <string>

#include "absl/time/clock.h"
#include "common/ci_skip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

std::string Congestion(int fd) {
  char name[32] = {};
  socklen_t len = sizeof(name);
  EXPECT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len), 0);
  return std::string(name, strnlen(name, sizeof(name)));
}

// TuneSocket takes the first congestion control of its list that the kernel accepts (reno is
// always built in and always allowed), and leaves the default when none is.
TEST(SocketUtilTest, TuneSocketSetsTheFirstUsableCongestionControl) {
  auto listening = ListenEphemeral("127.0.0.1", 1);
  ASSERT_TRUE(listening.ok()) << listening.status();
  auto fd = ConnectWithRetry(listening->second, absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(fd.ok()) << fd.status();
  const std::string before = Congestion(fd->get());
  EXPECT_EQ(TuneSocket(fd->get(), 0, "no-such-algorithm"), "");
  EXPECT_EQ(Congestion(fd->get()), before);
  EXPECT_EQ(TuneSocket(fd->get(), 0, "no-such-algorithm,reno"), "reno");
  EXPECT_EQ(Congestion(fd->get()), "reno");
  EXPECT_EQ(TuneSocket(fd->get(), 1 << 20, ""), "");
  EXPECT_EQ(Congestion(fd->get()), "reno");
  int nodelay = 0;
  socklen_t len = sizeof(nodelay);
  ASSERT_EQ(getsockopt(fd->get(), IPPROTO_TCP, TCP_NODELAY, &nodelay, &len), 0);
  EXPECT_NE(nodelay, 0);
}

// True when this host has an IPv6 loopback to bind (a container or kernel may have none).
bool HaveIpv6Loopback() {
  UniqueFd fd(socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_loopback;
  return fd.get() >= 0 && bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
}

// The data plane over IPv6: listening on ::1 publishes "[::1]:port", and a connection to that
// address (the bracketed form TF_CONFIG uses) reaches the listener and carries bytes both ways.
TEST(SocketUtilTest, ListensAndConnectsOverIpv6Loopback) {
  if (!HaveIpv6Loopback()) {
    LS_SKIP_OR_FAIL_UNLESS_CI("IPv6 loopback") << "this host has no IPv6 loopback (::1) to bind";
  }
  auto listening = ListenEphemeral("::1", 1);
  ASSERT_TRUE(listening.ok()) << listening.status();
  EXPECT_THAT(listening->second, ::testing::MatchesRegex("\\[::1\\]:[0-9]+"));
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  auto fd = ConnectWithRetry(listening->second, deadline);
  ASSERT_TRUE(fd.ok()) << fd.status();
  UniqueFd accepted(accept4(listening->first.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_GE(accepted.get(), 0);
  sockaddr_storage peer{};
  socklen_t len = sizeof(peer);
  ASSERT_EQ(getpeername(accepted.get(), reinterpret_cast<sockaddr*>(&peer), &len), 0);
  EXPECT_EQ(peer.ss_family, AF_INET6);
  const std::string sent = "over IPv6";
  ASSERT_TRUE(WriteFull(fd->get(), sent.data(), sent.size(), deadline).ok());
  std::string got(sent.size(), '\0');
  ASSERT_TRUE(ReadFull(accepted.get(), got.data(), got.size(), deadline).ok());
  EXPECT_EQ(got, sent);
}

// IPv4 addresses keep their plain form, and a bad address is refused naming it.
TEST(SocketUtilTest, Ipv4AddressesAndBadAddresses) {
  auto listening = ListenEphemeral("127.0.0.1", 1);
  ASSERT_TRUE(listening.ok()) << listening.status();
  EXPECT_THAT(listening->second, ::testing::MatchesRegex("127\\.0\\.0\\.1:[0-9]+"));
  auto unbracketed = ConnectWithRetry("::1:80", absl::Now() + absl::Seconds(1));
  EXPECT_EQ(unbracketed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unbracketed.status().message()), ::testing::HasSubstr("::1:80"));
  // An address this host does not have cannot be listened on; the error says which.
  auto foreign = ListenEphemeral("192.0.2.1", 1);
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(foreign.status().message()), ::testing::HasSubstr("192.0.2.1"));
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep
