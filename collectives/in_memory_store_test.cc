#include "collectives/in_memory_store.h"

#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

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
  EXPECT_EQ(store.Set("a", "2").code(), absl::StatusCode::kAlreadyExists);
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
  clock.Advance(absl::Seconds(6));
  getter.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(status.message().find("missing"), absl::string_view::npos);
}

TEST(InMemoryStoreTest, AbortWakesBlockedGet) {
  InMemoryStore store;
  absl::Status status;
  std::thread getter([&] { status = store.Get("k", absl::Now() + absl::Seconds(30)).status(); });
  store.Abort();
  getter.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(store.Set("x", "y").code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep
