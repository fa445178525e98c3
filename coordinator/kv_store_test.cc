#include "coordinator/kv_store.h"

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace coordinator {
namespace {

using ::testing::HasSubstr;

TEST(KvStoreTest, SetThenGet) {
  FakeClock clock;
  KvStore kv(&clock);
  ASSERT_TRUE(kv.Set("job/0/addr", "h:1", false).ok());
  auto v = kv.Get("job/0/addr", clock.Now());
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, "h:1");
}

TEST(KvStoreTest, DeletePrefixDropsAnEndedAttemptsKeysOnly) {
  FakeClock clock;
  KvStore kv(&clock);
  for (const char* key :
       {"jobs/job-1/1/a", "jobs/job-1/1/b", "jobs/job-1/10/a", "jobs/job-2/1/a"}) {
    ASSERT_TRUE(kv.Set(key, "v", false).ok());
  }
  EXPECT_EQ(kv.DeletePrefix("jobs/job-1/1/"), 2);
  EXPECT_EQ(kv.size(), 2);
  EXPECT_EQ(kv.Get("jobs/job-1/10/a", clock.Now()).value(), "v");
  EXPECT_TRUE(absl::IsDeadlineExceeded(kv.Get("jobs/job-1/1/a", clock.Now()).status()));
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
  ASSERT_TRUE(clock.WaitForWaiters(1));
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
  ASSERT_TRUE(clock.WaitForWaiters(1));
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
  ASSERT_TRUE(clock.WaitForWaiters(1));
  kv.Shutdown();
  t.join();
  EXPECT_TRUE(absl::IsUnavailable(result.status()));
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep
