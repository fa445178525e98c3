// The driver's size parsing and iteration rules, and a tiny end-to-end run (2 ranks over
// shm and tcp, no peers) that checks exit status 0 (correct results).
#include "bench/allreduce_bench.h"

#include "bench/allreduce_rank.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace bench {
namespace {

TEST(AllreduceBenchTest, ParsesSizesLikeNcclTests) {
  auto s = ParseSizes("8:64");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, (std::vector<uint64_t>{8, 16, 32, 64}));
  auto m = ParseSizes("1M:4m");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, (std::vector<uint64_t>{1 << 20, 2 << 20, 4 << 20}));
  EXPECT_FALSE(ParseSizes("7:64").ok());
  EXPECT_FALSE(ParseSizes("64").ok());
  EXPECT_FALSE(ParseSizes("64:8").ok());
}

TEST(AllreduceBenchTest, IterationRules) {
  EXPECT_EQ(WarmupIters(8, 5), 5);
  EXPECT_EQ(WarmupIters(64 << 20, 5), 2);
  EXPECT_EQ(WarmupIters(512 << 20, 5), 1);
  EXPECT_EQ(ChooseTimedIters(10, 0.25, 5, 1000), 1000);
  EXPECT_EQ(ChooseTimedIters(1e6, 0.25, 5, 1000), 5);
  EXPECT_EQ(ChooseTimedIters(1e4, 0.25, 5, 1000), 25);
  EXPECT_EQ(ChooseTimedIters(1e6, 0.25, 5, 3), 3);
}

TEST(AllreduceBenchTest, EndToEndTinyRunIsCorrect) {
  for (const char* transport : {"shm", "tcp"}) {
    const char* argv[] = {"allreduce", "--np",     "2",       "--transport", transport,
                          "--sizes",   "8:4K",     "--iters", "5",           "--peers",
                          "none",      "--fusion", "false",   "--target_s",  "0.01"};
    EXPECT_EQ(RunAllreduceBench(sizeof(argv) / sizeof(argv[0]), const_cast<char**>(argv)), 0)
        << transport;
  }
}

TEST(AllreduceBenchTest, RoundsAggregateAndBadRoundsAreRefused) {
  const char* two[] = {"allreduce", "--np",       "2",    "--transport", "shm",  "--sizes",
                       "8:64",      "--iters",    "5",    "--peers",     "none", "--fusion",
                       "false",     "--target_s", "0.01", "--rounds",    "2"};
  EXPECT_EQ(RunAllreduceBench(sizeof(two) / sizeof(two[0]), const_cast<char**>(two)), 0);
  const char* zero[] = {"allreduce", "--rounds", "0"};
  EXPECT_EQ(RunAllreduceBench(sizeof(zero) / sizeof(zero[0]), const_cast<char**>(zero)), 2);
}

}  // namespace
}  // namespace bench
}  // namespace lockstep
