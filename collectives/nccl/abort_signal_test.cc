#include "collectives/nccl/abort_signal.h"

#include "collectives/transport/peer_failure.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::collectives::nccl {
namespace {

using ::testing::HasSubstr;

TEST(AbortSignalTest, QuietUntilSignalled) {
  AbortSignal signal;
  EXPECT_TRUE(signal.Check(0, "all-reduce").ok());
}

TEST(AbortSignalTest, FirstPeerLossWins) {
  AbortSignal signal;
  signal.PeerLost(2, "heartbeats stopped");
  signal.PeerLost(1, "later news");
  signal.Abort();
  absl::Status s = signal.Check(0, "broadcast");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(FailedRank(s), 2);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("rank 0: NCCL broadcast aborted: rank 2 was lost (heartbeats stopped)"));
}

TEST(AbortSignalTest, AbortWithoutALostPeer) {
  AbortSignal signal;
  signal.Abort();
  absl::Status s = signal.Check(1, "init");
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_FALSE(FailedRank(s).has_value());
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank 1: NCCL init aborted"));
}

}  // namespace
}  // namespace lockstep::collectives::nccl
