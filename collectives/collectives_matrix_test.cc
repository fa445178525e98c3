// Broadcast, AllGather, ReduceScatter and Barrier over one transport (TRANSPORT, one test
// target per transport) x world size 1..8 x element count x dtype (x op, x root), checked
// against what each rank put in: exact for copies, the serial reference for reductions.
// Each case runs with the transport's own options and with small chunks, which force the
// pipelined broadcast chain and many ring segments on small inputs.
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collectives/test_util.h"
#include "collectives/test_values.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

// 100003 f32 is 400 KB: above the 256 KiB broadcast chain threshold.
constexpr size_t kCounts[] = {0, 1, 7, 1023, 100003};

// The transport's own options, and 4 KiB chunks.
std::vector<AlgorithmOptions> Options() {
  AlgorithmOptions small_chunks;
  small_chunks.chunk_bytes = 4096;
  return {AlgorithmOptions{}, small_chunks};
}

std::string OptionsName(const AlgorithmOptions& options) {
  return options.chunk_bytes == AlgorithmOptions{}.chunk_bytes
             ? "default chunks"
             : absl::StrCat(options.chunk_bytes, "-byte chunks");
}

class CollectivesMatrixTest : public ::testing::TestWithParam<int> {
 protected:
  std::vector<std::unique_ptr<Communicator>> Group(const AlgorithmOptions& options) {
    auto group = MakeGroup(TRANSPORT, GetParam(), options);
    EXPECT_TRUE(group.ok()) << group.status();
    return group.ok() ? std::move(group).value() : std::vector<std::unique_ptr<Communicator>>{};
  }
  absl::Time Deadline() const { return absl::Now() + absl::Seconds(60); }
};

TEST_P(CollectivesMatrixTest, BroadcastCopiesTheRootsBufferToEveryRank) {
  const int n = GetParam();
  for (const AlgorithmOptions& options : Options()) {
    auto group = Group(options);
    ASSERT_EQ(group.size(), static_cast<size_t>(n));
    for (size_t count : kCounts) {
      for (DType dt : {DType::kF32, DType::kF16, DType::kI64}) {
        for (int root : {0, n / 2, n - 1}) {
          SCOPED_TRACE(absl::StrCat(OptionsName(options), " count=", count,
                                    " dtype=", DTypeName(dt), " root=", root));
          const size_t bytes = count * DTypeSize(dt);
          std::vector<std::vector<char>> buf(n, std::vector<char>(bytes + 1));
          for (int r = 0; r < n; ++r) FillInput(dt, buf[r].data(), count, r, ReduceOp::kSum);
          const std::vector<char> expected = buf[root];
          std::vector<absl::Status> status(n);
          const absl::Time deadline = Deadline();
          RunRanks(n, [&](int r) {
            status[r] = group[r]->Broadcast(buf[r].data(), count, dt, root, deadline);
          });
          for (int r = 0; r < n; ++r) {
            ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
            ASSERT_EQ(0, std::memcmp(buf[r].data(), expected.data(), bytes)) << "rank " << r;
          }
        }
      }
    }
  }
}

TEST_P(CollectivesMatrixTest, AllGatherPutsEveryRanksBlockInRankOrder) {
  const int n = GetParam();
  for (const AlgorithmOptions& options : Options()) {
    auto group = Group(options);
    ASSERT_EQ(group.size(), static_cast<size_t>(n));
    for (size_t count : kCounts) {
      for (DType dt : {DType::kF32, DType::kBF16, DType::kI64}) {
        SCOPED_TRACE(
            absl::StrCat(OptionsName(options), " count=", count, " dtype=", DTypeName(dt)));
        const size_t block = count * DTypeSize(dt);
        std::vector<std::vector<char>> in(n, std::vector<char>(block + 1));
        std::vector<std::vector<char>> out(n, std::vector<char>(block * n + 1));
        for (int r = 0; r < n; ++r) {
          FillInput(dt, in[r].data(), count, r, ReduceOp::kSum);
          // Odd ranks gather in place: their block already lies at its place in `out`.
          if (r % 2 == 1) std::memcpy(out[r].data() + r * block, in[r].data(), block);
        }
        std::vector<absl::Status> status(n);
        const absl::Time deadline = Deadline();
        RunRanks(n, [&](int r) {
          const void* send = r % 2 == 1 ? out[r].data() + r * block : in[r].data();
          status[r] = group[r]->AllGather(send, out[r].data(), count, dt, deadline);
        });
        for (int r = 0; r < n; ++r) {
          ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
          for (int b = 0; b < n; ++b) {
            ASSERT_EQ(0, std::memcmp(out[r].data() + b * block, in[b].data(), block))
                << "rank " << r << ", block of rank " << b;
          }
        }
      }
    }
  }
}

TEST_P(CollectivesMatrixTest, ReduceScatterGivesEachRankItsReducedBlock) {
  const int n = GetParam();
  for (const AlgorithmOptions& options : Options()) {
    auto group = Group(options);
    ASSERT_EQ(group.size(), static_cast<size_t>(n));
    // Per-rank block sizes: 30011 elements is several ring segments of the default chunks
    // only for the wide types; the small-chunk run covers the rest.
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1023}, size_t{30011}}) {
      for (DType dt : kTestDTypes) {
        for (ReduceOp op : kTestOps) {
          SCOPED_TRACE(absl::StrCat(OptionsName(options), " count=", count,
                                    " dtype=", DTypeName(dt), " op=", ReduceOpName(op)));
          const size_t esize = DTypeSize(dt);
          std::vector<std::vector<char>> in(n, std::vector<char>(count * n * esize + 1));
          std::vector<std::vector<char>> out(n, std::vector<char>(count * esize + 1));
          for (int r = 0; r < n; ++r) FillInput(dt, in[r].data(), count * n, r, op);
          std::vector<absl::Status> status(n);
          const absl::Time deadline = Deadline();
          RunRanks(n, [&](int r) {
            status[r] =
                group[r]->ReduceScatter(in[r].data(), out[r].data(), count, dt, op, deadline);
          });
          for (int r = 0; r < n; ++r) {
            ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
            for (size_t i = 0; i < count; ++i) {
              const double ref = Reference(n, r * count + i, op, dt);
              ASSERT_NEAR(LoadValue(dt, out[r].data(), i), ref, Tolerance(dt, ref, n))
                  << "rank " << r << ", element " << i;
            }
          }
        }
      }
    }
  }
}

TEST_P(CollectivesMatrixTest, BarrierReleasesNoRankBeforeEveryRankArrived) {
  const int n = GetParam();
  auto group = Group(AlgorithmOptions{});
  ASSERT_EQ(group.size(), static_cast<size_t>(n));
  constexpr int kRounds = 20;
  std::vector<std::atomic<int>> arrived(kRounds);
  std::vector<std::vector<int>> seen(n, std::vector<int>(kRounds, -1));
  std::vector<absl::Status> status(n);
  RunRanks(n, [&](int r) {
    for (int round = 0; round < kRounds && status[r].ok(); ++round) {
      // A different rank comes last in each round; the others wait in the barrier for it.
      if (r == round % n) {
        const absl::Time until = absl::Now() + absl::Milliseconds(2);
        while (absl::Now() < until) {
        }
      }
      arrived[round].fetch_add(1);
      status[r] = group[r]->Barrier(absl::Now() + absl::Seconds(60));
      seen[r][round] = arrived[round].load();
    }
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    for (int round = 0; round < kRounds; ++round) {
      EXPECT_EQ(seen[r][round], n) << "rank " << r << " left barrier " << round << " early";
    }
  }
}

TEST_P(CollectivesMatrixTest, BarrierWithAMissingRankEndsAtTheDeadline) {
  const int n = GetParam();
  if (n == 1) GTEST_SKIP() << "one rank never waits";
  auto group = Group(AlgorithmOptions{});
  ASSERT_EQ(group.size(), static_cast<size_t>(n));
  std::vector<absl::Status> status(n);
  const absl::Time deadline = absl::Now() + absl::Milliseconds(300);
  RunRanks(n, [&](int r) {
    if (r != n - 1) status[r] = group[r]->Barrier(deadline);  // rank n-1 never comes
  });
  const absl::Time returned = absl::Now();
  for (int r = 0; r < n - 1; ++r) {
    EXPECT_EQ(status[r].code(), absl::StatusCode::kDeadlineExceeded)
        << "rank " << r << ": " << status[r];
  }
  EXPECT_LT(returned - deadline, absl::Seconds(5)) << "the barrier outlived its deadline";
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CollectivesMatrixTest, ::testing::Range(1, 9),
                         [](const auto& info) { return absl::StrCat("n", info.param); });

}  // namespace
}  // namespace collectives
}  // namespace lockstep
