#include "coordinator/barriers.h"

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace coordinator {
namespace {

using ::testing::HasSubstr;

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

TEST(BarriersTest, DeletePrefixDropsAnEndedAttemptsBarriers) {
  FakeClock clock;
  Barriers b(&clock);
  ASSERT_TRUE(b.Arrive("jobs/job-1/1/init", "worker/0", 1, {}, clock.Now()).ok());
  ASSERT_TRUE(b.Arrive("jobs/job-1/2/init", "worker/0", 1, {}, clock.Now()).ok());
  EXPECT_EQ(b.DeletePrefix("jobs/job-1/1/"), 1);
  EXPECT_EQ(b.size(), 1);
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
  ASSERT_TRUE(clock.WaitForWaiters(2));
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
  ASSERT_TRUE(clock.WaitForWaiters(1));
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
  ASSERT_TRUE(clock.WaitForWaiters(1));
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

TEST(BarriersTest, BarriersPerJobPartiesAndNamesAreLimited) {
  FakeClock clock;
  Barriers b(&clock,
             BarrierLimits{.max_barriers_per_job = 2, .max_parties = 4, .max_name_bytes = 16});
  ASSERT_TRUE(b.Arrive("jobs/j/1/a", "m", 1, {}, clock.Now()).ok());
  ASSERT_TRUE(b.Arrive("jobs/j/1/b", "m", 1, {}, clock.Now()).ok());
  absl::Status full = b.Arrive("jobs/j/1/c", "m", 1, {}, clock.Now());
  EXPECT_TRUE(absl::IsResourceExhausted(full)) << full;
  EXPECT_THAT(full.message(), HasSubstr("job j already holds 2 barriers"));
  EXPECT_THAT(full.message(), HasSubstr("--max_barriers_per_job"));
  EXPECT_TRUE(b.Arrive("jobs/j/1/a", "m", 1, {}, clock.Now()).ok());  // an existing one
  EXPECT_TRUE(b.Arrive("jobs/k/1/a", "m", 1, {}, clock.Now()).ok());  // another job
  EXPECT_EQ(b.DeletePrefix("jobs/j/1/"), 2);
  EXPECT_TRUE(b.Arrive("jobs/j/1/c", "m", 1, {}, clock.Now()).ok());
  EXPECT_THAT(b.Arrive("p", "m", 5, {}, clock.Now()).message(), HasSubstr("over the limit of 4"));
  EXPECT_THAT(b.Arrive(std::string(17, 'i'), "m", 1, {}, clock.Now()).message(),
              HasSubstr("barrier_id: 17 bytes"));
  EXPECT_THAT(b.Arrive("i", std::string(17, 'm'), 1, {}, clock.Now()).message(),
              HasSubstr("member: 17 bytes"));
}

TEST(BarriersTest, WaitingCallsAreLimitedPerCallerAndPerJob) {
  FakeClock clock;
  Barriers b(&clock, BarrierLimits{.waits = {.max_per_job = 2, .max_per_caller = 1}});
  const absl::Time later = clock.Now() + absl::Hours(1);
  absl::Status first;
  std::thread t([&] { first = b.Arrive("jobs/j/1/a", "m0", 2, {}, later, "host0"); });
  ASSERT_TRUE(clock.WaitForWaiters(1));
  // host0 holds its one place: its next wait is refused, in any job.
  absl::Status second = b.Arrive("jobs/k/1/b", "m0", 2, {}, later, "host0");
  EXPECT_TRUE(absl::IsResourceExhausted(second)) << second;
  EXPECT_THAT(second.message(), HasSubstr("host0"));
  EXPECT_THAT(second.message(), HasSubstr("--max_waiting_calls_per_caller"));
  // Another caller waits in another job.
  absl::Status other;
  std::thread u([&] { other = b.Arrive("jobs/k/1/b", "m1", 2, {}, later, "host1"); });
  ASSERT_TRUE(clock.WaitForWaiters(2));
  // Job j has room for one more, then it is full for every caller.
  absl::Status third;
  std::thread v([&] { third = b.Arrive("jobs/j/1/c", "m0", 2, {}, later, "host2"); });
  ASSERT_TRUE(clock.WaitForWaiters(3));
  absl::Status full = b.Arrive("jobs/j/1/d", "m0", 2, {}, later, "host3");
  EXPECT_TRUE(absl::IsResourceExhausted(full)) << full;
  EXPECT_THAT(full.message(), HasSubstr("job j"));
  EXPECT_THAT(full.message(), HasSubstr("--max_waiting_calls_per_job"));
  // An arrival that completes a barrier does not wait, so it is never refused.
  EXPECT_TRUE(b.Arrive("jobs/j/1/a", "m1", 2, {}, clock.Now(), "host3").ok());
  EXPECT_TRUE(b.Arrive("jobs/k/1/b", "m0", 2, {}, clock.Now(), "host3").ok());
  EXPECT_TRUE(b.Arrive("jobs/j/1/c", "m1", 2, {}, clock.Now(), "host3").ok());
  t.join();
  u.join();
  v.join();
  EXPECT_TRUE(first.ok()) << first;
  EXPECT_TRUE(other.ok()) << other;
  EXPECT_TRUE(third.ok()) << third;
  // The refused member did not count: with the room back, d still needs two.
  EXPECT_TRUE(absl::IsDeadlineExceeded(b.Arrive("jobs/j/1/d", "m1", 2, {}, clock.Now())));
}

TEST(BarriersTest, LongWaitsAreClampedToTheMaximum) {
  FakeClock clock;
  Barriers b(&clock, BarrierLimits{.waits = {.max_wait = absl::Seconds(5)}});
  absl::Status s;
  std::thread t([&] { s = b.Arrive("x", "a", 2, {}, clock.Now() + absl::Hours(24), "host0"); });
  ASSERT_TRUE(clock.WaitForWaiters(1));
  clock.Advance(absl::Seconds(5));
  t.join();
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("--max_wait_ms"));
}

TEST(BarriersTest, ShutdownWakesWaiters) {
  FakeClock clock;
  Barriers b(&clock);
  absl::Status s;
  std::thread t([&] { s = b.Arrive("w", "a", 2, {}, clock.Now() + absl::Hours(1)); });
  ASSERT_TRUE(clock.WaitForWaiters(1));
  b.Shutdown();
  t.join();
  EXPECT_TRUE(absl::IsUnavailable(s));
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep
