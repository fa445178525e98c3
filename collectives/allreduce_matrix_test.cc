// AllReduce over transport x world size x element count x dtype x op, against a serial
// reference (exact for integers, a tolerance for floats), and bitwise equality of every
// rank's result. Each (transport, world size, algorithm) builds one group and runs every
// (count, dtype, op) through it. The ring runs with 64-byte chunks, forcing many segments.
#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collectives/reduce.h"
#include "collectives/test_util.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

constexpr DType kDTypes[] = {DType::kF32,  DType::kF64, DType::kF16,
                             DType::kBF16, DType::kI32, DType::kI64};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kMean};

double InputValue(int rank, size_t i, ReduceOp op, bool integer) {
  if (op == ReduceOp::kProd) {
    double v = ((rank + i) % 3 == 0) ? 2 : 1;
    if (!integer && (rank * 7 + i) % 4 == 1) v = 1.5;
    return (i + rank) % 5 == 0 ? -v : v;
  }
  double v = static_cast<double>((rank * 31 + i * 17) % 201) - 100;
  return integer ? v : v / 8;
}

void Store(DType dt, void* buf, size_t i, double v) {
  switch (dt) {
    case DType::kF32:
      static_cast<float*>(buf)[i] = static_cast<float>(v);
      break;
    case DType::kF64:
      static_cast<double*>(buf)[i] = v;
      break;
    case DType::kF16:
      static_cast<uint16_t*>(buf)[i] = FloatToHalf(v);
      break;
    case DType::kBF16:
      static_cast<uint16_t*>(buf)[i] = FloatToBFloat16(v);
      break;
    case DType::kI32:
      static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v);
      break;
    case DType::kI64:
      static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v);
      break;
  }
}

double Load(DType dt, const void* buf, size_t i) {
  switch (dt) {
    case DType::kF32:
      return static_cast<const float*>(buf)[i];
    case DType::kF64:
      return static_cast<const double*>(buf)[i];
    case DType::kF16:
      return HalfToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DType::kBF16:
      return BFloat16ToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DType::kI32:
      return static_cast<const int32_t*>(buf)[i];
    case DType::kI64:
      return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
  }
  return 0;
}

bool IsInteger(DType dt) { return dt == DType::kI32 || dt == DType::kI64; }

double Tolerance(DType dt, double ref, int n) {
  double rel = 0;
  switch (dt) {
    case DType::kF32:
      rel = 1e-6;
      break;
    case DType::kF64:
      rel = 1e-12;
      break;
    case DType::kF16:
      rel = 2e-3;
      break;
    case DType::kBF16:
      rel = 1.6e-2;
      break;
    default:
      return 0;
  }
  return rel * n * std::max(std::fabs(ref), 1.0) * 2;
}

double Reference(int n, size_t i, ReduceOp op, DType dt) {
  const bool integer = IsInteger(dt);
  // Inputs as the ranks hold them (rounded to the dtype).
  std::vector<double> xs(n);
  for (int r = 0; r < n; ++r) {
    char tmp[8];
    Store(dt, tmp, 0, InputValue(r, i, op, integer));
    xs[r] = Load(dt, tmp, 0);
  }
  double acc = xs[0];
  for (int r = 1; r < n; ++r) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kMean:
        acc += xs[r];
        break;
      case ReduceOp::kProd:
        acc *= xs[r];
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, xs[r]);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, xs[r]);
        break;
    }
  }
  if (op == ReduceOp::kMean) acc = integer ? std::trunc(acc / n) : acc / n;
  return acc;
}

using Param = std::tuple<TransportKind, int, AllReduceAlgorithm>;

struct Case {
  size_t count;
  DType dt;
  ReduceOp op;
};

void RunCases(TransportKind kind, int n, const AlgorithmOptions& options,
              const std::vector<Case>& cases);

class AllReduceMatrixTest : public ::testing::TestWithParam<Param> {};

TEST_P(AllReduceMatrixTest, MatchesSerialReferenceOnEveryRank) {
  const auto [kind, n, algo] = GetParam();
  AlgorithmOptions options;
  options.algorithm = algo;
  options.chunk_bytes = 64;  // many segments even for small inputs
  std::vector<Case> cases;
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1023}}) {
    for (DType dt : kDTypes) {
      for (ReduceOp op : kOps) cases.push_back({count, dt, op});
    }
  }
  RunCases(kind, n, options, cases);
}

TEST_P(AllReduceMatrixTest, LargeUnevenCount) {
  const auto [kind, n, algo] = GetParam();
  // On a subset: this is about segment and block boundaries, not dtypes.
  if (n != 3 && n != 4 && n != 8) GTEST_SKIP() << "large size runs at n = 3, 4, 8";
  AlgorithmOptions options;
  options.algorithm = algo;
  options.chunk_bytes = 96 << 10;  // still several segments per block
  RunCases(kind, n, options,
           {{(size_t{1} << 20) + 3, DType::kF32, ReduceOp::kSum},
            {(size_t{1} << 20) + 3, DType::kI64, ReduceOp::kMax}});
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
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < c.count; ++i) {
        Store(c.dt, in[r].data(), i, InputValue(r, i, c.op, IsInteger(c.dt)));
      }
    }
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
      double got = Load(c.dt, out[0].data(), i);
      ASSERT_NEAR(got, ref, Tolerance(c.dt, ref, n)) << "element " << i;
    }
  }
}

std::string Name(const ::testing::TestParamInfo<Param>& info) {
  const auto [kind, n, algo] = info.param;
  return absl::StrCat(TransportKindName(kind), "_n", n, "_",
                      algo == AllReduceAlgorithm::kRing              ? "ring"
                      : algo == AllReduceAlgorithm::kHalvingDoubling ? "hd"
                                                                     : "rd");
}

INSTANTIATE_TEST_SUITE_P(
    Transports, AllReduceMatrixTest,
    ::testing::Combine(::testing::Values(TRANSPORTS), ::testing::Range(1, 9),
                       ::testing::Values(AllReduceAlgorithm::kRing,
                                         AllReduceAlgorithm::kHalvingDoubling,
                                         AllReduceAlgorithm::kRecursiveDoubling)),
    Name);

}  // namespace
}  // namespace collectives
}  // namespace lockstep
