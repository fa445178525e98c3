// The NCCL communicator's host-side logic against FakeNcclApi: no GPU, no NCCL. Groups of
// one check the call sequence; groups of 2 and 4 ranks (threads, each with its own fake over
// one FakeNcclWorld) check what the ranks compute together and how they fail.
#include "collectives/nccl/nccl_communicator.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "collectives/nccl/fake_nccl_fixture.h"
#include "collectives/test_values.h"
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
  EXPECT_THAT(out, ElementsAre(1, 2, 3));  // a group of one
  uint16_t half[2] = {0x3c00, 0x4000};
  EXPECT_TRUE(c->AllReduce(half, half, 2, DType::kF16, ReduceOp::kMean, Later()).ok());
  EXPECT_TRUE(c->AllReduce(half, half, 2, DType::kBF16, ReduceOp::kMax, Later()).ok());
  EXPECT_THAT(half, ElementsAre(0x3c00, 0x4000));
  EXPECT_TRUE(c->Broadcast(in, 3, DType::kF32, 0, Later()).ok());
  EXPECT_TRUE(c->AllGather(in, out, 3, DType::kF32, Later()).ok());
  EXPECT_TRUE(c->ReduceScatter(in, out, 3, DType::kF32, ReduceOp::kMin, Later()).ok());
  EXPECT_TRUE(c->Barrier(Later()).ok());
  EXPECT_THAT(api_.calls(), ElementsAre("all-reduce f32 sum count 3 rank 0 of 1",
                                        "all-reduce f16 mean count 2 rank 0 of 1",
                                        "all-reduce bf16 max count 2 rank 0 of 1",
                                        "broadcast f32 root 0 count 3 rank 0 of 1",
                                        "all-gather f32 count 3 rank 0 of 1",
                                        "reduce-scatter f32 min count 3 rank 0 of 1",
                                        "all-reduce i32 sum count 1 rank 0 of 1"));
  c.reset();
  EXPECT_EQ(api_.destroys(), 1);
  EXPECT_EQ(api_.aborts(), 0);
}

TEST_F(NcclCommunicatorTest, InitPastItsDeadlineAborts) {
  NcclCommunicatorOptions o = Options(0, 4);  // ranks 1-3 never join
  o.init_deadline = absl::Now() + absl::Milliseconds(20);
  absl::Status s = NcclCommunicator::Create(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank 0 of 4: NCCL init did not finish"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("communication.timeout_ms"));
  EXPECT_EQ(api_.aborts(), 1);
}

TEST_F(NcclCommunicatorTest, PeerLostDuringInitAborts) {
  signal_->PeerLost(2, "heartbeats stopped");
  absl::Status s = NcclCommunicator::Create(Options(0, 4)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(FailedRank(s), 2);
  EXPECT_EQ(api_.aborts(), 1);
}

TEST_F(NcclCommunicatorTest, PeerLostDuringACollectiveAbortsItAndNamesTheRank) {
  std::vector<std::unique_ptr<NcclCommunicator>> c = CreateRanks(2);
  ASSERT_NE(c[0], nullptr);
  ASSERT_NE(c[1], nullptr);
  FakeNcclApi& api = *rank_apis_[0];
  float x[2] = {1, 2};
  std::thread notice([&] {  // rank 1 never enters the all-reduce: it was lost
    if (api.WaitForCalls(1, Later())) {
      rank_signals_[0]->PeerLost(1, "lockstepd on host-1 stopped heartbeating");
    }
  });
  absl::Status s = c[0]->AllReduce(x, x, 2, DType::kF32, ReduceOp::kSum, Later());
  notice.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(FailedRank(s), 1);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("rank 0: NCCL all-reduce aborted: rank 1 was lost (lockstepd on host-1"));
  EXPECT_EQ(api.aborts(), 1);
  // Failed: the same error at once, nothing enqueued, no second abort.
  EXPECT_EQ(c[0]->Barrier(Later()), s);
  EXPECT_EQ(api.calls().size(), 1u);
  c[0].reset();
  EXPECT_EQ(api.aborts(), 1);
  EXPECT_EQ(api.destroys(), 0);
}

TEST_F(NcclCommunicatorTest, CollectivePastItsDeadlineAborts) {
  std::vector<std::unique_ptr<NcclCommunicator>> c = CreateRanks(2);
  ASSERT_NE(c[0], nullptr);
  absl::Status s = c[0]->Barrier(absl::Now() + absl::Milliseconds(20));  // rank 1 never comes
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("rank 0 of 2: NCCL barrier did not finish by its deadline"));
  EXPECT_EQ(rank_apis_[0]->aborts(), 1);
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
  std::vector<std::unique_ptr<NcclCommunicator>> c = CreateRanks(2);
  ASSERT_NE(c[0], nullptr);
  std::thread aborter([&] {
    if (rank_apis_[0]->WaitForCalls(1, Later())) c[0]->Abort();
  });
  absl::Status s = c[0]->Barrier(Later());  // rank 1 never comes
  aborter.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(rank_apis_[0]->aborts(), 1);
}

TEST_F(NcclCommunicatorTest, BadArgumentsLeaveTheCommunicatorUsable) {
  std::unique_ptr<NcclCommunicator> c = MustCreate();
  ASSERT_NE(c, nullptr);
  float x = 1;
  absl::Status root = c->Broadcast(&x, 1, DType::kF32, 1, Later());
  EXPECT_EQ(root.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(root.message()), HasSubstr("root 1 is outside a group of 1"));
  absl::Status null = c->AllReduce(nullptr, &x, 1, DType::kF32, ReduceOp::kSum, Later());
  EXPECT_EQ(null.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(c->AllReduce(nullptr, nullptr, 0, DType::kF32, ReduceOp::kSum, Later()).ok());
  EXPECT_TRUE(c->Barrier(Later()).ok());
  EXPECT_EQ(api_.aborts(), 0);
}

TEST_F(NcclCommunicatorTest, RefusesBadOptions) {
  NcclCommunicatorOptions o = Options(4, 4);
  EXPECT_EQ(NcclCommunicator::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options();
  o.api = nullptr;
  EXPECT_EQ(NcclCommunicator::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

// Groups of 2 and 4 ranks: results that a wrong op, root, count unit or rank would change.
class NcclCommunicatorRanksTest : public NcclCommunicatorTest,
                                  public ::testing::WithParamInterface<int> {};

INSTANTIATE_TEST_SUITE_P(Ranks, NcclCommunicatorRanksTest, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return absl::StrCat(p.param, "Ranks");
                         });

TEST_P(NcclCommunicatorRanksTest, AllReduceComputesEveryOpAndDtypeAcrossTheRanks) {
  const int n = GetParam();
  std::vector<std::unique_ptr<NcclCommunicator>> c = CreateRanks(n);
  for (const auto& comm : c) ASSERT_NE(comm, nullptr);
  constexpr size_t kCount = 5, kCanaries = 3;
  constexpr double kCanary = 77;
  OnRanks(n, [&](int r) {
    for (DType dt : kTestDTypes) {
      for (ReduceOp op : kTestOps) {
        // In place, with elements past `count` that must stay untouched (a count in bytes
        // would reach them).
        std::vector<char> buf((kCount + kCanaries) * DTypeSize(dt));
        FillInput(dt, buf.data(), kCount, r, op);
        for (size_t i = kCount; i < kCount + kCanaries; ++i) StoreValue(dt, buf.data(), i, kCanary);
        absl::Status s = c[r]->AllReduce(buf.data(), buf.data(), kCount, dt, op, Later());
        ASSERT_TRUE(s.ok()) << s;
        for (size_t i = 0; i < kCount; ++i) {
          const double want = Reference(n, i, op, dt);
          EXPECT_NEAR(LoadValue(dt, buf.data(), i), want, Tolerance(dt, want, n))
              << "rank " << r << " of " << n << ", " << DTypeName(dt) << " " << ReduceOpName(op)
              << ", element " << i;
        }
        for (size_t i = kCount; i < kCount + kCanaries; ++i) {
          EXPECT_EQ(LoadValue(dt, buf.data(), i), kCanary) << DTypeName(dt) << " element " << i;
        }
      }
    }
  });
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> calls = rank_apis_[r]->calls();
    ASSERT_EQ(calls.size(), std::size(kTestDTypes) * std::size(kTestOps));
    EXPECT_EQ(calls[0], absl::StrCat("all-reduce f32 sum count 5 rank ", r, " of ", n));
    EXPECT_EQ(calls[3], absl::StrCat("all-reduce f32 max count 5 rank ", r, " of ", n));
  }
}

TEST_P(NcclCommunicatorRanksTest, BroadcastGivesEveryRankTheRootsValues) {
  const int n = GetParam();
  std::vector<std::unique_ptr<NcclCommunicator>> c = CreateRanks(n);
  for (const auto& comm : c) ASSERT_NE(comm, nullptr);
  OnRanks(n, [&](int r) {
    for (int root = n - 1; root >= 0; --root) {
      int64_t buf[3] = {100 * r + 1, 100 * r + 2, 100 * r + 3};
      absl::Status s = c[r]->Broadcast(buf, 3, DType::kI64, root, Later());
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_THAT(buf, ElementsAre(100 * root + 1, 100 * root + 2, 100 * root + 3))
          << "rank " << r << ", root " << root;
    }
  });
  EXPECT_EQ(rank_apis_[1]->calls()[0],
            absl::StrCat("broadcast i64 root ", n - 1, " count 3 rank 1 of ", n));
}

TEST_P(NcclCommunicatorRanksTest, AllGatherAndReduceScatterPlaceEachRanksBlock) {
  const int n = GetParam();
  std::vector<std::unique_ptr<NcclCommunicator>> c = CreateRanks(n);
  for (const auto& comm : c) ASSERT_NE(comm, nullptr);
  OnRanks(n, [&](int r) {
    const float mine[2] = {static_cast<float>(r), r + 0.5f};
    std::vector<float> all(2 * n, -1);
    absl::Status s = c[r]->AllGather(mine, all.data(), 2, DType::kF32, Later());
    ASSERT_TRUE(s.ok()) << s;
    for (int k = 0; k < n; ++k) {
      EXPECT_EQ(all[2 * k], k) << "rank " << r;
      EXPECT_EQ(all[2 * k + 1], k + 0.5f) << "rank " << r;
    }
    // Element i of rank q's send: 100 q + i. Rank r receives block r (elements 2r, 2r+1).
    std::vector<int32_t> send(2 * n);
    for (int i = 0; i < 2 * n; ++i) send[i] = 100 * r + i;
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
      int32_t block[2] = {-1, -1};
      s = c[r]->ReduceScatter(send.data(), block, 2, DType::kI32, op, Later());
      ASSERT_TRUE(s.ok()) << s;
      for (int j = 0; j < 2; ++j) {
        const int i = 2 * r + j;
        const int want = op == ReduceOp::kSum ? 100 * n * (n - 1) / 2 + n * i : 100 * (n - 1) + i;
        EXPECT_EQ(block[j], want) << "rank " << r << " " << ReduceOpName(op) << " element " << j;
      }
    }
  });
  EXPECT_THAT(rank_apis_[0]->calls(),
              ElementsAre(absl::StrCat("all-gather f32 count 2 rank 0 of ", n),
                          absl::StrCat("reduce-scatter i32 sum count 2 rank 0 of ", n),
                          absl::StrCat("reduce-scatter i32 max count 2 rank 0 of ", n)));
}

TEST_P(NcclCommunicatorRanksTest, RanksThatDisagreeOnTheCountAllFail) {
  const int n = GetParam();
  std::vector<std::unique_ptr<NcclCommunicator>> c = CreateRanks(n);
  for (const auto& comm : c) ASSERT_NE(comm, nullptr);
  OnRanks(n, [&](int r) {
    float x[4] = {1, 2, 3, 4};
    const size_t count = r == n - 1 ? 4 : 3;
    absl::Status s = c[r]->AllReduce(x, x, count, DType::kF32, ReduceOp::kSum, Later());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << "rank " << r << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("the ranks disagree on collective #0"));
    EXPECT_THAT(std::string(s.message()),
                HasSubstr(absl::StrCat("rank ", n - 1, ": all-reduce f32 sum count 4")));
  });
}

// One rank aborts while the others wait in a collective: they fail with the abort's error,
// long before their deadline, and a rank arriving later fails at once.
TEST_P(NcclCommunicatorRanksTest, OneRanksAbortEndsTheOthersCollectives) {
  const int n = GetParam();
  std::vector<std::unique_ptr<NcclCommunicator>> c = CreateRanks(n);
  for (const auto& comm : c) ASSERT_NE(comm, nullptr);
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  const int late = n - 1;  // enters after the abort
  std::thread aborter([&] {
    for (int r = 0; r < late; ++r) {
      if (!rank_apis_[r]->WaitForCalls(1, deadline)) return;  // the test fails below
    }
    c[0]->Abort();
  });
  std::vector<absl::Status> status(n);
  OnRanks(late, [&](int r) {
    float x = 1;
    status[r] = c[r]->AllReduce(&x, &x, 1, DType::kF32, ReduceOp::kSum, deadline);
  });
  aborter.join();
  EXPECT_EQ(status[0].code(), absl::StatusCode::kAborted) << status[0];
  for (int r = 1; r < late; ++r) {
    EXPECT_EQ(status[r].code(), absl::StatusCode::kUnavailable) << "rank " << r << status[r];
    EXPECT_THAT(std::string(status[r].message()),
                HasSubstr(absl::StrCat("rank 0 of ", n, " aborted its communicator")));
  }
  float x = 1;
  absl::Status s = c[late]->AllReduce(&x, &x, 1, DType::kF32, ReduceOp::kSum, deadline);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_LT(absl::Now(), deadline);  // nobody waited for the deadline
  for (int r = 0; r < n; ++r) EXPECT_EQ(rank_apis_[r]->aborts(), 1) << "rank " << r;
}

// Completion without a sleep floor: with poll_interval at 2 s, a collective that NCCL keeps
// "in progress" for 3 more polls after it is done still returns within the spin phase
// (a sleeping poll loop took 3 x 2 s).
TEST_F(NcclCommunicatorTest, WaitReturnsPromptlyOnceNcclIsDone) {
  poll_interval_ = absl::Seconds(2);
  std::unique_ptr<NcclCommunicator> c = MustCreate();
  ASSERT_NE(c, nullptr);
  api_.set_op_polls(3);
  float x[2] = {1, 2};
  const absl::Time start = absl::Now();
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(c->AllReduce(x, x, 2, DType::kF32, ReduceOp::kSum, Later()).ok()) << i;
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  EXPECT_EQ(x[0], 1);
  EXPECT_EQ(x[1], 2);
}

// A call that sleeps between polls (poll_interval 10 s) is woken by Abort() and by the
// AbortSignal, and still ends at its deadline.
TEST_F(NcclCommunicatorTest, AbortWakesASleepingCollectiveAtOnce) {
  poll_interval_ = absl::Seconds(10);
  std::vector<std::unique_ptr<NcclCommunicator>> c = CreateRanks(2);
  ASSERT_NE(c[0], nullptr);
  std::thread aborter([&] {
    if (rank_apis_[0]->WaitForCalls(1, Later())) c[0]->Abort();
  });
  const absl::Time start = absl::Now();
  absl::Status s = c[0]->Barrier(Later());  // rank 1 never comes
  aborter.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank 0: NCCL barrier aborted"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

TEST_F(NcclCommunicatorTest, PeerLossWakesASleepingCollectiveAtOnce) {
  poll_interval_ = absl::Seconds(10);
  std::vector<std::unique_ptr<NcclCommunicator>> c = CreateRanks(2);
  ASSERT_NE(c[0], nullptr);
  std::thread notice([&] {
    if (rank_apis_[0]->WaitForCalls(1, Later())) {
      rank_signals_[0]->PeerLost(1, "lockstepd on host-1 stopped heartbeating");
    }
  });
  const absl::Time start = absl::Now();
  float x = 1;
  absl::Status s = c[0]->AllReduce(&x, &x, 1, DType::kF32, ReduceOp::kSum, Later());
  notice.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(FailedRank(s), 1);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

TEST_F(NcclCommunicatorTest, SleepingCollectiveStillEndsAtItsDeadline) {
  poll_interval_ = absl::Seconds(10);
  std::vector<std::unique_ptr<NcclCommunicator>> c = CreateRanks(2);
  ASSERT_NE(c[0], nullptr);
  const absl::Time start = absl::Now();
  absl::Status s = c[0]->Barrier(start + absl::Milliseconds(50));  // rank 1 never comes
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

// The CollectiveCommunicator calls FusedAllReduce and the overlap use: async all-reduces,
// pieces (one NCCL group per bucket) and broadcasts run in call order on 2 and 4 ranks.
TEST_F(NcclCommunicatorTest, AsyncAndPiecesAllReduceAcrossRanks) {
  for (int n : {2, 4}) {
    SCOPED_TRACE(n);
    std::vector<std::unique_ptr<NcclCommunicator>> c = CreateRanks(n, absl::StrCat("id", n));
    ASSERT_EQ(c.size(), static_cast<size_t>(n));
    OnRanks(n, [&](int r) {
      ASSERT_NE(c[r], nullptr);
      CollectiveCommunicator& comm = *c[r];
      float a[3] = {1.0f * r, 2, 3};
      float b[2] = {10.0f * r, 1};
      float d[1] = {100.0f + r};
      const BufferPiece pieces[] = {{b, sizeof(b)}, {d, sizeof(d)}};
      float e = r == 0 ? 7.0f : -1.0f;
      Handle h1 = comm.AllReduceAsync(a, a, 3, DType::kF32, ReduceOp::kSum, Later());
      Handle h2 = comm.AllReducePiecesAsync(pieces, DType::kF32, ReduceOp::kSum, Later());
      Handle h3 = comm.BroadcastAsync(&e, 1, DType::kF32, 0, Later());
      EXPECT_TRUE(h1->Wait().ok());
      EXPECT_TRUE(h2->Wait().ok());
      EXPECT_TRUE(h3->Wait().ok());
      const float ranks = n * (n - 1) / 2.0f;  // 0 + 1 + ... + n-1
      EXPECT_EQ(a[0], ranks);
      EXPECT_EQ(a[1], 2.0f * n);
      EXPECT_EQ(b[0], 10 * ranks);
      EXPECT_EQ(b[1], 1.0f * n);
      EXPECT_EQ(d[0], 100.0f * n + ranks);
      EXPECT_EQ(e, 7.0f);
      // A sync call after them runs behind them, then the totals count the async ones.
      EXPECT_TRUE(comm.AllReducePieces(pieces, DType::kF32, ReduceOp::kSum, Later()).ok());
      EXPECT_EQ(d[0], n * (100.0f * n + ranks));
      EXPECT_EQ(comm.async_all_reduce_totals().bytes, static_cast<int64_t>(2 * 12 + 12));
    });
  }
}

TEST_F(NcclCommunicatorTest, PiecesOfPartElementsAreRefused) {
  std::unique_ptr<NcclCommunicator> c = MustCreate();
  ASSERT_NE(c, nullptr);
  float x[2] = {1, 2};
  const BufferPiece pieces[] = {{x, 6}};
  absl::Status s = c->AllReducePiecesAsync(pieces, DType::kF32, ReduceOp::kSum, Later())->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("piece 0 of 6 bytes"));
  EXPECT_TRUE(c->Barrier(Later()).ok());
}

}  // namespace
}  // namespace lockstep::collectives::nccl
