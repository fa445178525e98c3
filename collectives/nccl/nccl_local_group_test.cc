// Several GPUs of one worker against FakeNcclApi: group calls around every GPU's call.
#include "collectives/nccl/nccl_local_group.h"

#include <thread>

#include "collectives/nccl/fake_nccl_fixture.h"
#include "collectives/transport/peer_failure.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::collectives::nccl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class NcclLocalGroupTest : public FakeNcclFixture {
 protected:
  absl::StatusOr<std::unique_ptr<NcclLocalGroup>> Create(std::vector<LocalGpu> gpus) {
    return NcclLocalGroup::Create(Options(), std::move(gpus));
  }
};

TEST_F(NcclLocalGroupTest, InitsAndRunsEveryGpuInOneGroup) {
  api_.set_init_polls(2);
  auto group = Create({{0, 0, nullptr}, {1, 1, nullptr}});
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ((*group)->local_size(), 2u);
  ASSERT_EQ(api_.init_ids().size(), 2u);
  EXPECT_EQ(api_.init_ids()[0], api_.init_ids()[1]);  // one id for the whole group
  float a[2] = {1, 2}, b[2] = {3, 4}, ra[2], rb[2];
  const void* send[] = {a, b};
  void* recv[] = {ra, rb};
  ASSERT_TRUE((*group)->AllReduce(send, recv, 2, DType::kF32, ReduceOp::kSum, Later()).ok());
  EXPECT_THAT(ra, ElementsAre(1, 2));  // the fake copies; NCCL sums
  EXPECT_THAT(rb, ElementsAre(3, 4));
  void* bufs[] = {a, b};
  ASSERT_TRUE((*group)->Broadcast(bufs, 2, DType::kBF16, 3, Later()).ok());
  EXPECT_THAT(api_.calls(), ElementsAre("group-start", "device 0", "device 1", "group-end",
                                        "device 0", "device 1", "group-start", "all-reduce f32",
                                        "all-reduce f32", "group-end", "group-start",
                                        "broadcast bf16", "broadcast bf16", "group-end"));
}

TEST_F(NcclLocalGroupTest, ThisWorkerWithoutRankZeroReadsTheId) {
  absl::StatusOr<std::unique_ptr<NcclLocalGroup>> group;
  std::thread second([&] { group = Create({{2, 0, nullptr}, {3, 1, nullptr}}); });
  auto first = Create({{0, 0, nullptr}, {1, 1, nullptr}});
  second.join();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_EQ(api_.init_ids().size(), 4u);
  for (const std::string& id : api_.init_ids()) EXPECT_EQ(id, api_.init_ids()[0]);
}

TEST_F(NcclLocalGroupTest, PeerLossFailsEveryLocalGpu) {
  auto group = Create({{0, 0, nullptr}, {1, 1, nullptr}});
  ASSERT_TRUE(group.ok()) << group.status();
  api_.set_op_polls(-1);
  float a = 1, b = 2;
  const void* send[] = {&a, &b};
  void* recv[] = {&a, &b};
  std::thread notice([&] {
    api_.WaitForCalls(8);  // init's 4, then group-start and the two enqueues and group-end
    signal_->PeerLost(3, "heartbeats stopped");
  });
  absl::Status s = (*group)->AllReduce(send, recv, 1, DType::kF32, ReduceOp::kSum, Later());
  notice.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(FailedRank(s), 3);
  EXPECT_EQ(api_.aborts(), 2);
  EXPECT_EQ((*group)->at(1).Barrier(Later()).code(), absl::StatusCode::kUnavailable);
}

TEST_F(NcclLocalGroupTest, InitPastItsDeadlineAbortsEveryGpu) {
  api_.set_init_polls(-1);
  NcclCommunicatorOptions o = Options();
  o.init_deadline = absl::Now() + absl::Milliseconds(20);
  absl::Status s = NcclLocalGroup::Create(o, {{0, 0, nullptr}, {1, 1, nullptr}}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()), HasSubstr("NCCL init did not finish"));
  EXPECT_EQ(api_.aborts(), 2);
}

TEST_F(NcclLocalGroupTest, RefusesBadGpuListsAndBufferCounts) {
  EXPECT_EQ(Create({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(Create({{1, 0, nullptr}, {1, 1, nullptr}}).status().message()),
              HasSubstr("rank 1 is given to two GPUs"));
  auto group = Create({{0, 0, nullptr}, {1, 1, nullptr}});
  ASSERT_TRUE(group.ok()) << group.status();
  float a = 1;
  const void* send[] = {&a};
  void* recv[] = {&a};
  EXPECT_EQ((*group)->AllReduce(send, recv, 1, DType::kF32, ReduceOp::kSum, Later()).code(),
            absl::StatusCode::kInvalidArgument);
  void* bufs[] = {&a, &a};
  EXPECT_EQ((*group)->Broadcast(bufs, 1, DType::kF32, 4, Later()).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep::collectives::nccl
