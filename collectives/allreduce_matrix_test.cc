// AllReduce over transport x world size x element count x dtype x op, against a serial
// reference (exact for integers, a tolerance for floats), and bitwise equality of every
// rank's result. Each (transport, world size, algorithm) builds one group and runs every
// (count, dtype, op) through it. Forced algorithms run with 64-byte chunks, forcing many
// segments; kAuto runs with the transport's own choices, as a job does.
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collectives/test_util.h"
#include "collectives/test_values.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

using Param = std::tuple<TransportKind, int, AllReduceAlgorithm>;

struct Case {
  size_t count;
  DType dt;
  ReduceOp op;
};

void RunCases(TransportKind kind, int n, const AlgorithmOptions& options,
              const std::vector<Case>& cases);

class AllReduceMatrixTest : public ::testing::TestWithParam<Param> {};

// Forced algorithms run with 64-byte chunks (many segments); kAuto runs as a job does, with the
// transport's own thresholds, chunks and segments (CreateCommunicator), on sizes around them.
AlgorithmOptions OptionsFor(AllReduceAlgorithm algo, size_t forced_chunk_bytes) {
  AlgorithmOptions options;
  options.algorithm = algo;
  if (algo != AllReduceAlgorithm::kAuto) options.chunk_bytes = forced_chunk_bytes;
  return options;
}

std::vector<Case> EveryDTypeAndOp(std::initializer_list<size_t> counts) {
  std::vector<Case> cases;
  for (size_t count : counts) {
    for (DType dt : kTestDTypes) {
      for (ReduceOp op : kTestOps) cases.push_back({count, dt, op});
    }
  }
  return cases;
}

TEST_P(AllReduceMatrixTest, MatchesSerialReferenceOnEveryRank) {
  const auto [kind, n, algo] = GetParam();
  // kAuto also crosses the small-message thresholds: shm recursive doubling below 8 KiB and
  // halving-doubling below 64 KiB; a TCP pair's recursive doubling below 1 MiB.
  RunCases(kind, n, OptionsFor(algo, 64),
           algo == AllReduceAlgorithm::kAuto ? EveryDTypeAndOp({0, 1, 7, 1023, 5000, 40000})
                                             : EveryDTypeAndOp({0, 1, 7, 1023}));
}

TEST_P(AllReduceMatrixTest, LargeUnevenCount) {
  const auto [kind, n, algo] = GetParam();
  const size_t count = (size_t{1} << 20) + 3;
  if (algo == AllReduceAlgorithm::kAuto) {
    // What users get, every dtype and op: 2-8 MiB vectors take the large-message paths
    // (ring, shm halving-doubling up to 8 MiB, TCP's 1 MiB segments above two ranks).
    RunCases(kind, n, OptionsFor(algo, 0), EveryDTypeAndOp({count}));
    return;
  }
  // Forced algorithms on a subset: this is about segment and block boundaries.
  if (n != 3 && n != 4 && n != 8) GTEST_SKIP() << "large size runs at n = 3, 4, 8";
  RunCases(kind, n, OptionsFor(algo, 96 << 10),  // still several segments per block
           {{count, DType::kF32, ReduceOp::kSum}, {count, DType::kI64, ReduceOp::kMax}});
}

void RunCases(TransportKind kind, int n, const AlgorithmOptions& options,
              const std::vector<Case>& cases) {
  auto group_or = MakeGroup(kind, n, options);
  ASSERT_TRUE(group_or.ok()) << group_or.status();
  auto& group = *group_or;
  for (const Case& c : cases) {
    SCOPED_TRACE(
        absl::StrCat("count=", c.count, " dtype=", DTypeName(c.dt), " op=", ReduceOpName(c.op)));
    const size_t esize = DTypeSize(c.dt);
    std::vector<std::vector<char>> in(n, std::vector<char>(c.count * esize + 1));
    std::vector<std::vector<char>> out(n, std::vector<char>(c.count * esize + 1));
    for (int r = 0; r < n; ++r) FillInput(c.dt, in[r].data(), c.count, r, c.op);
    std::vector<absl::Status> status(n);
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    RunRanks(n, [&](int r) {
      // Odd ranks in place, even ranks out of place.
      void* recv = r % 2 ? in[r].data() : out[r].data();
      status[r] = group[r]->AllReduce(in[r].data(), recv, c.count, c.dt, c.op, deadline);
      if (r % 2) out[r] = in[r];
    });
    for (int r = 0; r < n; ++r) ASSERT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
    for (int r = 1; r < n; ++r) {
      ASSERT_EQ(0, std::memcmp(out[0].data(), out[r].data(), c.count * esize))
          << "rank " << r << " differs from rank 0";
    }
    for (size_t i = 0; i < c.count; ++i) {
      double ref = Reference(n, i, c.op, c.dt);
      double got = LoadValue(c.dt, out[0].data(), i);
      ASSERT_NEAR(got, ref, Tolerance(c.dt, ref, n)) << "element " << i;
    }
  }
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto [kind, n, algo] = info.param;
  return absl::StrCat(TransportKindName(kind), "_n", n, "_",
                      algo == AllReduceAlgorithm::kAuto              ? "auto"
                      : algo == AllReduceAlgorithm::kRing            ? "ring"
                      : algo == AllReduceAlgorithm::kHalvingDoubling ? "hd"
                                                                     : "rd");
}

INSTANTIATE_TEST_SUITE_P(
    Transports, AllReduceMatrixTest,
    ::testing::Combine(::testing::Values(TRANSPORT), ::testing::Range(1, 9),
                       ::testing::Values(AllReduceAlgorithm::kAuto, AllReduceAlgorithm::kRing,
                                         AllReduceAlgorithm::kHalvingDoubling,
                                         AllReduceAlgorithm::kRecursiveDoubling)),
    Name);

}  // namespace
}  // namespace collectives
}  // namespace lockstep
