#include "collectives/transport/tcp/handshake_acceptor.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

const HandshakeIdentity kAcceptor{"secret", "jobs/j/1", 0, 3};

HandshakeIdentity Connector(int rank) { return {"secret", "jobs/j/1", rank, 3}; }

absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

class HandshakeAcceptorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto listened = ListenEphemeral("127.0.0.1", 64);
    ASSERT_TRUE(listened.ok()) << listened.status();
    listen_fd_ = std::move(listened->first);
    address_ = listened->second;
  }
  // Connects as `me` and runs the connector's side of the handshake.
  absl::Status Prove(const HandshakeIdentity& me) {
    auto fd = ConnectWithRetry(address_, Soon());
    if (!fd.ok()) return fd.status();
    return HandshakeAsConnector(fd->get(), me, 0, Soon()).status();
  }

  UniqueFd listen_fd_;
  std::string address_;
};

TEST_F(HandshakeAcceptorTest, ProvenPeersAreHandedOverWithTheirRanks) {
  std::vector<std::thread> peers;
  std::vector<absl::Status> proved(3);
  for (int r = 1; r <= 2; ++r) peers.emplace_back([&, r] { proved[r] = Prove(Connector(r)); });
  std::vector<int> ranks;
  const absl::Status s = AcceptHandshakes(listen_fd_.get(), kAcceptor, {}, 2, Soon(),
                                          [&](UniqueFd& fd, const AcceptedPeer& peer) {
                                            EXPECT_GE(fd.get(), 0);
                                            ranks.push_back(peer.rank);
                                            UniqueFd taken = std::move(fd);
                                            return absl::StatusOr<bool>(true);
                                          });
  for (std::thread& t : peers) t.join();
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(proved[1].ok()) << proved[1];
  EXPECT_TRUE(proved[2].ok()) << proved[2];
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(ranks, (std::vector<int>{1, 2}));
}

TEST_F(HandshakeAcceptorTest, AWrongSecretIsNeverHandedOverAndAnErrorStopsAccepting) {
  std::thread impostor([&] {
    const absl::Status refused = Prove({"wrong", "jobs/j/1", 1, 3});
    EXPECT_EQ(refused.code(), absl::StatusCode::kUnauthenticated) << refused;
    (void)Prove(Connector(2));
  });
  const absl::Status s =
      AcceptHandshakes(listen_fd_.get(), kAcceptor, {}, 2, Soon(),
                       [&](UniqueFd&, const AcceptedPeer& peer) -> absl::StatusOr<bool> {
                         EXPECT_EQ(peer.rank, 2) << "only the real rank 2 proves itself";
                         return absl::InternalError("the caller gives up");
                       });
  impostor.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
}

TEST_F(HandshakeAcceptorTest, AtTheCapTheOldestPendingConnectionMakesWayForANewOne) {
  HandshakeAcceptorOptions options;
  options.max_pending = 1;
  options.handshake_timeout = absl::Seconds(30);  // only eviction can end the silent one
  auto silent = ConnectWithRetry(address_, Soon());
  ASSERT_TRUE(silent.ok());
  absl::Status proved;
  std::thread peer([&] {
    // After the silent connection was accepted (it got its hello).
    pollfd p{silent->get(), POLLIN, 0};
    ASSERT_EQ(poll(&p, 1, 10000), 1);
    proved = Prove(Connector(1));
  });
  const absl::Status s =
      AcceptHandshakes(listen_fd_.get(), kAcceptor, options, 1, Soon(),
                       [](UniqueFd&, const AcceptedPeer&) { return absl::StatusOr<bool>(true); });
  peer.join();
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(proved.ok()) << proved;
  // The silent connection was closed: its hello, then the end of the stream.
  char buf[128];
  EXPECT_EQ(recv(silent->get(), buf, sizeof(buf), 0), static_cast<ssize_t>(kHelloBytes));
  EXPECT_EQ(recv(silent->get(), buf, sizeof(buf), 0), 0);
}

TEST_F(HandshakeAcceptorTest, NobodyComingEndsAtTheDeadlineAndABadCapIsRefused) {
  const absl::Time start = absl::Now();
  const absl::Status s =
      AcceptHandshakes(listen_fd_.get(), kAcceptor, {}, 1, absl::Now() + absl::Milliseconds(200),
                       [](UniqueFd&, const AcceptedPeer&) { return absl::StatusOr<bool>(true); });
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  HandshakeAcceptorOptions none;
  none.max_pending = 0;
  EXPECT_EQ(
      AcceptHandshakes(listen_fd_.get(), kAcceptor, none, 1, Soon(),
                       [](UniqueFd&, const AcceptedPeer&) { return absl::StatusOr<bool>(true); })
          .code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep
