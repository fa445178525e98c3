#include "coordinator/wait_limits.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace coordinator {
namespace {

using ::testing::HasSubstr;

TEST(WaitLimitsTest, CountsPerJobAndPerCallerAndGivesPlacesBack) {
  WaitLimits w(WaitLimitOptions{.max_per_job = 2, .max_per_caller = 2});
  ASSERT_TRUE(w.Acquire("jobs/a/", "host0", "GetKey \"k\"", "job a").ok());
  ASSERT_TRUE(w.Acquire("jobs/a/", "host1", "GetKey \"k\"", "job a").ok());
  absl::Status job_full = w.Acquire("jobs/a/", "host2", "GetKey \"k\"", "job a");
  EXPECT_TRUE(absl::IsResourceExhausted(job_full)) << job_full;
  EXPECT_THAT(job_full.message(), HasSubstr("2 calls of job a"));
  EXPECT_THAT(job_full.message(), HasSubstr("--max_waiting_calls_per_job"));
  ASSERT_TRUE(w.Acquire("jobs/b/", "host0", "GetKey \"k\"", "job b").ok());
  absl::Status caller_full = w.Acquire("jobs/c/", "host0", "GetKey \"k\"", "job c");
  EXPECT_TRUE(absl::IsResourceExhausted(caller_full)) << caller_full;
  EXPECT_THAT(caller_full.message(), HasSubstr("host0"));
  EXPECT_THAT(caller_full.message(), HasSubstr("--max_waiting_calls_per_caller"));
  // A refused call takes nothing.
  EXPECT_EQ(w.waiting_in("jobs/c/"), 0);
  EXPECT_EQ(w.waiting_of("host2"), 0);
  w.Release("jobs/a/", "host0");
  EXPECT_EQ(w.waiting_in("jobs/a/"), 1);
  EXPECT_EQ(w.waiting_of("host0"), 1);
  EXPECT_TRUE(w.Acquire("jobs/a/", "host2", "GetKey \"k\"", "job a").ok());
}

TEST(WaitLimitsTest, ClampsLongWaitsAndSaysSo) {
  WaitLimits w(WaitLimitOptions{.max_wait = absl::Seconds(10)});
  const absl::Time now = absl::FromUnixSeconds(1000);
  EXPECT_EQ(w.Clamp(now, now + absl::Seconds(3)), now + absl::Seconds(3));
  EXPECT_EQ(w.Clamp(now, absl::InfiniteFuture()), now + absl::Seconds(10));
  EXPECT_EQ(w.ClampNote(now, now + absl::Seconds(10)), "");
  EXPECT_THAT(w.ClampNote(now, now + absl::Hours(1)), HasSubstr("--max_wait_ms"));
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep
