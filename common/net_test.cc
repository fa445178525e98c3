#include "common/net.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

TEST(NetTest, ParsesHostPort) {
  auto a = ParseHostPort("10.0.0.1:2222");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "10.0.0.1");
  EXPECT_EQ(a->port, 2222);
  auto b = ParseHostPort("[::1]:7000");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->ToString(), "[::1]:7000");
  // A bare IPv6 address cannot carry a port; port 0 is no port to dial.
  for (const char* bad : {"::1:7000", "h:0"}) {
    absl::Status s = ParseHostPort(bad).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad << ": " << s;
    EXPECT_NE(s.message().find(absl::StrCat("\"", bad, "\"")), absl::string_view::npos) << s;
  }
  EXPECT_NE(ParseHostPort("h:0").status().message().find("port must be a number in 1..65535"),
            absl::string_view::npos);
}

TEST(NetTest, ParsesListenAddressesWithPortZero) {
  absl::StatusOr<HostPort> any = ParseListenAddress("127.0.0.1:0", "--metrics_address");
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_EQ(any->host, "127.0.0.1");
  EXPECT_EQ(any->port, 0);
  EXPECT_EQ(ParseListenAddress("[::]:9400", "--health_address")->host, "::");
  for (const char* bad :
       {"127.0.0.1", "127.0.0.1:", "host:-1", "host:65536", ":9400", "::1:9400"}) {
    absl::StatusOr<HostPort> p = ParseListenAddress(bad, "--metrics_address");
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(p.status().message().find("--metrics_address"), absl::string_view::npos) << bad;
  }
}

TEST(NetTest, PortFileRoundTrips) {
  std::string path = absl::StrCat(getenv("TEST_TMPDIR"), "/port_roundtrip");
  ASSERT_TRUE(WritePortFile(path, 4321).ok());
  auto port = WaitForPortFile(path, absl::Now() + absl::Seconds(1));
  ASSERT_TRUE(port.ok());
  EXPECT_EQ(*port, 4321);
}

TEST(NetTest, WaitForMissingPortFileTimesOut) {
  FakeClock clock;
  std::string path = absl::StrCat(getenv("TEST_TMPDIR"), "/never_written");
  // With a fake clock at the deadline already, the wait answers at once.
  auto port = WaitForPortFile(path, clock.Now(), &clock);
  EXPECT_TRUE(absl::IsDeadlineExceeded(port.status()));
  EXPECT_NE(port.status().message().find("never_written"), absl::string_view::npos);
}

TEST(NetTest, ReservedPortHoldsAPort) {
  auto p = ReservedPort::Create("127.0.0.1", 0);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_GT((*p)->port(), 0);
  // A second listener on the same port fails while the first holds it.
  auto q = ReservedPort::Create("127.0.0.1", (*p)->port());
  EXPECT_EQ(q.status().code(), absl::StatusCode::kUnavailable) << q.status();
  EXPECT_NE(q.status().message().find(absl::StrCat("cannot listen on 127.0.0.1:", (*p)->port())),
            absl::string_view::npos)
      << q.status();
}

}  // namespace
}  // namespace lockstep
