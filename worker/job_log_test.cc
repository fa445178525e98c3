#include "worker/job_log.h"

#include "common/clock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace worker {
namespace {

TEST(JobLogTest, PendingLinesGoInBatchesUntilDelivered) {
  FakeClock clock;
  JobLog log(&clock, /*capacity=*/10, /*batch=*/2);
  EXPECT_TRUE(log.Pending().empty());
  log.Add("a");
  log.Add("b");
  log.Add("c");
  std::vector<v1::LogLine> p = log.Pending();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].seq(), 1);
  EXPECT_EQ(p[0].text(), "a");
  EXPECT_EQ(p[0].unix_micros(), absl::ToUnixMicros(clock.Now()));
  // Not delivered (a heartbeat failed): the same lines again.
  EXPECT_EQ(log.Pending()[0].seq(), 1);
  log.Delivered(p.back().seq());
  p = log.Pending();
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].text(), "c");
  log.Delivered(3);
  EXPECT_TRUE(log.Pending().empty());
  EXPECT_EQ(log.Lines().size(), 3u);
}

TEST(JobLogTest, TheOldestLinesGoWhenFull) {
  FakeClock clock;
  JobLog log(&clock, /*capacity=*/2, /*batch=*/10);
  for (const char* t : {"a", "b", "c"}) log.Add(t);
  const std::vector<v1::LogLine> lines = log.Lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].seq(), 2);
  EXPECT_EQ(lines[1].text(), "c");
  EXPECT_EQ(log.Pending().size(), 2u);
}

}  // namespace
}  // namespace worker
}  // namespace lockstep
