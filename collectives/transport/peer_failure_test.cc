#include "collectives/transport/peer_failure.h"

#include "common/status.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

TEST(PeerFailureTest, RecordsTheRankAndIsUnavailable) {
  absl::Status s = PeerFailure(3, "rank 0: peer rank 3 died");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "rank 0: peer rank 3 died");
  ASSERT_TRUE(FailedRank(s).has_value());
  EXPECT_EQ(*FailedRank(s), 3);
  EXPECT_EQ(FailedRank(PeerFailure(0, "x")), 0);
}

TEST(PeerFailureTest, ARelayedFailureNamesTheRankItStartedAt) {
  absl::Status s = RelayedPeerFailure(1, 3, 2, "receiving from");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(FailedRank(s), 2);
  EXPECT_EQ(s.message(),
            "rank 1: peer rank 3 left the group after peer rank 2 failed (seen while receiving "
            "from rank 3); check rank 2's logs");
}

TEST(PeerFailureTest, SurvivesAnnotation) {
  absl::Status s = Annotate(Annotate(PeerFailure(7, "peer gone"), "ring all-reduce"), "rank 2");
  EXPECT_EQ(FailedRank(s), 7);
}

TEST(PeerFailureTest, OtherStatusesRecordNoRank) {
  EXPECT_FALSE(FailedRank(absl::OkStatus()).has_value());
  EXPECT_FALSE(FailedRank(absl::UnavailableError("peer gone")).has_value());
  EXPECT_FALSE(FailedRank(absl::DeadlineExceededError("late")).has_value());
  EXPECT_FALSE(FailedRank(PeerFailure(-1, "no rank")).has_value());
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep
