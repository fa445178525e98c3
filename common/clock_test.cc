#include "common/clock.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace lockstep {
namespace {

// Waits (really) until `pred` holds or 10 s pass; tests never sleep for a fixed time.
template <typename Pred>
bool Eventually(Pred pred) {
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    if (pred()) return true;
    absl::SleepFor(absl::Microseconds(200));
  }
  return pred();
}

TEST(FakeClockTest, OnlyMovesWhenAdvanced) {
  FakeClock clock;
  absl::Time t0 = clock.Now();
  EXPECT_EQ(clock.Now(), t0);
  clock.Advance(absl::Seconds(3));
  EXPECT_EQ(clock.Now() - t0, absl::Seconds(3));
}

TEST(FakeClockTest, SleepReturnsOnlyAfterAdvance) {
  FakeClock clock;
  std::atomic<bool> woke{false};
  std::thread t([&] {
    clock.SleepFor(absl::Seconds(5));
    woke = true;
  });
  ASSERT_TRUE(Eventually([&] { return clock.waiters() == 1; }));
  clock.Advance(absl::Seconds(4));
  EXPECT_FALSE(woke.load());
  clock.Advance(absl::Seconds(1));
  t.join();
  EXPECT_TRUE(woke.load());
}

TEST(FakeClockTest, WaitUntilTimesOutOnFakeDeadline) {
  FakeClock clock;
  absl::Mutex mu;
  bool flag = false;
  std::atomic<bool> done{false};
  bool result = true;
  std::thread t([&] {
    absl::MutexLock l(&mu);
    result = clock.WaitUntil(&mu, absl::Condition(&flag), clock.Now() + absl::Seconds(2));
    done = true;
  });
  ASSERT_TRUE(Eventually([&] { return clock.waiters() == 1; }));
  clock.Advance(absl::Seconds(2));
  t.join();
  EXPECT_TRUE(done.load());
  EXPECT_FALSE(result);
}

TEST(FakeClockTest, WaitUntilSeesConditionBeforeDeadline) {
  FakeClock clock;
  absl::Mutex mu;
  bool flag = false;
  bool result = false;
  std::thread t([&] {
    absl::MutexLock l(&mu);
    result = clock.WaitUntil(&mu, absl::Condition(&flag), clock.Now() + absl::Seconds(2));
  });
  ASSERT_TRUE(Eventually([&] { return clock.waiters() == 1; }));
  {
    absl::MutexLock l(&mu);
    flag = true;
  }
  t.join();
  EXPECT_TRUE(result);
}

TEST(FakeClockTest, WaitForWaitersSeesASleeper) {
  FakeClock clock;
  EXPECT_FALSE(clock.WaitForWaiters(1, absl::Milliseconds(1)));
  std::thread t([&] { clock.SleepFor(absl::Seconds(5)); });
  ASSERT_TRUE(clock.WaitForWaiters(1));
  clock.Advance(absl::Seconds(5));
  t.join();
  EXPECT_EQ(clock.waiters(), 0);
}

TEST(RealClockTest, WaitUntilHonoursDeadline) {
  absl::Mutex mu;
  bool flag = false;
  absl::MutexLock l(&mu);
  absl::Time start = absl::Now();
  EXPECT_FALSE(Clock::Real()->WaitUntil(&mu, absl::Condition(&flag),
                                        Clock::Real()->Now() + absl::Milliseconds(20)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(19));
}

}  // namespace
}  // namespace lockstep
