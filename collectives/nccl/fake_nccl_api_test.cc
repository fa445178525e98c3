// FakeNcclApi and FakeNcclWorld themselves: ranks that really exchange data, NCCL's argument
// checks, group calls, disagreeing ranks and abort. The ranks here are communicators driven
// from the test's thread (the fake's calls never block).
#include "collectives/nccl/fake_nccl_api.h"

#include <thread>

#include "collectives/nccl/fake_nccl_world.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::collectives::nccl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class FakeNcclApiTest : public ::testing::Test {
 protected:
  // n communicators of one group, rank r through apis_[r].
  std::vector<NcclComm> Join(int n) {
    apis_.clear();
    const std::string id = world_.NewUniqueId();
    std::vector<NcclComm> comms;
    for (int r = 0; r < n; ++r) {
      apis_.push_back(std::make_unique<FakeNcclApi>(&world_));
      absl::StatusOr<NcclComm> c = apis_[r]->CommInitRank(n, id, r);
      EXPECT_TRUE(c.ok()) << c.status();
      comms.push_back(c.ok() ? *c : nullptr);
    }
    return comms;
  }
  // AsyncState of rank r until it is not in progress, or 10 s (then DEADLINE_EXCEEDED).
  absl::StatusOr<NcclProgress> Settle(int r, NcclComm comm) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      absl::StatusOr<NcclProgress> p = apis_[r]->AsyncState(comm);
      if (!p.ok() || *p == NcclProgress::kDone) return p;
      std::this_thread::yield();
    }
    return absl::DeadlineExceededError("still in progress after 10 s");
  }

  FakeNcclWorld world_;
  std::vector<std::unique_ptr<FakeNcclApi>> apis_;
};

TEST_F(FakeNcclApiTest, InitIsDoneOnceEveryRankJoined) {
  FakeNcclApi a(&world_), b(&world_);
  const std::string id = world_.NewUniqueId();
  EXPECT_NE(id, world_.NewUniqueId());
  absl::StatusOr<NcclComm> c0 = a.CommInitRank(2, id, 0);
  ASSERT_TRUE(c0.ok()) << c0.status();
  EXPECT_EQ(*a.AsyncState(*c0), NcclProgress::kInProgress);
  EXPECT_EQ(b.CommInitRank(3, id, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(b.CommInitRank(2, id, 0).status().message()), HasSubstr("joined twice"));
  EXPECT_EQ(b.CommInitRank(2, id, 2).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<NcclComm> c1 = b.CommInitRank(2, id, 1);
  ASSERT_TRUE(c1.ok()) << c1.status();
  EXPECT_EQ(*a.AsyncState(*c0), NcclProgress::kDone);
  EXPECT_EQ(*b.AsyncState(*c1), NcclProgress::kDone);
}

TEST_F(FakeNcclApiTest, AllReduceWaitsForEveryRankThenReducesInRankOrder) {
  std::vector<NcclComm> c = Join(3);
  float x[3][2] = {{1, -4}, {2, 5}, {3, 0.5}}, out[3][2] = {};
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(
        apis_[r]->AllReduce(x[r], out[r], 2, DType::kF32, ReduceOp::kMax, c[r], nullptr).ok());
    if (r < 2) {
      EXPECT_EQ(*apis_[r]->AsyncState(c[r]), NcclProgress::kInProgress);
    }
  }
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(*Settle(r, c[r]), NcclProgress::kDone);
    EXPECT_THAT(out[r], ElementsAre(3, 5)) << "rank " << r;
  }
  // avg of integers: the sum divided by nranks, truncated (NCCL's SumPostDiv).
  int32_t v[3] = {1, 2, 4};
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(
        apis_[r]->AllReduce(&v[r], &v[r], 1, DType::kI32, ReduceOp::kMean, c[r], nullptr).ok());
  }
  EXPECT_THAT(v, ElementsAre(2, 2, 2));
  EXPECT_THAT(apis_[1]->calls(), ElementsAre("all-reduce f32 max count 2 rank 1 of 3",
                                             "all-reduce i32 mean count 1 rank 1 of 3"));
}

TEST_F(FakeNcclApiTest, BroadcastAllGatherAndReduceScatterPlaceByRank) {
  std::vector<NcclComm> c = Join(2);
  double b[2][2] = {{1, 2}, {3, 4}};
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(apis_[r]->Broadcast(b[r], b[r], 2, DType::kF64, 1, c[r], nullptr).ok());
  }
  EXPECT_THAT(b[0], ElementsAre(3, 4));
  int64_t g[2][1] = {{10}, {20}}, gathered[2][2] = {};
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(apis_[r]->AllGather(g[r], gathered[r], 1, DType::kI64, c[r], nullptr).ok());
  }
  EXPECT_THAT(gathered[0], ElementsAre(10, 20));
  EXPECT_THAT(gathered[1], ElementsAre(10, 20));
  int32_t s[2][4] = {{1, 2, 3, 4}, {10, 20, 30, 40}}, mine[2][2] = {};
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(
        apis_[r]->ReduceScatter(s[r], mine[r], 2, DType::kI32, ReduceOp::kSum, c[r], nullptr).ok());
  }
  EXPECT_THAT(mine[0], ElementsAre(11, 22));
  EXPECT_THAT(mine[1], ElementsAre(33, 44));
}

TEST_F(FakeNcclApiTest, RefusesARootOutsideTheGroupAndNullBuffersAtTheCall) {
  std::vector<NcclComm> c = Join(4);
  float x = 1;
  absl::Status root = apis_[0]->Broadcast(&x, &x, 1, DType::kF32, 4, c[0], nullptr);
  EXPECT_EQ(root.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(root.message()), HasSubstr("root 4 is outside the group"));
  EXPECT_EQ(apis_[0]->Broadcast(&x, &x, 1, DType::kF32, -1, c[0], nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(apis_[0]->AllReduce(nullptr, &x, 1, DType::kF32, ReduceOp::kSum, c[0], nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(apis_[0]->calls(), ElementsAre("broadcast f32 root 4 count 1 rank 0 of 4",
                                             "broadcast f32 root -1 count 1 rank 0 of 4",
                                             "all-reduce f32 sum count 1 rank 0 of 4"));
  EXPECT_EQ(*apis_[0]->AsyncState(c[0]), NcclProgress::kDone);  // refused calls were not issued
}

TEST_F(FakeNcclApiTest, RanksThatDisagreeFailTheirGroup) {
  std::vector<NcclComm> c = Join(2);
  float x[4] = {};
  ASSERT_TRUE(apis_[0]->AllReduce(x, x, 3, DType::kF32, ReduceOp::kSum, c[0], nullptr).ok());
  ASSERT_TRUE(apis_[1]->AllReduce(x, x, 4, DType::kF32, ReduceOp::kSum, c[1], nullptr).ok());
  for (int r = 0; r < 2; ++r) {
    absl::Status s = Settle(r, c[r]).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("disagree on collective #0 of their group (rank 0: all-reduce f32 sum "
                          "count 3; rank 1: all-reduce f32 sum count 4)"));
  }
  // Sum against max, and roots, disagree too.
  c = Join(2);
  ASSERT_TRUE(apis_[0]->AllReduce(x, x, 1, DType::kF32, ReduceOp::kSum, c[0], nullptr).ok());
  ASSERT_TRUE(apis_[1]->AllReduce(x, x, 1, DType::kF32, ReduceOp::kMax, c[1], nullptr).ok());
  EXPECT_EQ(Settle(0, c[0]).status().code(), absl::StatusCode::kInvalidArgument);
  c = Join(2);
  ASSERT_TRUE(apis_[0]->Broadcast(x, x, 1, DType::kF32, 0, c[0], nullptr).ok());
  ASSERT_TRUE(apis_[1]->Broadcast(x, x, 1, DType::kF32, 1, c[1], nullptr).ok());
  EXPECT_THAT(std::string(Settle(1, c[1]).status().message()), HasSubstr("root 0 count 1; rank 1"));
}

TEST_F(FakeNcclApiTest, GroupCallsHoldCollectivesUntilGroupEnd) {
  std::vector<NcclComm> c = Join(2);
  FakeNcclApi& api = *apis_[0];  // one thread driving both ranks, as NcclLocalGroup does
  float a = 1, b = 2;
  ASSERT_TRUE(api.GroupStart().ok());
  ASSERT_TRUE(api.AllReduce(&a, &a, 1, DType::kF32, ReduceOp::kSum, c[0], nullptr).ok());
  ASSERT_TRUE(api.AllReduce(&b, &b, 1, DType::kF32, ReduceOp::kSum, c[1], nullptr).ok());
  EXPECT_EQ(a, 1);  // held: nothing reached the group yet
  ASSERT_TRUE(api.GroupEnd().ok());
  EXPECT_EQ(a, 3);
  EXPECT_EQ(b, 3);
  EXPECT_EQ(api.GroupEnd().code(), absl::StatusCode::kInvalidArgument);  // no group open
}

TEST_F(FakeNcclApiTest, AbortFailsTheOtherRanksPendingAndLaterCollectives) {
  std::vector<NcclComm> c = Join(3);
  float x = 1;
  ASSERT_TRUE(apis_[1]->AllReduce(&x, &x, 1, DType::kF32, ReduceOp::kSum, c[1], nullptr).ok());
  EXPECT_EQ(*apis_[1]->AsyncState(c[1]), NcclProgress::kInProgress);
  ASSERT_TRUE(apis_[0]->CommAbort(c[0]).ok());
  absl::Status s = apis_[1]->AsyncState(c[1]).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank 0 of 3 aborted its communicator"));
  EXPECT_EQ(apis_[2]->AllReduce(&x, &x, 1, DType::kF32, ReduceOp::kSum, c[2], nullptr), s);
  // The aborted handle is freed: using it again is refused, not undefined.
  EXPECT_EQ(apis_[0]->AsyncState(c[0]).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(apis_[0]->CommAbort(c[0]).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(apis_[0]->aborts(), 2);
}

TEST_F(FakeNcclApiTest, PrivateWorldGroupOfOneCopies) {
  FakeNcclApi api;  // no world: its own
  absl::StatusOr<std::string> id = api.GetUniqueId();
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->size(), kNcclUniqueIdBytes);
  absl::StatusOr<NcclComm> c = api.CommInitRank(1, *id, 0);
  ASSERT_TRUE(c.ok()) << c.status();
  uint16_t in[2] = {0x3c00, 0x4000}, out[2] = {};
  ASSERT_TRUE(api.AllReduce(in, out, 2, DType::kF16, ReduceOp::kMean, *c, nullptr).ok());
  EXPECT_THAT(out, ElementsAre(0x3c00, 0x4000));
  EXPECT_EQ(*api.AsyncState(*c), NcclProgress::kDone);
  ASSERT_TRUE(api.CommDestroy(*c).ok());
  EXPECT_EQ(api.destroys(), 1);
}

}  // namespace
}  // namespace lockstep::collectives::nccl
