#include "common/sched.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <thread>
#include <vector>

namespace lockstep {
namespace {

TEST(SchedTest, RejectsASliceThatIsNotPositive) {
  absl::Status s = RequestSchedulerSlice(absl::ZeroDuration());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("slice"), absl::string_view::npos) << s;
  EXPECT_EQ(RequestSchedulerSlice(-absl::Microseconds(5)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SchedTest, SliceAppliesToTheCallingThreadOnly) {
  absl::StatusOr<absl::Duration> before = CurrentSchedulerSlice();
  ASSERT_TRUE(before.ok()) << before.status();
  if (*before == absl::ZeroDuration()) {
    GTEST_SKIP() << "this kernel (before Linux 6.12) neither reports nor keeps a slice";
  }
  absl::StatusOr<absl::Duration> in_thread;
  std::thread t([&] {
    absl::Status s = RequestSchedulerSlice(absl::Microseconds(200));
    in_thread = s.ok() ? CurrentSchedulerSlice() : absl::StatusOr<absl::Duration>(s);
  });
  t.join();
  ASSERT_TRUE(in_thread.ok()) << in_thread.status();
  EXPECT_EQ(*in_thread, absl::Microseconds(200));
  absl::StatusOr<absl::Duration> after = CurrentSchedulerSlice();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(*after, *before);
}

TEST(CpuListTest, ParsesLinuxCpuLists) {
  EXPECT_EQ(ParseCpuList("0").value(), std::vector<int>({0}));
  EXPECT_EQ(ParseCpuList("0-3,6").value(), std::vector<int>({0, 1, 2, 3, 6}));
  EXPECT_EQ(ParseCpuList("6,1-2,2").value(), std::vector<int>({1, 2, 6}));
  EXPECT_EQ(ParseCpuList("4-4").value(), std::vector<int>({4}));
}

TEST(CpuListTest, RefusesBadListsNamingTheFieldAndTheElement) {
  for (const char* bad : {"", "a", "1-", "-1", "3-1", "0,,1", "1.5", "99999"}) {
    absl::StatusOr<std::vector<int>> cpus = ParseCpuList(bad, "--cpu_affinity");
    ASSERT_EQ(cpus.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(cpus.status().message().find("--cpu_affinity"), absl::string_view::npos)
        << cpus.status();
  }
  EXPECT_NE(ParseCpuList("0,3-1").status().message().find("\"3-1\""), absl::string_view::npos);
}

TEST(CpuListTest, FormatsRangesAndRoundTrips) {
  EXPECT_EQ(FormatCpuList({0, 1, 2, 5}), "0-2,5");
  EXPECT_EQ(FormatCpuList({3}), "3");
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_EQ(ParseCpuList(FormatCpuList({0, 2, 3, 4, 7, 9, 10})).value(),
            std::vector<int>({0, 2, 3, 4, 7, 9, 10}));
}

TEST(CpuAffinityTest, BindsTheCallingThreadAndTheThreadsItCreates) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  std::vector<int> in_child;
  // A thread of its own, so that the test's main thread keeps every CPU.
  std::thread t([&] {
    ASSERT_TRUE(SetCpuAffinity({allowed.back()}).ok());
    EXPECT_EQ(AllowedCpus(), std::vector<int>({allowed.back()}));
    std::thread child([&] { in_child = AllowedCpus(); });
    child.join();
  });
  t.join();
  EXPECT_EQ(in_child, std::vector<int>({allowed.back()}));
  EXPECT_EQ(AllowedCpus(), allowed);
}

TEST(CpuAffinityTest, RefusesCpusThisProcessMayNotUse) {
  EXPECT_EQ(SetCpuAffinity({}).code(), absl::StatusCode::kInvalidArgument);
  if (AllowedCpus().back() == CPU_SETSIZE - 1) GTEST_SKIP() << "every CPU number is allowed";
  absl::Status s = SetCpuAffinity({CPU_SETSIZE - 1});
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("allowed: " + FormatCpuList(AllowedCpus())), absl::string_view::npos)
      << s;
}

TEST(CpuAffinityTest, CpusPerWorkerGivesEachWorkerCpusOfItsOwnOrNone) {
  using Cpus = std::vector<std::vector<int>>;
  EXPECT_EQ(CpusPerWorker(2, 1, {0, 1}), (Cpus{{0}, {1}}));
  EXPECT_EQ(CpusPerWorker(2, 2, {0, 1, 2, 3, 4}), (Cpus{{0, 1}, {2, 3}}));
  EXPECT_EQ(CpusPerWorker(2, 1, {3, 7}), (Cpus{{3}, {7}}));  // a taskset's CPUs
  EXPECT_TRUE(CpusPerWorker(3, 1, {0, 1}).empty());          // more workers than CPUs
  EXPECT_TRUE(CpusPerWorker(2, 2, {0, 1, 2}).empty());       // devices do not fit
  EXPECT_TRUE(CpusPerWorker(1, 1, {0, 1}).empty());          // nothing to keep apart
}

}  // namespace
}  // namespace lockstep
