#include "coordinator/kv_store.h"

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace coordinator {
namespace {

using ::testing::HasSubstr;

// Waits (really, bounded) until `n` threads block on the fake clock.
void AwaitWaiters(FakeClock& clock, int n) {
  absl::Time limit = absl::Now() + absl::Seconds(10);
  while (clock.waiters() < n && absl::Now() < limit) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_GE(clock.waiters(), n);
}

TEST(KvStoreTest, SetThenGet) {
  FakeClock clock;
  KvStore kv(&clock);
  ASSERT_TRUE(kv.Set("job/0/addr", "h:1", false).ok());
  auto v = kv.Get("job/0/addr", clock.Now());
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, "h:1");
}

TEST(KvStoreTest, WriteOnceUnlessOverwrite) {
  FakeClock clock;
  KvStore kv(&clock);
  ASSERT_TRUE(kv.Set("k", "a", false).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(kv.Set("k", "b", false)));
  ASSERT_TRUE(kv.Set("k", "c", true).ok());
  EXPECT_EQ(*kv.Get("k", clock.Now()), "c");
  EXPECT_TRUE(absl::IsInvalidArgument(kv.Set("", "x", false)));
}

TEST(KvStoreTest, GetTimesOutAtDeadlineNamingKey) {
  FakeClock clock;
  KvStore kv(&clock);
  absl::StatusOr<std::string> result;
  std::thread t([&] { result = kv.Get("job/0/nccl_id", clock.Now() + absl::Seconds(5)); });
  AwaitWaiters(clock, 1);
  clock.Advance(absl::Seconds(4));
  clock.Advance(absl::Seconds(1));
  t.join();
  EXPECT_TRUE(absl::IsDeadlineExceeded(result.status()));
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("job/0/nccl_id"));
}

TEST(KvStoreTest, SetWakesWaiter) {
  FakeClock clock;
  KvStore kv(&clock);
  absl::StatusOr<std::string> result;
  std::thread t([&] { result = kv.Get("k", clock.Now() + absl::Seconds(5)); });
  AwaitWaiters(clock, 1);
  ASSERT_TRUE(kv.Set("k", "v", false).ok());
  t.join();
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, "v");
}

TEST(KvStoreTest, ShutdownWakesWaiter) {
  FakeClock clock;
  KvStore kv(&clock);
  absl::StatusOr<std::string> result;
  std::thread t([&] { result = kv.Get("k", clock.Now() + absl::Hours(1)); });
  AwaitWaiters(clock, 1);
  kv.Shutdown();
  t.join();
  EXPECT_TRUE(absl::IsUnavailable(result.status()));
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep
