#include "worker/coordinator_store.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/fake_worker_service_client.h"

namespace lockstep {
namespace worker {
namespace {

using ::testing::HasSubstr;

TEST(CoordinatorStoreTest, KeysAreScopedByPrefix) {
  FakeClock clock;
  FakeWorkerServiceClient client(&clock);
  CoordinatorStore a(&client, "job-1/attempt-0", &clock);
  CoordinatorStore b(&client, "job-1/attempt-1", &clock);
  ASSERT_TRUE(a.Set("rank0/addr", "h:1").ok());
  EXPECT_EQ(client.keys().count("job-1/attempt-0/rank0/addr"), 1u);
  auto v = a.Get("rank0/addr", clock.Now());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "h:1");
  // Another attempt does not see it.
  EXPECT_TRUE(absl::IsDeadlineExceeded(b.Get("rank0/addr", clock.Now()).status()));
}

TEST(CoordinatorStoreTest, SetIsWriteOnce) {
  FakeClock clock;
  FakeWorkerServiceClient client(&clock);
  CoordinatorStore s(&client, "j/0", &clock);
  ASSERT_TRUE(s.Set("k", "1").ok());
  EXPECT_TRUE(absl::IsAlreadyExists(s.Set("k", "2")));
}

TEST(CoordinatorStoreTest, GetWaitsInSlicesUntilDeadlineAndNamesKey) {
  FakeClock clock;
  FakeWorkerServiceClient client(&clock);  // a missing key advances the clock by the slice
  CoordinatorStore s(&client, "j/0", &clock, absl::Milliseconds(100));
  auto v = s.Get("nccl_id", clock.Now() + absl::Seconds(1));
  EXPECT_TRUE(absl::IsDeadlineExceeded(v.status()));
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("j/0/nccl_id"));
  EXPECT_EQ(client.calls("GetKey"), 10);
}

TEST(CoordinatorStoreTest, KeyPublishedDuringWaitIsReturned) {
  FakeClock clock;
  FakeWorkerServiceClient client(&clock);
  CoordinatorStore s(&client, "j/0", &clock, absl::Milliseconds(100));
  client.on_get_key = [&](const std::string& key) {
    if (client.calls("GetKey") == 3) client.SetKey(key, "late", false).IgnoreError();
  };
  auto v = s.Get("k", clock.Now() + absl::Seconds(5));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "late");
}

TEST(CoordinatorStoreTest, AbortStopsPendingAndLaterCalls) {
  FakeClock clock;
  FakeWorkerServiceClient client(&clock);
  CoordinatorStore s(&client, "j/0", &clock, absl::Milliseconds(100));
  client.on_get_key = [&](const std::string&) {
    if (client.calls("GetKey") == 2) s.Abort();
  };
  auto v = s.Get("k", clock.Now() + absl::Seconds(5));
  EXPECT_TRUE(absl::IsAborted(v.status())) << v.status();
  EXPECT_TRUE(absl::IsAborted(s.Set("k", "v")));
}

TEST(CoordinatorStoreTest, DeadlineInThePastAsksOnceAndAnswers) {
  FakeClock clock;
  FakeWorkerServiceClient client(&clock);
  CoordinatorStore s(&client, "j/0", &clock);
  EXPECT_TRUE(absl::IsDeadlineExceeded(s.Get("k", clock.Now()).status()));
  EXPECT_EQ(client.calls("GetKey"), 1);
}

}  // namespace
}  // namespace worker
}  // namespace lockstep
