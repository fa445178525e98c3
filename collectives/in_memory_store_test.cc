#include "collectives/in_memory_store.h"

#include <thread>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

using ::testing::HasSubstr;

TEST(InMemoryStoreTest, SetThenGet) {
  InMemoryStore store;
  ASSERT_TRUE(store.Set("a", "1").ok());
  auto v = store.Get("a", absl::Now() + absl::Seconds(1));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, "1");
}

TEST(InMemoryStoreTest, KeysAreWriteOnce) {
  InMemoryStore store;
  ASSERT_TRUE(store.Set("a", "1").ok());
  absl::Status again = store.Set("a", "2");
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  EXPECT_THAT(std::string(again.message()), HasSubstr("'a'"));
  auto v = store.Get("a", absl::Now() + absl::Seconds(1));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "1");
}

TEST(InMemoryStoreTest, GetWaitsForSetFromAnotherThread) {
  InMemoryStore store;
  std::thread setter([&] { ASSERT_TRUE(store.Set("k", "v").ok()); });
  auto v = store.Get("k", absl::Now() + absl::Seconds(10));
  setter.join();
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, "v");
}

TEST(InMemoryStoreTest, MissingKeyHitsDeadlineOnFakeClock) {
  FakeClock clock;
  InMemoryStore store(&clock);
  absl::Status status;
  std::thread getter(
      [&] { status = store.Get("missing", clock.Now() + absl::Seconds(5)).status(); });
  // Wait (bounded) for the getter to block, then move time past its deadline.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (clock.waiters() == 0 && absl::Now() < give_up) std::this_thread::yield();
  ASSERT_EQ(clock.waiters(), 1) << "the getter never blocked";
  clock.Advance(absl::Seconds(6));
  getter.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(status.message().find("missing"), absl::string_view::npos);
}

// Abort() reaches a Get() that is already blocked: the fake clock says when the getter
// waits (its deadline never comes, since the fake time never moves), and only then is the
// store aborted.
TEST(InMemoryStoreTest, AbortWakesBlockedGet) {
  FakeClock clock;
  InMemoryStore store(&clock);
  absl::Status status;
  std::thread getter([&] { status = store.Get("k", clock.Now() + absl::Seconds(30)).status(); });
  ASSERT_TRUE(clock.WaitForWaiters(1)) << "the getter never blocked";
  store.Abort();
  getter.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("store aborted; Get(k)"));
  absl::Status set = store.Set("x", "y");
  EXPECT_EQ(set.code(), absl::StatusCode::kAborted) << set;
  EXPECT_THAT(std::string(set.message()), HasSubstr("Set(x)"));
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep
