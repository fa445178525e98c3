// The NCCL communicator's host-side logic against FakeNcclApi: no GPU, no NCCL.
#include "collectives/nccl/nccl_communicator.h"

#include <thread>

#include "collectives/nccl/fake_nccl_fixture.h"
#include "collectives/transport/peer_failure.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::collectives::nccl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class NcclCommunicatorTest : public FakeNcclFixture {
 protected:
  std::unique_ptr<NcclCommunicator> MustCreate() {
    auto c = NcclCommunicator::Create(Options());
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }
};

TEST_F(NcclCommunicatorTest, InitWaitsForNcclThenRunsEveryCollectiveAndDtype) {
  api_.set_init_polls(5);
  api_.set_op_polls(3);
  std::unique_ptr<NcclCommunicator> c = MustCreate();
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(api_.init_ids().size(), 1u);
  EXPECT_EQ(api_.init_ids()[0].size(), kNcclUniqueIdBytes);
  float in[3] = {1, 2, 3}, out[3] = {0, 0, 0};
  ASSERT_TRUE(c->AllReduce(in, out, 3, DType::kF32, ReduceOp::kSum, Later()).ok());
  EXPECT_THAT(out, ElementsAre(1, 2, 3));
  uint16_t half[2] = {0x3c00, 0x4000};
  EXPECT_TRUE(c->AllReduce(half, half, 2, DType::kF16, ReduceOp::kMean, Later()).ok());
  EXPECT_TRUE(c->AllReduce(half, half, 2, DType::kBF16, ReduceOp::kMax, Later()).ok());
  EXPECT_TRUE(c->Broadcast(in, 3, DType::kF32, 3, Later()).ok());
  EXPECT_TRUE(c->AllGather(in, out, 3, DType::kF32, Later()).ok());
  EXPECT_TRUE(c->ReduceScatter(in, out, 3, DType::kF32, ReduceOp::kMin, Later()).ok());
  EXPECT_TRUE(c->Barrier(Later()).ok());
  EXPECT_THAT(api_.calls(),
              ElementsAre("all-reduce f32", "all-reduce f16", "all-reduce bf16", "broadcast f32",
                          "all-gather f32", "reduce-scatter f32", "all-reduce i32"));
  c.reset();
  EXPECT_EQ(api_.destroys(), 1);
  EXPECT_EQ(api_.aborts(), 0);
}

TEST_F(NcclCommunicatorTest, InitPastItsDeadlineAborts) {
  api_.set_init_polls(-1);
  NcclCommunicatorOptions o = Options();
  o.init_deadline = absl::Now() + absl::Milliseconds(20);
  absl::Status s = NcclCommunicator::Create(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank 0 of 4: NCCL init did not finish"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("communication.timeout_ms"));
  EXPECT_EQ(api_.aborts(), 1);
}

TEST_F(NcclCommunicatorTest, PeerLostDuringInitAborts) {
  api_.set_init_polls(-1);
  signal_->PeerLost(2, "heartbeats stopped");
  absl::Status s = NcclCommunicator::Create(Options()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(FailedRank(s), 2);
  EXPECT_EQ(api_.aborts(), 1);
}

TEST_F(NcclCommunicatorTest, PeerLostDuringACollectiveAbortsItAndNamesTheRank) {
  std::unique_ptr<NcclCommunicator> c = MustCreate();
  ASSERT_NE(c, nullptr);
  api_.set_op_polls(-1);  // a peer died: NCCL would wait forever
  float x[2] = {1, 2};
  std::thread notice([&] {
    api_.WaitForCalls(1);
    signal_->PeerLost(3, "lockstepd on host-3 stopped heartbeating");
  });
  absl::Status s = c->AllReduce(x, x, 2, DType::kF32, ReduceOp::kSum, Later());
  notice.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(FailedRank(s), 3);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("rank 0: NCCL all-reduce aborted: rank 3 was lost (lockstepd on host-3"));
  EXPECT_EQ(api_.aborts(), 1);
  // Failed: the same error at once, nothing enqueued, no second abort.
  EXPECT_EQ(c->Barrier(Later()), s);
  EXPECT_EQ(api_.calls().size(), 1u);
  c.reset();
  EXPECT_EQ(api_.aborts(), 1);
  EXPECT_EQ(api_.destroys(), 0);
}

TEST_F(NcclCommunicatorTest, CollectivePastItsDeadlineAborts) {
  std::unique_ptr<NcclCommunicator> c = MustCreate();
  ASSERT_NE(c, nullptr);
  api_.set_op_polls(-1);
  absl::Status s = c->Barrier(absl::Now() + absl::Milliseconds(20));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()), HasSubstr("NCCL barrier did not finish by its deadline"));
  EXPECT_EQ(api_.aborts(), 1);
}

TEST_F(NcclCommunicatorTest, AsyncErrorFailsTheCommunicator) {
  std::unique_ptr<NcclCommunicator> c = MustCreate();
  ASSERT_NE(c, nullptr);
  api_.set_op_polls(-1);
  api_.InjectAsyncError(absl::UnavailableError("ncclRemoteError: a peer closed its connection"));
  absl::Status s = c->Barrier(Later());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank 0: NCCL barrier: ncclRemoteError"));
  EXPECT_EQ(api_.aborts(), 1);
}

TEST_F(NcclCommunicatorTest, AbortEndsAWaitingCollective) {
  std::unique_ptr<NcclCommunicator> c = MustCreate();
  ASSERT_NE(c, nullptr);
  api_.set_op_polls(-1);
  std::thread aborter([&] {
    api_.WaitForCalls(1);
    c->Abort();
  });
  absl::Status s = c->Barrier(Later());
  aborter.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(api_.aborts(), 1);
}

TEST_F(NcclCommunicatorTest, BadArgumentsLeaveTheCommunicatorUsable) {
  std::unique_ptr<NcclCommunicator> c = MustCreate();
  ASSERT_NE(c, nullptr);
  float x = 1;
  absl::Status root = c->Broadcast(&x, 1, DType::kF32, 4, Later());
  EXPECT_EQ(root.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(root.message()), HasSubstr("root 4 is outside a group of 4"));
  absl::Status null = c->AllReduce(nullptr, &x, 1, DType::kF32, ReduceOp::kSum, Later());
  EXPECT_EQ(null.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(c->AllReduce(nullptr, nullptr, 0, DType::kF32, ReduceOp::kSum, Later()).ok());
  EXPECT_TRUE(c->Barrier(Later()).ok());
  EXPECT_EQ(api_.aborts(), 0);
}

TEST_F(NcclCommunicatorTest, RefusesBadOptions) {
  NcclCommunicatorOptions o = Options();
  o.rank = 4;
  EXPECT_EQ(NcclCommunicator::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options();
  o.api = nullptr;
  EXPECT_EQ(NcclCommunicator::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep::collectives::nccl
