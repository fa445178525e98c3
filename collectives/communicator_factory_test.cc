#include "collectives/communicator_factory.h"

#include "absl/time/clock.h"
#include "collectives/in_memory_store.h"
#include "collectives/test_util.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

TEST(CommunicatorFactoryTest, AutoOnOneHostWorks) {
  // Every rank reports this host, so kAuto picks shared memory; the group all-reduces.
  auto group = MakeGroup(TransportKind::kAuto, 3);
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<double> out(3);
  RunRanks(3, [&](int r) {
    double x = r + 1;
    ASSERT_TRUE((*group)[r]
                    ->AllReduce(&x, &out[r], 1, DType::kF64, ReduceOp::kSum,
                                absl::Now() + absl::Seconds(10))
                    .ok());
  });
  EXPECT_EQ(out, (std::vector<double>{6, 6, 6}));
}

TEST(CommunicatorFactoryTest, RejectsBadConfigurations) {
  InMemoryStore store;
  CommunicatorConfig config;
  config.world_size = 2;
  config.rank = 2;
  EXPECT_EQ(CreateCommunicator(config, &store).status().code(), absl::StatusCode::kInvalidArgument);
  config.rank = 0;
  config.transport = TransportKind::kTcp;  // no secret
  EXPECT_EQ(CreateCommunicator(config, &store).status().code(), absl::StatusCode::kInvalidArgument);
  config.transport = TransportKind::kInProc;  // no hub
  EXPECT_EQ(CreateCommunicator(config, &store).status().code(), absl::StatusCode::kInvalidArgument);
  config.transport = TransportKind::kShm;
  EXPECT_EQ(CreateCommunicator(config, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CommunicatorFactoryTest, MissingPeerIsDeadlineExceededNamingTheKey) {
  InMemoryStore store;
  CommunicatorConfig config;
  config.world_size = 2;
  config.transport = TransportKind::kShm;
  config.key_prefix = UniquePrefix();
  config.connect_timeout = absl::Milliseconds(50);
  auto comm = CreateCommunicator(config, &store);
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded) << comm.status();
  EXPECT_NE(comm.status().message().find("rank 0 of 2"), absl::string_view::npos) << comm.status();
}

class AbortTest : public ::testing::TestWithParam<TransportKind> {};

TEST_P(AbortTest, AbortEndsAPendingCallWithin100msOnEveryTransport) {
  auto group = MakeGroup(GetParam(), 2);
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<float> x(1 << 10, 1.0f);
  // Rank 1 never joins, so rank 0's call blocks until Abort(). It only receives (a broadcast
  // from rank 1): had it sent its vector before the Abort, rank 1 could still complete an
  // all-reduce with those bytes, which would make the check below racy.
  Handle h = (*group)[0]->BroadcastAsync(x.data(), x.size(), DType::kF32, /*root=*/1,
                                         absl::Now() + absl::Seconds(60));
  const absl::Time start = absl::Now();
  (*group)[0]->Abort();
  absl::Status s = h->Wait();
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(100));
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  // The peer learns promptly that rank 0 left.
  const absl::Time peer_start = absl::Now();
  absl::Status peer = (*group)[1]->AllReduce(x.data(), x.data(), x.size(), DType::kF32,
                                             ReduceOp::kSum, absl::Now() + absl::Seconds(30));
  EXPECT_EQ(peer.code(), absl::StatusCode::kUnavailable) << peer;
  EXPECT_LT(absl::Now() - peer_start, absl::Seconds(2));
}

INSTANTIATE_TEST_SUITE_P(Transports, AbortTest,
                         ::testing::Values(TransportKind::kInProc, TransportKind::kTcp,
                                           TransportKind::kShm),
                         [](const auto& info) { return TransportKindName(info.param); });

}  // namespace
}  // namespace collectives
}  // namespace lockstep
