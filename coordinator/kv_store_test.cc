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

TEST(KvStoreTest, WaitingGetsAreLimitedPerJob) {
  FakeClock clock;
  KvStore kv(&clock, KvLimits{.waits = {.max_per_job = 1}});
  absl::StatusOr<std::string> first;
  std::thread t([&] { first = kv.Get("k", clock.Now() + absl::Hours(1), "host0"); });
  ASSERT_TRUE(clock.WaitForWaiters(1));
  absl::Status second = kv.Get("other", clock.Now() + absl::Hours(1), "host1").status();
  EXPECT_TRUE(absl::IsResourceExhausted(second)) << second;
  EXPECT_THAT(second.message(), HasSubstr("the workers' common area"));
  EXPECT_THAT(second.message(), HasSubstr("--max_waiting_calls_per_job"));
  ASSERT_TRUE(kv.Set("k", "v", false).ok());
  EXPECT_EQ(kv.Get("k", clock.Now() + absl::Hours(1)).value(), "v");  // there: no wait
  t.join();
  EXPECT_EQ(first.value(), "v");
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

TEST(KvStoreTest, EntriesPerJobAreLimitedAndGivenBackWhenTheAttemptEnds) {
  FakeClock clock;
  KvStore kv(&clock, KvLimits{.max_entries_per_job = 2});
  ASSERT_TRUE(kv.Set("jobs/job-1/1/a", "v", false).ok());
  ASSERT_TRUE(kv.Set("jobs/job-1/1/b", "v", false).ok());
  ASSERT_TRUE(kv.Set("jobs/job-1/1/b", "w", true).ok());  // an overwrite adds no entry
  absl::Status full = kv.Set("jobs/job-1/2/c", "v", false);
  EXPECT_TRUE(absl::IsResourceExhausted(full)) << full;
  EXPECT_THAT(full.message(), HasSubstr("job job-1 already holds 2 keys"));
  EXPECT_THAT(full.message(), HasSubstr("--max_kv_entries_per_job"));
  // Another job and the common area have their own room.
  EXPECT_TRUE(kv.Set("jobs/job-2/1/a", "v", false).ok());
  EXPECT_TRUE(kv.Set("shared/a", "v", false).ok());
  EXPECT_TRUE(kv.Set("shared/b", "v", false).ok());
  EXPECT_THAT(kv.Set("shared/c", "v", false).message(), HasSubstr("the workers' common area"));
  EXPECT_EQ(kv.DeletePrefix("jobs/job-1/1/"), 2);
  EXPECT_TRUE(kv.Set("jobs/job-1/2/c", "v", false).ok());
}

TEST(KvStoreTest, BytesPerJobAndSizesAreLimited) {
  FakeClock clock;
  KvStore kv(&clock, KvLimits{.max_key_bytes = 32, .max_value_bytes = 10, .max_bytes_per_job = 40});
  EXPECT_THAT(kv.Set(std::string(33, 'k'), "v", false).message(), HasSubstr("key: 33 bytes"));
  absl::Status big = kv.Set("k", std::string(11, 'v'), false);
  EXPECT_TRUE(absl::IsInvalidArgument(big)) << big;
  EXPECT_THAT(big.message(), HasSubstr("--max_kv_value_bytes"));
  ASSERT_TRUE(kv.Set("jobs/j/1/a", std::string(10, 'v'), false).ok());   // 10 + 10 bytes
  ASSERT_TRUE(kv.Set("jobs/j/1/b", std::string(10, 'v'), false).ok());   // 40 in all
  absl::Status full = kv.Set("jobs/j/1/a", std::string(10, 'w'), true);  // same size: fits
  EXPECT_TRUE(full.ok()) << full;
  full = kv.Set("jobs/j/1/c", "v", false);
  EXPECT_TRUE(absl::IsResourceExhausted(full)) << full;
  EXPECT_THAT(full.message(), HasSubstr("--max_kv_bytes_per_job"));
  EXPECT_EQ(kv.DeletePrefix("jobs/j/"), 2);
  EXPECT_TRUE(kv.Set("jobs/j/1/c", "v", false).ok());
}

TEST(KvStoreTest, WaitsAreLimitedPerCallerSoOneCannotStallAnotherJob) {
  FakeClock clock;
  KvStore kv(&clock, KvLimits{.waits = {.max_per_job = 8, .max_per_caller = 1}});
  absl::StatusOr<std::string> held;
  std::thread t([&] { held = kv.Get("shared/never", clock.Now() + absl::Hours(1), "attacker"); });
  ASSERT_TRUE(clock.WaitForWaiters(1));
  absl::Status more = kv.Get("jobs/own/1/x", clock.Now() + absl::Hours(1), "attacker").status();
  EXPECT_TRUE(absl::IsResourceExhausted(more)) << more;
  EXPECT_THAT(more.message(), HasSubstr("--max_waiting_calls_per_caller"));
  // The victim's rendezvous waits and is answered.
  absl::StatusOr<std::string> victim;
  std::thread u([&] { victim = kv.Get("jobs/v/1/addr", clock.Now() + absl::Hours(1), "host1"); });
  ASSERT_TRUE(clock.WaitForWaiters(2));
  ASSERT_TRUE(kv.Set("jobs/v/1/addr", "h:1", false).ok());
  u.join();
  ASSERT_TRUE(victim.ok()) << victim.status();
  EXPECT_EQ(*victim, "h:1");
  kv.Shutdown();
  t.join();
  EXPECT_TRUE(absl::IsUnavailable(held.status()));
}

TEST(KvStoreTest, LongWaitsAreClampedToTheMaximum) {
  FakeClock clock;
  KvStore kv(&clock, KvLimits{.waits = {.max_wait = absl::Seconds(5)}});
  absl::StatusOr<std::string> v;
  std::thread t([&] { v = kv.Get("k", absl::InfiniteFuture(), "host0"); });
  ASSERT_TRUE(clock.WaitForWaiters(1));
  clock.Advance(absl::Seconds(5));
  t.join();
  EXPECT_TRUE(absl::IsDeadlineExceeded(v.status())) << v.status();
  EXPECT_THAT(v.status().message(), HasSubstr("--max_wait_ms"));
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep
