#include "collectives/fused_all_reduce.h"

#include "absl/time/clock.h"
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

}  // namespace
}  // namespace collectives
}  // namespace lockstep
