// Several GPUs of one worker against FakeNcclApi: group calls around every GPU's call. Two
// workers of two GPUs each (4 ranks, one FakeNcclApi per worker over one FakeNcclWorld) check
// what the ranks compute together and how a worker's abort reaches the other.
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
  // This worker's GPUs, through api_, in a group of `size` ranks.
  absl::StatusOr<std::unique_ptr<NcclLocalGroup>> Create(std::vector<LocalGpu> gpus, int size = 2) {
    return NcclLocalGroup::Create(Options(0, size), std::move(gpus));
  }
  // Two workers of one group of four: ranks 0 and 1 through api_ (first), ranks 2 and 3
  // through other_api_ (second), created concurrently.
  void CreateTwoWorkers() {
    std::thread second([&] {
      NcclCommunicatorOptions o = Options(0, 4);
      o.api = &other_api_;
      o.signal = other_signal_;
      second_ = NcclLocalGroup::Create(o, {{2, 0, nullptr}, {3, 1, nullptr}});
    });
    first_ = Create({{0, 0, nullptr}, {1, 1, nullptr}}, 4);
    second.join();
    ASSERT_TRUE(first_.ok()) << first_.status();
    ASSERT_TRUE(second_.ok()) << second_.status();
  }

  FakeNcclApi other_api_{&world_};
  std::shared_ptr<AbortSignal> other_signal_ = std::make_shared<AbortSignal>();
  absl::StatusOr<std::unique_ptr<NcclLocalGroup>> first_, second_;
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
  EXPECT_THAT(ra, ElementsAre(4, 6));
  EXPECT_THAT(rb, ElementsAre(4, 6));
  uint16_t ha[2] = {0x3f80, 0x4000}, hb[2] = {0x4040, 0x4080};  // bf16 1, 2 and 3, 4
  void* bufs[] = {ha, hb};
  ASSERT_TRUE((*group)->Broadcast(bufs, 2, DType::kBF16, 1, Later()).ok());
  EXPECT_THAT(ha, ElementsAre(0x4040, 0x4080));
  EXPECT_THAT(api_.calls(),
              ElementsAre("group-start", "device 0", "device 1", "group-end", "device 0",
                          "device 1", "group-start", "all-reduce f32 sum count 2 rank 0 of 2",
                          "all-reduce f32 sum count 2 rank 1 of 2", "group-end", "group-start",
                          "broadcast bf16 root 1 count 2 rank 0 of 2",
                          "broadcast bf16 root 1 count 2 rank 1 of 2", "group-end"));
}

TEST_F(NcclLocalGroupTest, ThisWorkerWithoutRankZeroReadsTheId) {
  CreateTwoWorkers();
  ASSERT_EQ(api_.init_ids().size(), 2u);
  ASSERT_EQ(other_api_.init_ids().size(), 2u);
  for (const std::string& id : other_api_.init_ids()) EXPECT_EQ(id, api_.init_ids()[0]);
  EXPECT_EQ(api_.init_ids()[1], api_.init_ids()[0]);
}

// Two workers, four ranks: sum and max differ, and so do roots 3 and 0.
TEST_F(NcclLocalGroupTest, TwoWorkersReduceAndBroadcastAcrossFourRanks) {
  CreateTwoWorkers();
  NcclLocalGroup* workers[] = {first_->get(), second_->get()};
  OnRanks(2, [&](int w) {
    // Rank 2w + g holds {rank + 1, 10 (rank + 1)}.
    float x[2][2], out[2][2];
    for (int g = 0; g < 2; ++g) {
      const float v = 2 * w + g + 1;
      x[g][0] = v;
      x[g][1] = 10 * v;
    }
    const void* send[] = {x[0], x[1]};
    void* recv[] = {out[0], out[1]};
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMean}) {
      absl::Status s = workers[w]->AllReduce(send, recv, 2, DType::kF32, op, Later());
      ASSERT_TRUE(s.ok()) << s;
      const float want = op == ReduceOp::kSum ? 10 : op == ReduceOp::kMax ? 4 : 2.5;
      for (int g = 0; g < 2; ++g) {
        EXPECT_THAT(out[g], ElementsAre(want, 10 * want))
            << "worker " << w << " gpu " << g << " " << ReduceOpName(op);
      }
    }
    for (int root : {3, 0}) {
      int32_t b[2][1] = {{100 * (2 * w) + root}, {100 * (2 * w + 1) + root}};
      void* bufs[] = {b[0], b[1]};
      absl::Status s = workers[w]->Broadcast(bufs, 1, DType::kI32, root, Later());
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_EQ(b[0][0], 101 * root) << "worker " << w << " root " << root;
      EXPECT_EQ(b[1][0], 101 * root) << "worker " << w << " root " << root;
    }
  });
  EXPECT_THAT(other_api_.calls(), testing::Contains("all-reduce f32 max count 2 rank 3 of 4"));
  EXPECT_THAT(other_api_.calls(), testing::Contains("broadcast i32 root 3 count 1 rank 2 of 4"));
}

// The second worker aborts (it was told to stop) while the first waits for it in an
// all-reduce: the first worker's GPUs fail with the abort's error, not at their deadline.
TEST_F(NcclLocalGroupTest, AnotherWorkersAbortEndsThisWorkersCollective) {
  CreateTwoWorkers();
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  float a = 1, b = 2;
  const void* send[] = {&a, &b};
  void* recv[] = {&a, &b};
  std::thread second([&] {
    // After the first worker's group-start, two enqueues and group-end (and init's 6 calls).
    if (!api_.WaitForCalls(10, deadline)) return;
    (*second_)->Abort();
    float c = 3, d = 4;
    const void* s2[] = {&c, &d};
    void* r2[] = {&c, &d};
    EXPECT_EQ((*second_)->AllReduce(s2, r2, 1, DType::kF32, ReduceOp::kSum, deadline).code(),
              absl::StatusCode::kAborted);
  });
  absl::Status s = (*first_)->AllReduce(send, recv, 1, DType::kF32, ReduceOp::kSum, deadline);
  second.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("of 4 aborted its communicator"));
  EXPECT_LT(absl::Now(), deadline);
  EXPECT_EQ(api_.aborts(), 2);
  EXPECT_EQ(other_api_.aborts(), 2);
}

TEST_F(NcclLocalGroupTest, PeerLossFailsEveryLocalGpu) {
  CreateTwoWorkers();
  float a = 1, b = 2;
  const void* send[] = {&a, &b};
  void* recv[] = {&a, &b};
  std::thread notice([&] {
    // Init's 6 calls, then group-start, the two enqueues and group-end.
    if (api_.WaitForCalls(10, Later())) signal_->PeerLost(3, "heartbeats stopped");
  });
  // The second worker never enters: rank 3 was lost.
  absl::Status s = (*first_)->AllReduce(send, recv, 1, DType::kF32, ReduceOp::kSum, Later());
  notice.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(FailedRank(s), 3);
  EXPECT_EQ((*first_)->at(1).Barrier(Later()).code(), absl::StatusCode::kUnavailable);
}

TEST_F(NcclLocalGroupTest, InitPastItsDeadlineAbortsEveryGpu) {
  NcclCommunicatorOptions o = Options(0, 4);  // ranks 2 and 3 never join
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
  absl::Status root = (*group)->Broadcast(bufs, 1, DType::kF32, 2, Later());
  EXPECT_EQ(root.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(root.message()), HasSubstr("root 2 is outside a group of 2"));
}

}  // namespace
}  // namespace lockstep::collectives::nccl
