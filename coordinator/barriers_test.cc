#include "coordinator/barriers.h"

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace coordinator {
namespace {

using ::testing::HasSubstr;

void AwaitWaiters(FakeClock& clock, int n) {
  absl::Time limit = absl::Now() + absl::Seconds(10);
  while (clock.waiters() < n && absl::Now() < limit) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_GE(clock.waiters(), n);
}

TEST(BarriersTest, AllPartiesPass) {
  FakeClock clock;
  Barriers b(&clock);
  std::vector<absl::Status> results(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      results[i] =
          b.Arrive("job/0/init", absl::StrCat("worker/", i), 3, {}, clock.Now() + absl::Seconds(5));
    });
  }
  for (auto& t : threads) t.join();
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  // A late retry of a member that already passed is OK.
  EXPECT_TRUE(b.Arrive("job/0/init", "worker/1", 3, {}, clock.Now()).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(b.Arrive("job/0/init", "worker/9", 3, {}, clock.Now())));
}

TEST(BarriersTest, TimeoutNamesMissingMembers) {
  FakeClock clock;
  Barriers b(&clock);
  std::vector<std::string> members = {"worker/0", "worker/1", "worker/2"};
  absl::Status s0, s1;
  std::thread t0(
      [&] { s0 = b.Arrive("x", "worker/0", 0, members, clock.Now() + absl::Seconds(2)); });
  std::thread t1(
      [&] { s1 = b.Arrive("x", "worker/2", 0, members, clock.Now() + absl::Seconds(2)); });
  AwaitWaiters(clock, 2);
  clock.Advance(absl::Seconds(2));
  t0.join();
  t1.join();
  EXPECT_TRUE(absl::IsDeadlineExceeded(s0)) << s0;
  EXPECT_THAT(std::string(s0.message()), HasSubstr("2 of 3"));
  EXPECT_THAT(std::string(s0.message()), HasSubstr("missing: worker/1"));
  EXPECT_TRUE(absl::IsDeadlineExceeded(s1));
}

TEST(BarriersTest, TimeoutWithoutNamesCountsMissing) {
  FakeClock clock;
  Barriers b(&clock);
  absl::Status s;
  std::thread t([&] { s = b.Arrive("y", "a", 3, {}, clock.Now() + absl::Seconds(1)); });
  AwaitWaiters(clock, 1);
  clock.Advance(absl::Seconds(1));
  t.join();
  EXPECT_TRUE(absl::IsDeadlineExceeded(s));
  EXPECT_THAT(std::string(s.message()), HasSubstr("missing: 2 more"));
}

TEST(BarriersTest, DisagreeingPartiesRefused) {
  FakeClock clock;
  Barriers b(&clock);
  absl::Status s;
  std::thread t([&] { s = b.Arrive("z", "a", 2, {}, clock.Now() + absl::Seconds(1)); });
  AwaitWaiters(clock, 1);
  EXPECT_TRUE(absl::IsInvalidArgument(b.Arrive("z", "b", 3, {}, clock.Now())));
  ASSERT_TRUE(b.Arrive("z", "b", 2, {}, clock.Now()).ok());
  t.join();
  EXPECT_TRUE(s.ok());
}

TEST(BarriersTest, InvalidArguments) {
  FakeClock clock;
  Barriers b(&clock);
  EXPECT_TRUE(absl::IsInvalidArgument(b.Arrive("", "a", 1, {}, clock.Now())));
  EXPECT_TRUE(absl::IsInvalidArgument(b.Arrive("i", "", 1, {}, clock.Now())));
  EXPECT_TRUE(absl::IsInvalidArgument(b.Arrive("i", "a", 0, {}, clock.Now())));
  EXPECT_TRUE(absl::IsInvalidArgument(b.Arrive("i", "c", 0, {"a", "b"}, clock.Now())));
  EXPECT_TRUE(b.Arrive("one", "a", 1, {}, clock.Now()).ok());
}

TEST(BarriersTest, ShutdownWakesWaiters) {
  FakeClock clock;
  Barriers b(&clock);
  absl::Status s;
  std::thread t([&] { s = b.Arrive("w", "a", 2, {}, clock.Now() + absl::Hours(1)); });
  AwaitWaiters(clock, 1);
  b.Shutdown();
  t.join();
  EXPECT_TRUE(absl::IsUnavailable(s));
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep
