#include "collectives/bench/peer_measurement.h"

#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace lockstep::bench {
namespace {

TEST(PatternTest, SumOfAllRanksChecksExactly) {
  constexpr int kNp = 4;
  constexpr uint64_t kCount = 1000;
  std::vector<float> sum(kCount, 0.0f);
  for (int rank = 0; rank < kNp; ++rank) {
    std::vector<float> data(kCount);
    FillPattern(rank, data.data(), kCount);
    for (uint64_t i = 0; i < kCount; ++i) sum[i] += data[i];
  }
  EXPECT_EQ(CountSumErrors(kNp, sum.data(), kCount), 0u);
  sum[17] += 1.0f;
  sum[999] = 0.0f;
  EXPECT_EQ(CountSumErrors(kNp, sum.data(), kCount), 2u);
}

TEST(IterationsTest, WarmupShrinksForLargeSizes) {
  EXPECT_EQ(WarmupIters(8, 5), 5);
  EXPECT_EQ(WarmupIters(64u << 20, 5), 2);
  EXPECT_EQ(WarmupIters(1u << 30, 5), 1);
}

TEST(IterationsTest, TimedItersFillTargetWithinBounds) {
  EXPECT_EQ(ChooseTimedIters(/*estimate_us=*/1000, /*target_s=*/0.25, 5, 1000), 250);
  EXPECT_EQ(ChooseTimedIters(1, 0.25, 5, 1000), 1000);  // Capped by --iters.
  EXPECT_EQ(ChooseTimedIters(1e6, 0.25, 5, 1000), 5);   // At least min_iters.
  EXPECT_EQ(ChooseTimedIters(1e6, 0.25, 5, 3), 3);      // --iters wins over min_iters.
  EXPECT_EQ(ChooseTimedIters(0, 0.25, 5, 1000), 1000);
}

TEST(SummarizeTest, MedianAndBandwidths) {
  const PeerMeasurement m =
      Summarize("mpi_vader", 4, 1000000, {10.0, 1000.0, 20.0, 30.0, 40.0}, true);
  EXPECT_EQ(m.iters, 5);
  EXPECT_DOUBLE_EQ(m.time_us_p50, 30.0);
  EXPECT_DOUBLE_EQ(m.time_us_avg, 220.0);
  EXPECT_NEAR(m.algbw_gbps, 1e6 / 30e-6 / 1e9, 1e-9);
  EXPECT_NEAR(m.busbw_gbps, m.algbw_gbps * 1.5, 1e-9);
}

TEST(ToJsonLineTest, IsOneParsableObject) {
  const PeerMeasurement m = Summarize("gloo_ring_chunked", 2, 8, {12.0, 14.0}, false);
  const std::string line = ToJsonLine(m);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["impl"], "gloo_ring_chunked");
  EXPECT_EQ(j["np"], 2);
  EXPECT_EQ(j["bytes"], 8);
  EXPECT_DOUBLE_EQ(j["time_us_p50"].get<double>(), 13.0);
  EXPECT_EQ(j["correct"], false);
  EXPECT_TRUE(j.contains("algbw_gbps"));
  EXPECT_TRUE(j.contains("busbw_gbps"));
}

}  // namespace
}  // namespace lockstep::bench
