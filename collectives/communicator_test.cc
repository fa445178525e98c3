// Broadcast, AllGather, ReduceScatter, Barrier, async calls and deadlines over the in-process
// transport (the transports have their own tests); Abort over every transport.
#include "collectives/communicator.h"

#include <cstring>
#include <numeric>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collectives/test_util.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

absl::Time Soon() { return absl::Now() + absl::Seconds(20); }

class CommunicatorTest : public ::testing::TestWithParam<int> {};

TEST_P(CommunicatorTest, BroadcastFromEveryRootTreeAndChain) {
  const int n = GetParam();
  AlgorithmOptions options;
  options.chunk_bytes = 64;
  options.broadcast_chain_threshold_bytes = 256;  // sizes above use the pipelined chain
  auto group = MakeGroup(TransportKind::kInProc, n, options);
  ASSERT_TRUE(group.ok()) << group.status();
  for (size_t count : {size_t{1}, size_t{13}, size_t{1000}}) {
    for (int root = 0; root < n; ++root) {
      std::vector<std::vector<int32_t>> bufs(n, std::vector<int32_t>(count, -1));
      std::iota(bufs[root].begin(), bufs[root].end(), root * 1000);
      RunRanks(n, [&](int r) {
        ASSERT_TRUE((*group)[r]->Broadcast(bufs[r].data(), count, DType::kI32, root, Soon()).ok());
      });
      for (int r = 0; r < n; ++r) EXPECT_EQ(bufs[r], bufs[root]) << "root " << root;
    }
  }
}

TEST_P(CommunicatorTest, AllGatherAndReduceScatter) {
  const int n = GetParam();
  auto group = MakeGroup(TransportKind::kInProc, n);
  ASSERT_TRUE(group.ok()) << group.status();
  const size_t count = 5;
  std::vector<std::vector<int64_t>> gathered(n, std::vector<int64_t>(n * count));
  std::vector<std::vector<int64_t>> scattered(n, std::vector<int64_t>(count));
  RunRanks(n, [&](int r) {
    std::vector<int64_t> mine(count, r + 1);
    ASSERT_TRUE(
        (*group)[r]->AllGather(mine.data(), gathered[r].data(), count, DType::kI64, Soon()).ok());
    std::vector<int64_t> all(n * count);
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i) * (r + 1);
    ASSERT_TRUE((*group)[r]
                    ->ReduceScatter(all.data(), scattered[r].data(), count, DType::kI64,
                                    ReduceOp::kSum, Soon())
                    .ok());
  });
  const int64_t ranks_sum = n * (n + 1) / 2;
  for (int r = 0; r < n; ++r) {
    for (int b = 0; b < n; ++b) {
      for (size_t i = 0; i < count; ++i) EXPECT_EQ(gathered[r][b * count + i], b + 1);
    }
    for (size_t i = 0; i < count; ++i) {
      EXPECT_EQ(scattered[r][i], static_cast<int64_t>(r * count + i) * ranks_sum);
    }
  }
}

TEST_P(CommunicatorTest, AsyncAllReducesCompleteInOrderWithBarrier) {
  const int n = GetParam();
  auto group = MakeGroup(TransportKind::kInProc, n);
  ASSERT_TRUE(group.ok()) << group.status();
  constexpr int kTensors = 6;
  std::vector<std::vector<std::vector<float>>> bufs(n, std::vector<std::vector<float>>(kTensors));
  RunRanks(n, [&](int r) {
    std::vector<Handle> handles;
    for (int k = 0; k < kTensors; ++k) {
      bufs[r][k].assign(100 + k, static_cast<float>(k + r));
      handles.push_back((*group)[r]->AllReduceAsync(bufs[r][k].data(), bufs[r][k].data(),
                                                    bufs[r][k].size(), DType::kF32, ReduceOp::kSum,
                                                    Soon()));
    }
    // A sync call queues behind the async ones.
    ASSERT_TRUE((*group)[r]->Barrier(Soon()).ok());
    for (auto& h : handles) {
      EXPECT_TRUE(h->Done());
      ASSERT_TRUE(h->Wait().ok());
    }
  });
  for (int r = 0; r < n; ++r) {
    for (int k = 0; k < kTensors; ++k) {
      EXPECT_EQ(bufs[r][k][0], static_cast<float>(n * k + n * (n - 1) / 2));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CommunicatorTest, ::testing::Values(1, 2, 3, 5, 8));

TEST(RingOrderTest, PinnedRanksSharingACpuBecomeNeighbours) {
  // Round-robin pinning of four ranks on two CPUs: 0 and 2 on CPU 0, 1 and 3 on CPU 1.
  EXPECT_EQ(RingOrderForCpus({0, 1, 0, 1}), (std::vector<int>{0, 2, 1, 3}));
  EXPECT_EQ(RingOrderForCpus({5, 3, 5, 3, 4}), (std::vector<int>{1, 3, 4, 0, 2}));
  EXPECT_TRUE(RingOrderForCpus({0, 1, -1, 1}).empty());  // one rank not pinned
  EXPECT_TRUE(RingOrderForCpus({0, 1, 2, 3}).empty());   // a CPU each: any order is alike
  EXPECT_TRUE(RingOrderForCpus({}).empty());
}

// The ring all-reduce in a non-trivial order, contiguous and as pieces: every rank gets the
// exact sum, and all ranks hold bitwise the same result.
TEST(RingOrderTest, AllReduceInRingOrderIsExactOnEveryRank) {
  const int n = 4;
  AlgorithmOptions options;
  options.algorithm = AllReduceAlgorithm::kRing;
  options.chunk_bytes = 256;  // many segments per block
  options.ring_order = {0, 2, 1, 3};
  auto group = MakeGroup(TransportKind::kInProc, n, options);
  ASSERT_TRUE(group.ok()) << group.status();
  for (size_t count : {size_t{1}, size_t{7}, size_t{1023}, size_t{5000}}) {
    std::vector<std::vector<float>> bufs(n, std::vector<float>(count));
    std::vector<std::vector<int64_t>> ints(n, std::vector<int64_t>(count));
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < count; ++i) {
        bufs[r][i] = 0.1f * static_cast<float>((r + 1) * (i % 13 + 1));
        ints[r][i] = (r + 1) * static_cast<int64_t>(i % 101);
      }
    }
    RunRanks(n, [&](int r) {
      ASSERT_TRUE((*group)[r]
                      ->AllReduce(bufs[r].data(), bufs[r].data(), count, DType::kF32,
                                  ReduceOp::kSum, Soon())
                      .ok());
      // Two pieces of uneven length: the fused path.
      const size_t half = count / 3;
      std::vector<BufferPiece> pieces = {{ints[r].data(), half * sizeof(int64_t)},
                                         {ints[r].data() + half, (count - half) * sizeof(int64_t)}};
      ASSERT_TRUE((*group)[r]
                      ->AllReducePiecesAsync(pieces, DType::kI64, ReduceOp::kSum, Soon())
                      ->Wait()
                      .ok());
    });
    for (size_t i = 0; i < count; ++i) {
      EXPECT_NEAR(bufs[0][i], 0.1f * 10 * (i % 13 + 1), 1e-4) << i;
      EXPECT_EQ(ints[0][i], 10 * static_cast<int64_t>(i % 101)) << i;
    }
    for (int r = 1; r < n; ++r) {
      EXPECT_EQ(0, std::memcmp(bufs[r].data(), bufs[0].data(), count * sizeof(float))) << r;
      EXPECT_EQ(ints[r], ints[0]) << r;
    }
  }
}

TEST(RingOrderTest, AnOrderThatIsNotAPermutationIsRefused) {
  for (const std::vector<int>& bad :
       {std::vector<int>{0, 1, 2}, std::vector<int>{0, 1, 1, 3}, std::vector<int>{0, 1, 2, 4}}) {
    AlgorithmOptions options;
    options.ring_order = bad;
    auto group = MakeGroup(TransportKind::kInProc, 4, options);
    ASSERT_EQ(group.status().code(), absl::StatusCode::kInvalidArgument) << group.status();
    EXPECT_NE(group.status().message().find("ring_order"), std::string::npos) << group.status();
  }
}

// Abort() from another thread ends calls that are blocked in each transport: rank 1 never
// calls, and every test first waits until rank 0's call sleeps in its transport, so that what
// is tested is the wake-up of a waiting call, not the check a call makes when it starts.
class AbortTest : public ::testing::TestWithParam<TransportKind> {
 protected:
  void SetUp() override {
    auto group = MakeWatchedGroup(GetParam(), 2);
    ASSERT_TRUE(group.ok()) << group.status();
    group_ = std::move(group).value();
  }
  Communicator& rank(int r) { return *group_.comms[r]; }
  WatchedTransport& transport(int r) { return *group_.transports[r]; }
  // Waits (bounded) until rank 0's call is blocked in its transport.
  bool Rank0Blocked() { return transport(0).WaitUntilBlocked(absl::Now() + absl::Seconds(10)); }
  void Log(absl::string_view what, absl::Duration latency) {
    LogAbortLatency(absl::StrCat(TransportKindName(GetParam()), " ", what), latency);
  }

  WatchedGroup group_;
};

absl::Time Far() { return absl::Now() + kBlockedCallDeadline; }

TEST_P(AbortTest, AsyncAllReduceBlockedInTheTransportEndsAtAbort) {
  std::vector<float> x(1 << 10, 1.0f);
  Handle h =
      rank(0).AllReduceAsync(x.data(), x.data(), x.size(), DType::kF32, ReduceOp::kSum, Far());
  EXPECT_TRUE(Rank0Blocked());
  EXPECT_FALSE(h->Done());
  const absl::Time start = absl::Now();
  rank(0).Abort();  // from this thread; the call runs on the communicator's
  absl::Status s = h->Wait();
  const absl::Duration latency = absl::Now() - start;
  Log("async all-reduce", latency);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_LT(latency, kAbortLatencyBound);
}

TEST_P(AbortTest, SyncAllReduceBlockedInTheTransportEndsAtAbortFromAnotherThread) {
  std::vector<float> x(1 << 10, 1.0f);
  absl::Status s;
  absl::Time returned;
  std::thread caller([&] {
    s = rank(0).AllReduce(x.data(), x.data(), x.size(), DType::kF32, ReduceOp::kSum, Far());
    returned = absl::Now();
  });
  const bool blocked = Rank0Blocked();
  const absl::Time start = absl::Now();
  rank(0).Abort();
  caller.join();
  EXPECT_TRUE(blocked);
  Log("sync all-reduce", returned - start);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_LT(returned - start, kAbortLatencyBound);
}

TEST_P(AbortTest, EveryQueuedAsyncCallEndsAborted) {
  constexpr int kCalls = 4;
  std::vector<std::vector<float>> bufs(kCalls, std::vector<float>(256, 1.0f));
  std::vector<Handle> handles;
  for (auto& b : bufs) {
    handles.push_back(
        rank(0).AllReduceAsync(b.data(), b.data(), b.size(), DType::kF32, ReduceOp::kSum, Far()));
  }
  EXPECT_TRUE(Rank0Blocked());
  const int entered = transport(0).entered();
  for (const Handle& h : handles) EXPECT_FALSE(h->Done());
  const absl::Time start = absl::Now();
  rank(0).Abort();
  for (int k = 0; k < kCalls; ++k) {
    absl::Status s = handles[k]->Wait();
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << "call " << k << ": " << s;
  }
  const absl::Duration latency = absl::Now() - start;
  Log("4 queued async all-reduces", latency);
  EXPECT_LT(latency, kAbortLatencyBound);
  EXPECT_EQ(transport(0).entered(), entered) << "a queued call reached the transport";
}

TEST_P(AbortTest, CallsAfterAbortReturnAbortedAtOnce) {
  rank(0).Abort();
  const absl::Time start = absl::Now();
  float x = 1;
  EXPECT_EQ(rank(0).AllReduce(&x, &x, 1, DType::kF32, ReduceOp::kSum, Far()).code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(rank(0).Barrier(Far()).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(rank(0).Broadcast(&x, 1, DType::kF32, 1, Far()).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(rank(0).AllReduceAsync(&x, &x, 1, DType::kF32, ReduceOp::kSum, Far())->Wait().code(),
            absl::StatusCode::kAborted);
  EXPECT_LT(absl::Now() - start, kAbortLatencyBound);
  EXPECT_EQ(transport(0).entered(), 0) << "a call after Abort() reached the transport";
}

TEST_P(AbortTest, AbortedRankIsUnavailableToItsPeer) {
  // Rank 0 only receives (a broadcast from rank 1): had it sent its vector before the Abort,
  // rank 1 could still complete an all-reduce with those bytes.
  std::vector<float> x(1 << 10, 1.0f);
  Handle h = rank(0).BroadcastAsync(x.data(), x.size(), DType::kF32, /*root=*/1, Far());
  EXPECT_TRUE(Rank0Blocked());
  rank(0).Abort();
  EXPECT_EQ(h->Wait().code(), absl::StatusCode::kAborted);
  // The peer sees the aborted rank as gone, not as slow.
  const absl::Time start = absl::Now();
  absl::Status peer = rank(1).AllReduce(x.data(), x.data(), x.size(), DType::kF32, ReduceOp::kSum,
                                        absl::Now() + absl::Seconds(30));
  EXPECT_EQ(peer.code(), absl::StatusCode::kUnavailable) << peer;
  EXPECT_NE(peer.message().find("rank 0"), absl::string_view::npos) << peer;
  EXPECT_LT(absl::Now() - start, kFailFastBound) << "a missed failure waits out the 30 s deadline";
}

INSTANTIATE_TEST_SUITE_P(Transports, AbortTest,
                         ::testing::Values(TransportKind::kInProc, TransportKind::kTcp,
                                           TransportKind::kShm),
                         [](const auto& info) { return TransportKindName(info.param); });

TEST(CommunicatorFailureTest, MissingPeerHitsDeadlineAndFailsLaterCalls) {
  auto group = MakeGroup(TransportKind::kInProc, 3);
  ASSERT_TRUE(group.ok());
  double x = 1;
  absl::Status s = (*group)[0]->AllReduce(&x, &x, 1, DType::kF64, ReduceOp::kSum,
                                          absl::Now() + absl::Milliseconds(50));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_EQ((*group)[0]->Barrier(Soon()).code(), absl::StatusCode::kDeadlineExceeded);
}

// Every buffer argument is checked before the collective starts: a null one with count > 0 is
// INVALID_ARGUMENT naming it (async calls: a finished handle), and leaves the communicator
// usable with the ranks still in step.
TEST(CommunicatorArgumentTest, NullBuffersAreInvalidArgumentNamingTheArgument) {
  auto group = MakeGroup(TransportKind::kInProc, 2);
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<std::vector<float>> bufs(2, std::vector<float>(4, 1.0f));
  RunRanks(2, [&](int r) {
    Communicator& c = *(*group)[r];
    float* data = bufs[r].data();
    std::vector<float> all(8, 1.0f);
    auto expect_refused = [&](const absl::Status& s, const std::string& name) {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      EXPECT_NE(s.message().find(name), absl::string_view::npos) << s;
      EXPECT_NE(s.message().find(absl::StrCat("rank ", r)), absl::string_view::npos) << s;
    };
    const DType f32 = DType::kF32;
    const ReduceOp sum = ReduceOp::kSum;
    expect_refused(c.AllReduce(nullptr, data, 4, f32, sum, Soon()), "`send`");
    expect_refused(c.AllReduce(data, nullptr, 4, f32, sum, Soon()), "`recv`");
    expect_refused(c.AllReduceAsync(nullptr, data, 4, f32, sum, Soon())->Wait(), "`send`");
    expect_refused(c.AllReduceAsync(data, nullptr, 4, f32, sum, Soon())->Wait(), "`recv`");
    expect_refused(c.Broadcast(nullptr, 4, f32, 0, Soon()), "`buf`");
    expect_refused(c.BroadcastAsync(nullptr, 4, f32, 0, Soon())->Wait(), "`buf`");
    expect_refused(c.AllGather(nullptr, all.data(), 4, f32, Soon()), "`send`");
    expect_refused(c.AllGather(data, nullptr, 4, f32, Soon()), "`recv`");
    expect_refused(c.ReduceScatter(nullptr, data, 4, f32, sum, Soon()), "`send`");
    expect_refused(c.ReduceScatter(all.data(), nullptr, 4, f32, sum, Soon()), "`recv`");
    const BufferPiece null_piece[] = {{nullptr, 8}};
    expect_refused(c.AllReducePiecesAsync(null_piece, f32, sum, Soon())->Wait(), "no buffer");
    // Null is fine with count 0.
    EXPECT_TRUE(c.AllReduce(nullptr, nullptr, 0, f32, sum, Soon()).ok());
    EXPECT_TRUE(c.AllReduce(data, data, 4, f32, sum, Soon()).ok());
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(bufs[r], std::vector<float>(4, 2.0f)) << "rank " << r;
}

// A sync call queued behind an async one that waits for a missing peer returns at its own
// deadline, not the earlier call's; the rank skipped a collective, so later calls fail at once.
TEST(CommunicatorDeadlineTest, SyncCallQueuedBehindAsyncWorkEndsAtItsOwnDeadline) {
  auto group = MakeGroup(TransportKind::kInProc, 2);
  ASSERT_TRUE(group.ok()) << group.status();
  Communicator& rank0 = *(*group)[0];
  float x = 1;
  // Rank 1 never calls: this waits until its own deadline, far away, or Abort().
  Handle pending = rank0.AllReduceAsync(&x, &x, 1, DType::kF32, ReduceOp::kSum, Soon());
  const absl::Time deadline = absl::Now() + absl::Milliseconds(100);
  absl::Status s = rank0.Barrier(deadline);
  const absl::Duration late = absl::Now() - deadline;
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("barrier"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("1 earlier async collective"), absl::string_view::npos) << s;
  EXPECT_LT(late, kFailFastBound) << "a missed deadline waits for the earlier call's (20 s)";
  const absl::Time start = absl::Now();
  EXPECT_EQ(rank0.Barrier(Soon()).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(rank0.AllReduceAsync(&x, &x, 1, DType::kF32, ReduceOp::kSum, Soon())->Wait().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - start, kFailFastBound) << "a failed communicator answers at once";
  EXPECT_FALSE(pending->Done());
  rank0.Abort();
  EXPECT_EQ(pending->Wait().code(), absl::StatusCode::kAborted);
}

// An async call still queued when its deadline passes fails when its turn comes, without
// running (it never reaches the transport), even though the call before it succeeds.
TEST(CommunicatorDeadlineTest, AsyncCallThatCannotStartByItsDeadlineFailsWithoutRunning) {
  auto group = MakeWatchedGroup(TransportKind::kInProc, 2);
  ASSERT_TRUE(group.ok()) << group.status();
  Communicator& rank0 = *group->comms[0];
  float first = 1, second = 1;
  Handle h1 = rank0.AllReduceAsync(&first, &first, 1, DType::kF32, ReduceOp::kSum, Soon());
  const absl::Time deadline = absl::Now() + absl::Milliseconds(50);
  Handle h2 = rank0.AllReduceAsync(&second, &second, 1, DType::kF32, ReduceOp::kSum, deadline);
  // The condition is the time itself: rank 1 joins the first call after the second's deadline.
  absl::SleepFor(deadline - absl::Now());
  float peer = 2;
  ASSERT_TRUE(
      group->comms[1]->AllReduce(&peer, &peer, 1, DType::kF32, ReduceOp::kSum, Soon()).ok());
  ASSERT_TRUE(h1->Wait().ok());
  EXPECT_EQ(first, 3.0f);
  const int entered = group->transports[0]->entered();
  absl::Status s = h2->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("before it could start"), absl::string_view::npos) << s;
  EXPECT_EQ(group->transports[0]->entered(), entered) << "the late call ran";
  EXPECT_EQ(second, 1.0f);
}

TEST(CommunicatorFailureTest, BadRootIsInvalidArgument) {
  auto group = MakeGroup(TransportKind::kInProc, 1);
  ASSERT_TRUE(group.ok());
  int x = 0;
  EXPECT_EQ((*group)[0]->Broadcast(&x, 1, DType::kI32, 3, Soon()).code(),
            absl::StatusCode::kInvalidArgument);
}

// A trainer's gradient packs (async all-reduces, and AllReducePieces, which runs the last
// one) are counted, with the time they ran; other sync all-reduces are not (their fast path
// reads no clock).
TEST(CommunicatorTest, GradientPackAllReducesCountTheirBytesAndTime) {
  auto group = MakeGroup(TransportKind::kInProc, 2);
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<std::vector<float>> x(2, std::vector<float>(1000, 1.0f));
  RunRanks(2, [&](int r) {
    Communicator& c = *(*group)[r];
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    ASSERT_TRUE(
        c.AllReduce(x[r].data(), x[r].data(), 1000, DType::kF32, ReduceOp::kSum, deadline).ok());
    EXPECT_EQ(c.async_all_reduce_totals().bytes, 0);
    ASSERT_TRUE(
        c.AllReduceAsync(x[r].data(), x[r].data(), 1000, DType::kF32, ReduceOp::kSum, deadline)
            ->Wait()
            .ok());
    BufferPiece pieces[] = {{x[r].data(), 400 * sizeof(float)},
                            {x[r].data() + 400, 600 * sizeof(float)}};
    ASSERT_TRUE(c.AllReducePiecesAsync(pieces, DType::kF32, ReduceOp::kSum, deadline)->Wait().ok());
    EXPECT_EQ(c.async_all_reduce_totals().bytes, 2 * 1000 * static_cast<int64_t>(sizeof(float)));
    ASSERT_TRUE(c.AllReducePieces(pieces, DType::kF32, ReduceOp::kSum, deadline).ok());
    const Communicator::AllReduceTotals totals = c.async_all_reduce_totals();
    EXPECT_EQ(totals.bytes, 3 * 1000 * static_cast<int64_t>(sizeof(float)));
    EXPECT_GT(totals.time, absl::ZeroDuration());
  });
  EXPECT_EQ(x[0][0], 16.0f);  // four sums of two ranks
  EXPECT_EQ(x[1][999], 16.0f);
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep
