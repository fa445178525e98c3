#include "collectives/fused_all_reduce.h"

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "collectives/reduce.h"
#include "collectives/test_util.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

TEST(FusedAllReduceTest, PacksBucketsMixesDTypesAndReducesLargeTensorsInPlace) {
  const int n = 3;
  auto group = MakeGroup(TransportKind::kInProc, n);
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<int> buckets(n);
  std::vector<std::vector<std::vector<float>>> f(n);
  std::vector<std::vector<int64_t>> i64(n);
  RunRanks(n, [&](int r) {
    FusedAllReduce fused((*group)[r].get(), ReduceOp::kSum, /*bytes_per_pack=*/1024);
    for (int step = 0; step < 2; ++step) {  // reuse across steps
      const absl::Time deadline = absl::Now() + absl::Seconds(20);
      f[r].clear();
      for (int k = 0; k < 20; ++k) f[r].emplace_back(10 + 7 * k, static_cast<float>(r + k));
      f[r].emplace_back(1000, 1.0f);  // 4000 bytes: reduced alone
      i64[r].assign(33, r);
      for (int k = 0; k < 10; ++k) fused.Add(f[r][k].data(), f[r][k].size(), DType::kF32, deadline);
      fused.Add(i64[r].data(), i64[r].size(), DType::kI64, deadline);
      for (size_t k = 10; k < f[r].size(); ++k) {
        fused.Add(f[r][k].data(), f[r][k].size(), DType::kF32, deadline);
      }
      buckets[r] = fused.buckets_started();
      ASSERT_TRUE(fused.Finish().ok());
    }
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_GT(buckets[r], 3);  // several full buckets started before Finish
    for (int k = 0; k < 20; ++k) {
      for (float v : f[r][k]) ASSERT_EQ(v, static_cast<float>(3 * k + 3));
    }
    for (float v : f[r][20]) ASSERT_EQ(v, 3.0f);
    for (int64_t v : i64[r]) ASSERT_EQ(v, 3);
  }
}

// Zero-copy fusion over the ring (the pieces path): tensors of ragged sizes and four dtypes,
// interleaved, each dtype's tensors in one bucket. The result must be bitwise the one a packed
// bucket gives (a ring all-reduce of the tensors concatenated), on every rank.
class ZeroCopyFusionTest : public ::testing::TestWithParam<std::tuple<TransportKind, int, size_t>> {
};

struct RankData {
  std::vector<std::vector<float>> f32;
  std::vector<std::vector<double>> f64;
  std::vector<std::vector<uint16_t>> bf16;
  std::vector<std::vector<int32_t>> i32;
};

// Tensor sizes that cut segments and chunks at odd places, an empty tensor among them
// (4739 elements in all).
const std::vector<size_t> kRaggedSizes = {700, 0, 1, 2500, 333, 1200, 5};

// Tensors of kRaggedSizes elements, uniform in [-1, 1), drawn from `gen`.
std::vector<std::vector<float>> RaggedTensors(std::mt19937& gen) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<std::vector<float>> tensors;
  for (size_t k : kRaggedSizes) {
    tensors.emplace_back(k);
    for (float& v : tensors.back()) v = u(gen);
  }
  return tensors;
}

template <typename T>
std::vector<T> Concat(const std::vector<std::vector<T>>& parts) {
  std::vector<T> all;
  for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

template <typename T>
void ExpectBitwise(const std::vector<std::vector<T>>& got, const std::vector<T>& want) {
  const std::vector<T> all = Concat(got);
  ASSERT_EQ(all.size(), want.size());
  EXPECT_EQ(std::memcmp(all.data(), want.data(), all.size() * sizeof(T)), 0);
}

TEST_P(ZeroCopyFusionTest, RaggedMixedDTypesMatchPackedRingBitwise) {
  const auto [kind, n, chunk_bytes] = GetParam();
  AlgorithmOptions options;
  options.algorithm = AllReduceAlgorithm::kRing;
  // Small chunks: many messages, each gathered from several tensors (some empty); larger:
  // messages of a few KiB over many tensors (shm: through the ring, not the small lines).
  options.chunk_bytes = chunk_bytes;
  auto group = MakeGroup(kind, n, options);
  ASSERT_TRUE(group.ok()) << group.status();
  const std::vector<size_t> sizes = {1, 7, 1023, 3, 0, 130, 2, 61, 9, 300};
  std::vector<RankData> in(n), fused(n);
  for (int r = 0; r < n; ++r) {
    std::mt19937 gen(17 + r);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (size_t k = 0; k < sizes.size(); ++k) {
      RankData& d = in[r];
      d.f32.emplace_back(sizes[k]);
      for (float& v : d.f32.back()) v = u(gen) * 1e3f;
      d.f64.emplace_back(sizes[(k + 3) % sizes.size()]);
      for (double& v : d.f64.back()) v = u(gen) / 3.0;
      d.bf16.emplace_back(sizes[(k + 5) % sizes.size()]);
      for (uint16_t& v : d.bf16.back()) v = FloatToBFloat16(u(gen));
      d.i32.emplace_back(sizes[(k + 7) % sizes.size()]);
      for (int32_t& v : d.i32.back()) v = static_cast<int32_t>(gen() % 1000) - 500;
    }
  }
  std::vector<RankData> want(n);
  RunRanks(n, [&](int r) {
    Communicator& comm = *(*group)[r];
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    fused[r] = in[r];
    FusedAllReduce f(&comm, ReduceOp::kSum, /*bytes_per_pack=*/64 << 10);
    for (int step = 0; step < 2; ++step) {  // the second step reuses the buckets
      if (step == 1) fused[r] = in[r];
      RankData& d = fused[r];
      for (size_t k = 0; k < sizes.size(); ++k) {
        f.Add(d.f32[k].data(), d.f32[k].size(), DType::kF32, deadline);
        f.Add(d.f64[k].data(), d.f64[k].size(), DType::kF64, deadline);
        f.Add(d.bf16[k].data(), d.bf16[k].size(), DType::kBF16, deadline);
        f.Add(d.i32[k].data(), d.i32[k].size(), DType::kI32, deadline);
      }
      ASSERT_TRUE(f.Finish().ok());
    }
    // The packed reference: one ring all-reduce of each dtype's tensors concatenated.
    std::vector<float> f32 = Concat(in[r].f32);
    std::vector<double> f64 = Concat(in[r].f64);
    std::vector<uint16_t> bf16 = Concat(in[r].bf16);
    std::vector<int32_t> i32 = Concat(in[r].i32);
    ASSERT_TRUE(
        comm.AllReduce(f32.data(), f32.data(), f32.size(), DType::kF32, ReduceOp::kSum, deadline)
            .ok());
    ASSERT_TRUE(
        comm.AllReduce(f64.data(), f64.data(), f64.size(), DType::kF64, ReduceOp::kSum, deadline)
            .ok());
    ASSERT_TRUE(comm.AllReduce(bf16.data(), bf16.data(), bf16.size(), DType::kBF16, ReduceOp::kSum,
                               deadline)
                    .ok());
    ASSERT_TRUE(
        comm.AllReduce(i32.data(), i32.data(), i32.size(), DType::kI32, ReduceOp::kSum, deadline)
            .ok());
    want[r].f32 = {f32};
    want[r].f64 = {f64};
    want[r].bf16 = {bf16};
    want[r].i32 = {i32};
  });
  for (int r = 0; r < n; ++r) {
    ExpectBitwise(fused[r].f32, want[r].f32[0]);
    ExpectBitwise(fused[r].f64, want[r].f64[0]);
    ExpectBitwise(fused[r].bf16, want[r].bf16[0]);
    ExpectBitwise(fused[r].i32, want[r].i32[0]);
    ExpectBitwise(fused[r].f32, Concat(fused[0].f32));  // the same on every rank
  }
  // Integers are exact: check one against the serial sum.
  for (size_t i = 0; i < in[0].i32[0].size(); ++i) {
    int32_t sum = 0;
    for (int r = 0; r < n; ++r) sum += in[r].i32[0][i];
    ASSERT_EQ(fused[0].i32[0][i], sum);
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, ZeroCopyFusionTest,
                         ::testing::Combine(::testing::Values(TransportKind::kInProc,
                                                              TransportKind::kTcp,
                                                              TransportKind::kShm),
                                            ::testing::Values(2, 3, 4),
                                            ::testing::Values(size_t{96}, size_t{8192})));

// AlgorithmOptions::segment_bytes: a large all-reduce runs as consecutive all-reduces of
// segments (each picking its algorithm by size; the last one shorter); a fused bucket is cut
// into the same segments, so it gives bitwise the contiguous result. Exact for integers.
TEST(ZeroCopyFusionTest, SegmentedAllReduceOfPiecesMatchesContiguousBitwise) {
  const int n = 3;
  AlgorithmOptions options;
  options.segment_bytes = 4000;         // segments cut through tensors; 1000 floats each
  options.ring_threshold_bytes = 3000;  // 4000-byte segments take the ring, the last (2956) not
  options.chunk_bytes = 512;
  auto group = MakeGroup(TransportKind::kInProc, n, options);
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<std::vector<std::vector<float>>> f(n);
  std::vector<std::vector<int32_t>> ints(n);
  std::vector<std::vector<float>> contiguous(n);
  for (int r = 0; r < n; ++r) {
    std::mt19937 gen(5 + r);
    f[r] = RaggedTensors(gen);
    contiguous[r] = Concat(f[r]);
    for (size_t i = 0; i < 4739; ++i) ints[r].push_back(static_cast<int32_t>(gen() % 100));
  }
  const std::vector<std::vector<int32_t>> ints_in = ints;
  RunRanks(n, [&](int r) {
    Communicator& comm = *(*group)[r];
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    FusedAllReduce fused(&comm, ReduceOp::kSum, /*bytes_per_pack=*/1 << 20);
    for (auto& t : f[r]) fused.Add(t.data(), t.size(), DType::kF32, deadline);
    ASSERT_TRUE(fused.Finish().ok());
    ASSERT_TRUE(comm.AllReduce(contiguous[r].data(), contiguous[r].data(), contiguous[r].size(),
                               DType::kF32, ReduceOp::kSum, deadline)
                    .ok());
    ASSERT_TRUE(comm.AllReduce(ints[r].data(), ints[r].data(), ints[r].size(), DType::kI32,
                               ReduceOp::kSum, deadline)
                    .ok());
  });
  for (int r = 0; r < n; ++r) {
    ExpectBitwise(f[r], contiguous[0]);
    for (size_t i = 0; i < ints[r].size(); ++i) {
      ASSERT_EQ(ints[r][i], ints_in[0][i] + ints_in[1][i] + ints_in[2][i]) << r << " at " << i;
    }
  }
}

// Halving-doubling and recursive doubling over pieces (what shm groups of more than two ranks
// run on buckets below the shm ring threshold, algorithms/tuning.cc, and TCP pairs below 1
// MiB) reduce
// where the tensors lie and give bitwise the contiguous result, with the fold of non-powers
// of two, for SUM and MEAN.
TEST(ZeroCopyFusionTest, DoublingAlgorithmsOverPiecesMatchContiguousBitwise) {
  for (AllReduceAlgorithm algorithm :
       {AllReduceAlgorithm::kHalvingDoubling, AllReduceAlgorithm::kRecursiveDoubling}) {
    for (int n : {2, 3, 4, 6}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean}) {
        AlgorithmOptions options;
        options.algorithm = algorithm;
        auto group = MakeGroup(TransportKind::kInProc, n, options);
        ASSERT_TRUE(group.ok()) << group.status();
        std::vector<std::vector<std::vector<float>>> f(n);
        std::vector<std::vector<float>> contiguous(n);
        for (int r = 0; r < n; ++r) {
          std::mt19937 gen(11 + r);
          f[r] = RaggedTensors(gen);
          contiguous[r] = Concat(f[r]);
        }
        const float first_sum = [&] {
          float sum = 0;
          for (int r = 0; r < n; ++r) sum += f[r][0][0];
          return sum;
        }();
        RunRanks(n, [&](int r) {
          Communicator& comm = *(*group)[r];
          const absl::Time deadline = absl::Now() + absl::Seconds(30);
          FusedAllReduce fused(&comm, op, /*bytes_per_pack=*/1 << 20);
          for (auto& t : f[r]) fused.Add(t.data(), t.size(), DType::kF32, deadline);
          ASSERT_TRUE(fused.Finish().ok());
          ASSERT_TRUE(comm.AllReduce(contiguous[r].data(), contiguous[r].data(),
                                     contiguous[r].size(), DType::kF32, op, deadline)
                          .ok());
        });
        for (int r = 0; r < n; ++r) ExpectBitwise(f[r], contiguous[0]);
        const float want = op == ReduceOp::kMean ? first_sum / n : first_sum;
        EXPECT_NEAR(f[0][0][0], want, 1e-5) << "n=" << n;
      }
    }
  }
}

TEST(ZeroCopyFusionTest, RefusesPiecesThatAreNotWholeElements) {
  auto group = MakeGroup(TransportKind::kInProc, 1);
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<char> bytes(6);
  BufferPiece pieces[] = {{bytes.data(), 6}};
  absl::Status s = (*group)[0]
                       ->AllReducePiecesAsync(pieces, DType::kF32, ReduceOp::kSum,
                                              absl::Now() + absl::Seconds(5))
                       ->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  s = (*group)[0]->AllReducePieces(pieces, DType::kF32, ReduceOp::kSum,
                                   absl::Now() + absl::Seconds(5));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "rank 0")) << s;
}

// Finish runs the last partial bucket on the calling thread (Communicator::AllReducePieces):
// every bucket, that one included, still counts toward the bytes a trainer's bus bandwidth
// is computed from, and a failed communicator fails Finish rather than the bucket running.
TEST(FusedAllReduceTest, LastBucketOnTheCallerIsCountedAndFailsWithTheCommunicator) {
  const int n = 2;
  auto group = MakeGroup(TransportKind::kInProc, n);
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<std::vector<std::vector<float>>> f(n);
  RunRanks(n, [&](int r) {
    Communicator& comm = *(*group)[r];
    FusedAllReduce fused(&comm, ReduceOp::kSum, /*bytes_per_pack=*/1000);
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    for (int k = 0; k < 7; ++k) f[r].emplace_back(100, static_cast<float>(r + 1));  // 400 B each
    for (auto& t : f[r]) fused.Add(t.data(), t.size(), DType::kF32, deadline);
    ASSERT_TRUE(fused.Finish().ok());
    EXPECT_EQ(comm.async_all_reduce_totals().bytes, 7 * 400);
  });
  for (int r = 0; r < n; ++r) {
    for (const auto& t : f[r]) {
      for (float v : t) ASSERT_EQ(v, 3.0f);
    }
  }
  Communicator& comm = *(*group)[0];
  comm.Abort();
  FusedAllReduce fused(&comm, ReduceOp::kSum, /*bytes_per_pack=*/1000);
  fused.Add(f[0][0].data(), f[0][0].size(), DType::kF32, absl::Now() + absl::Seconds(20));
  EXPECT_EQ(fused.Finish().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(f[0][0][0], 3.0f);
}

// Compression::kBF16: every f32 tensor is rounded to bf16 and the bucket reduces bf16, so the
// result is, bitwise, the bf16 all-reduce of the rounded tensors concatenated in Add order
// (with the bf16 tensors that share their bucket) and widened; a tensor reduced alone
// (>= bytes_per_pack) likewise. With two ranks that is the f32 sum of the two rounded values,
// rounded once; with more, within bf16 rounding of the f32 sum. Other dtypes are exact.
// Two steps: the second reuses the buckets.
class CompressedFusionTest : public ::testing::TestWithParam<std::tuple<TransportKind, int>> {};

TEST_P(CompressedFusionTest, Bf16ResultIsTheBf16AllReduceOfTheRoundedTensors) {
  const auto [kind, n] = GetParam();
  AlgorithmOptions options;
  options.chunk_bytes = 512;
  auto group = MakeGroup(kind, n, options);
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<std::vector<std::vector<float>>> in(n), out(n);
  std::vector<std::vector<uint16_t>> bf16_in(n), bf16_out(n);
  std::vector<std::vector<int32_t>> ints(n);
  std::vector<std::vector<float>> large_in(n), large_out(n);
  for (int r = 0; r < n; ++r) {
    std::mt19937 gen(23 + r);
    in[r] = RaggedTensors(gen);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int i = 0; i < 50; ++i) bf16_in[r].push_back(FloatToBFloat16(u(gen)));
    for (int i = 0; i < 70; ++i) ints[r].push_back(static_cast<int32_t>(gen() % 1000) + 100000);
    for (int i = 0; i < 3000; ++i) large_in[r].push_back(u(gen) * 1e-3f);
  }
  const std::vector<std::vector<int32_t>> ints_in = ints;
  // The reference: the tensors that travel as bf16, rounded and concatenated in Add order.
  std::vector<std::vector<uint16_t>> wire(n), large_wire(n);
  std::vector<std::vector<float>> f32_sum(n);  // the uncompressed result, for comparison
  RunRanks(n, [&](int r) {
    Communicator& comm = *(*group)[r];
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    // 12000 bytes: every ragged tensor and the bf16 one share a bucket; the large one is alone.
    FusedAllReduce fused(&comm, ReduceOp::kSum, /*bytes_per_pack=*/12000, Compression::kBF16);
    for (int step = 0; step < 2; ++step) {
      out[r] = in[r];
      bf16_out[r] = bf16_in[r];
      large_out[r] = large_in[r];
      ints[r] = ints_in[r];
      fused.Add(large_out[r].data(), large_out[r].size(), DType::kF32, deadline);
      for (size_t k = 0; k < out[r].size(); ++k) {
        fused.Add(out[r][k].data(), out[r][k].size(), DType::kF32, deadline);
        if (k == 2) fused.Add(bf16_out[r].data(), bf16_out[r].size(), DType::kBF16, deadline);
        if (k == 4) fused.Add(ints[r].data(), ints[r].size(), DType::kI32, deadline);
      }
      ASSERT_TRUE(fused.Finish().ok());
    }
    for (size_t k = 0; k < in[r].size(); ++k) {
      for (float v : in[r][k]) wire[r].push_back(FloatToBFloat16(v));
      if (k == 2) wire[r].insert(wire[r].end(), bf16_in[r].begin(), bf16_in[r].end());
    }
    for (float v : large_in[r]) large_wire[r].push_back(FloatToBFloat16(v));
    ASSERT_TRUE(comm.AllReduce(wire[r].data(), wire[r].data(), wire[r].size(), DType::kBF16,
                               ReduceOp::kSum, deadline)
                    .ok());
    ASSERT_TRUE(comm.AllReduce(large_wire[r].data(), large_wire[r].data(), large_wire[r].size(),
                               DType::kBF16, ReduceOp::kSum, deadline)
                    .ok());
    f32_sum[r] = Concat(in[r]);
    ASSERT_TRUE(comm.AllReduce(f32_sum[r].data(), f32_sum[r].data(), f32_sum[r].size(), DType::kF32,
                               ReduceOp::kSum, deadline)
                    .ok());
  });
  for (int r = 0; r < n; ++r) {
    // Bitwise the widened bf16 all-reduce, the bf16 tensor included.
    std::vector<uint16_t> got;
    for (size_t k = 0; k < out[r].size(); ++k) {
      for (float v : out[r][k]) {
        ASSERT_EQ(v, BFloat16ToFloat(FloatToBFloat16(v))) << "rank " << r << ": not widened bf16";
        got.push_back(FloatToBFloat16(v));
      }
      if (k == 2) got.insert(got.end(), bf16_out[r].begin(), bf16_out[r].end());
    }
    EXPECT_EQ(got, wire[r]) << "rank " << r;
    for (size_t i = 0; i < large_out[r].size(); ++i) {
      ASSERT_EQ(large_out[r][i], BFloat16ToFloat(large_wire[r][i])) << "rank " << r << " at " << i;
    }
    for (size_t i = 0; i < ints[r].size(); ++i) {
      int32_t sum = 0;
      for (int q = 0; q < n; ++q) sum += ints_in[q][i];
      ASSERT_EQ(ints[r][i], sum) << "rank " << r << " at " << i;
    }
  }
  // Against f32: each input and each pairwise partial sum is rounded once (relative error
  // 2^-9 each), so the error is below n * 2^-8 * sum |g|; and compression did change values.
  const std::vector<float> got = Concat(out[0]);
  size_t differ = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    float abs_sum = 0, rounded_sum = 0;
    for (int q = 0; q < n; ++q) {
      const float g = Concat(in[q])[i];
      abs_sum += std::fabs(g);
      rounded_sum += BFloat16ToFloat(FloatToBFloat16(g));
    }
    ASSERT_LE(std::fabs(got[i] - f32_sum[0][i]), n * std::ldexp(abs_sum, -8)) << "at " << i;
    if (n == 2) {  // one pairwise step: the f32 sum of the rounded values, rounded once
      ASSERT_EQ(got[i], BFloat16ToFloat(FloatToBFloat16(rounded_sum))) << "at " << i;
    }
    differ += got[i] != f32_sum[0][i];
  }
  EXPECT_GT(differ, got.size() / 2);
}

INSTANTIATE_TEST_SUITE_P(Transports, CompressedFusionTest,
                         ::testing::Combine(::testing::Values(TransportKind::kInProc,
                                                              TransportKind::kTcp,
                                                              TransportKind::kShm),
                                            ::testing::Values(2, 3)));

// A failed bucket leaves the compressed tensors as they are (unspecified) and fails Finish;
// Compression::kNone leaves every dtype as it was before (the default).
TEST(CompressedFusionTest, FailedCommunicatorFailsFinish) {
  auto group = MakeGroup(TransportKind::kInProc, 2);
  ASSERT_TRUE(group.ok()) << group.status();
  Communicator& comm = *(*group)[0];
  comm.Abort();
  std::vector<float> big(2000, 1.0f), small(10, 1.0f);
  FusedAllReduce fused(&comm, ReduceOp::kSum, /*bytes_per_pack=*/1000, Compression::kBF16);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  fused.Add(big.data(), big.size(), DType::kF32, deadline);
  fused.Add(small.data(), small.size(), DType::kF32, deadline);
  EXPECT_EQ(fused.Finish().code(), absl::StatusCode::kAborted);
}

// A Bf16Codec standing for device memory: narrows into scratch of its own (never the tensor's
// bytes), widens from it, and counts what it holds; `fail_at` fails that Narrow call.
class ScratchCodec final : public Bf16Codec {
 public:
  explicit ScratchCodec(int fail_at = -1) : fail_at_(fail_at) {}
  absl::StatusOr<void*> Narrow(float* data, size_t count) override {
    if (narrows_++ == fail_at_) return absl::ResourceExhaustedError("scratch: out of memory");
    auto wire = std::make_unique<uint16_t[]>(count);
    for (size_t i = 0; i < count; ++i) wire[i] = FloatToBFloat16(data[i]);
    void* p = wire.get();
    held_[p] = std::move(wire);
    return p;
  }
  absl::Status Widen(void* wire, float* data, size_t count) override {
    const uint16_t* w = static_cast<const uint16_t*>(wire);
    for (size_t i = 0; i < count; ++i) data[i] = BFloat16ToFloat(w[i]);
    ++widens_;
    return held_.erase(wire) == 1 ? absl::OkStatus() : absl::InternalError("not held");
  }
  void Discard(void* wire) override {
    ++discards_;
    held_.erase(wire);
  }
  size_t held() const { return held_.size(); }
  int widens_ = 0;
  int discards_ = 0;

 private:
  const int fail_at_;
  int narrows_ = 0;
  std::map<void*, std::unique_ptr<uint16_t[]>> held_;
};

// With a codec the result is bitwise the in-place compression's, the tensors' own bytes are
// never the wire's, and every scratch is given back, over several steps.
TEST(CompressedFusionTest, CodecGivesTheInPlaceResultAndReleasesItsScratch) {
  const int n = 3;
  auto group = MakeGroup(TransportKind::kInProc, n);
  ASSERT_TRUE(group.ok()) << group.status();
  std::vector<std::vector<std::vector<float>>> with(n), without(n);
  std::vector<ScratchCodec> codecs(n);
  RunRanks(n, [&](int r) {
    FusedAllReduce in_place((*group)[r].get(), ReduceOp::kSum, 256, Compression::kBF16);
    FusedAllReduce coded((*group)[r].get(), ReduceOp::kSum, 256, Compression::kBF16, &codecs[r]);
    for (int step = 0; step < 2; ++step) {
      for (auto* out : {&with[r], &without[r]}) {
        FusedAllReduce& fused = out == &with[r] ? coded : in_place;
        const absl::Time deadline = absl::Now() + absl::Seconds(20);
        out->clear();
        for (int k = 0; k < 6; ++k) {
          out->emplace_back(5 + 30 * k, 0.f);
          for (size_t i = 0; i < out->back().size(); ++i) {
            out->back()[i] = 0.1f * (r + 1) + 0.37f * k + 0.013f * i + step;
          }
        }
        for (auto& t : *out) fused.Add(t.data(), t.size(), DType::kF32, deadline);
        ASSERT_TRUE(fused.Finish().ok());
      }
    }
  });
  for (int r = 0; r < n; ++r) {
    for (size_t k = 0; k < with[r].size(); ++k) {
      ASSERT_EQ(0, std::memcmp(with[r][k].data(), without[r][k].data(), with[r][k].size() * 4))
          << "rank " << r << " tensor " << k;
    }
    EXPECT_EQ(codecs[r].widens_, 12);
    EXPECT_EQ(codecs[r].held(), 0u);
  }
  // The control: compression changed the sums (they are not the f32 ones).
  float f32_sum = 0;
  for (int r = 0; r < n; ++r) f32_sum += 0.1f * (r + 1) + 0.37f * 5 + 0.013f * 7 + 1;
  EXPECT_NE(with[0][5][7], f32_sum);
}

// A Narrow that fails leaves its tensor out and is what Finish returns; the scratch of the
// others is released, not widened.
TEST(CompressedFusionTest, CodecFailureFailsFinishAndReleasesTheScratch) {
  auto group = MakeGroup(TransportKind::kInProc, 1);
  ASSERT_TRUE(group.ok()) << group.status();
  ScratchCodec codec(/*fail_at=*/1);
  FusedAllReduce fused((*group)[0].get(), ReduceOp::kSum, 1000, Compression::kBF16, &codec);
  std::vector<float> a(10, 1.f), b(10, 2.f), c(400, 3.f);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  fused.Add(a.data(), a.size(), DType::kF32, deadline);
  fused.Add(b.data(), b.size(), DType::kF32, deadline);  // fails
  fused.Add(c.data(), c.size(), DType::kF32, deadline);
  absl::Status s = fused.Finish();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(codec.held(), 0u);
  EXPECT_EQ(codec.widens_, 0);
  EXPECT_EQ(codec.discards_, 2);
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep
