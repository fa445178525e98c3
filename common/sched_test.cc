#include "common/sched.h"

#include <gtest/gtest.h>

#include <thread>

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

}  // namespace
}  // namespace lockstep
