#include "collectives/communicator_factory.h"

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "collectives/in_memory_store.h"
#include "collectives/test_util.h"
#include "collectives/transport/tcp/socket_util.h"
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

TEST(CommunicatorFactoryTest, CheckListenPortTellsAFreePortFromATakenOne) {
  EXPECT_TRUE(CheckListenPort("127.0.0.1", 0).ok());
  auto taken = ListenEphemeral("127.0.0.1", 1);
  ASSERT_TRUE(taken.ok()) << taken.status();
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(taken->second.substr(taken->second.rfind(':') + 1), &port));
  const absl::Status in_use = CheckListenPort("127.0.0.1", port);
  EXPECT_EQ(in_use.code(), absl::StatusCode::kFailedPrecondition) << in_use;
  EXPECT_NE(in_use.message().find("in use"), absl::string_view::npos) << in_use;
  taken->first = UniqueFd();  // closed: the port is free again
  EXPECT_TRUE(CheckListenPort("127.0.0.1", port).ok());
  EXPECT_EQ(CheckListenPort("127.0.0.1", 65536).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep
