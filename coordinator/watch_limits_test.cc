#include "coordinator/watch_limits.h"

#include <optional>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace coordinator {
namespace {

using ::testing::HasSubstr;

TEST(WatchLimitsTest, JobWatchesAreLimitedAndSlotsGiveTheirPlaceBack) {
  WatchLimits limits(WatchLimitOptions{.max_job_watches = 2});
  absl::StatusOr<WatchLimits::Slot> a = limits.OpenJobWatch();
  std::optional<absl::StatusOr<WatchLimits::Slot>> b = limits.OpenJobWatch();
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b->ok());
  absl::Status full = limits.OpenJobWatch().status();
  EXPECT_TRUE(absl::IsResourceExhausted(full)) << full;
  EXPECT_THAT(full.message(), HasSubstr("--max_job_watches"));
  EXPECT_EQ(limits.open(""), 2);
  b.reset();
  EXPECT_EQ(limits.open(""), 1);
  EXPECT_TRUE(limits.OpenJobWatch().ok());  // and given back again at once
  EXPECT_EQ(limits.open(""), 1);
}

TEST(WatchLimitsTest, AssignmentWatchesAreLimitedPerTask) {
  WatchLimits limits(WatchLimitOptions{.max_assignment_watches_per_task = 1});
  absl::StatusOr<WatchLimits::Slot> w0 = limits.OpenAssignmentWatch("worker/0");
  ASSERT_TRUE(w0.ok());
  absl::Status second = limits.OpenAssignmentWatch("worker/0").status();
  EXPECT_TRUE(absl::IsResourceExhausted(second)) << second;
  EXPECT_THAT(second.message(), HasSubstr("worker/0"));
  EXPECT_THAT(second.message(), HasSubstr("--max_assignment_watches_per_task"));
  EXPECT_TRUE(limits.OpenAssignmentWatch("worker/1").ok());
  WatchLimits::Slot moved = std::move(*w0);  // the moved-from slot gives nothing back
  EXPECT_EQ(limits.open("worker/0"), 1);
}

TEST(WatchLimitsTest, EveryIdentityHasItsOwnPoolOfStreams) {
  WatchLimits limits(WatchLimitOptions{.max_streams_per_identity = 2});
  absl::StatusOr<WatchLimits::Slot> a = limits.OpenIdentityStream("mallory");
  std::optional<absl::StatusOr<WatchLimits::Slot>> b = limits.OpenIdentityStream("mallory");
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b->ok());
  absl::Status full = limits.OpenIdentityStream("mallory").status();
  EXPECT_TRUE(absl::IsResourceExhausted(full)) << full;
  EXPECT_THAT(full.message(), HasSubstr("mallory"));
  EXPECT_THAT(full.message(), HasSubstr("--max_streams_per_identity"));
  EXPECT_TRUE(limits.OpenIdentityStream("alice").ok());  // another identity is not affected
  b.reset();
  EXPECT_EQ(limits.open("identity:mallory"), 1);
  // Under --insecure there is no identity to count.
  std::vector<WatchLimits::Slot> anonymous;
  for (int i = 0; i < 5; ++i) anonymous.push_back(*limits.OpenIdentityStream(""));
  EXPECT_EQ(limits.open("identity:"), 0);
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep
