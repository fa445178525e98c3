#include "collectives/nccl/nccl_bootstrap.h"

#include <thread>

#include "collectives/in_memory_store.h"
#include "collectives/nccl/fake_nccl_api.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::collectives::nccl {
namespace {

using ::testing::HasSubstr;

TEST(NcclBootstrapTest, RankZeroPublishesAndTheOthersReadTheSameId) {
  InMemoryStore store;
  FakeNcclApi api;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  absl::StatusOr<std::string> r1, r2;
  // The readers start first: they wait for rank 0.
  std::thread t1([&] { r1 = ExchangeUniqueId(store, api, 1, "nccl_id", deadline); });
  std::thread t2([&] { r2 = ExchangeUniqueId(store, api, 2, "nccl_id", deadline); });
  absl::StatusOr<std::string> r0 = ExchangeUniqueId(store, api, 0, "nccl_id", deadline);
  t1.join();
  t2.join();
  ASSERT_TRUE(r0.ok()) << r0.status();
  ASSERT_TRUE(r1.ok()) << r1.status();
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(r0->size(), kNcclUniqueIdBytes);
  EXPECT_EQ(*r1, *r0);
  EXPECT_EQ(*r2, *r0);
}

TEST(NcclBootstrapTest, MissingIdNamesTheKeyAndRankZero) {
  InMemoryStore store;
  FakeNcclApi api;
  absl::Status s =
      ExchangeUniqueId(store, api, 3, "nccl_id", absl::Now() + absl::Milliseconds(20)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank 3: waiting for rank 0's NCCL unique id"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("nccl_id"));
}

TEST(NcclBootstrapTest, ForeignValueIsRefused) {
  InMemoryStore store;
  FakeNcclApi api;
  ASSERT_TRUE(store.Set("nccl_id", "not an id").ok());
  absl::Status s =
      ExchangeUniqueId(store, api, 1, "nccl_id", absl::Now() + absl::Seconds(5)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("under nccl_id is not an NCCL unique id"));
}

TEST(NcclBootstrapTest, SecondRankZeroInTheSameAttemptIsRefused) {
  InMemoryStore store;
  FakeNcclApi api;
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  ASSERT_TRUE(ExchangeUniqueId(store, api, 0, "nccl_id", deadline).ok());
  absl::Status s = ExchangeUniqueId(store, api, 0, "nccl_id", deadline).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank 0: publishing the NCCL unique id"));
}

}  // namespace
}  // namespace lockstep::collectives::nccl
