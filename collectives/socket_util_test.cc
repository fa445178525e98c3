#include "collectives/socket_util.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstring>
#include <string>

#include "absl/time/clock.h"
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

}  // namespace
}  // namespace collectives
}  // namespace lockstep
