#include "collectives/file_store.h"

#include <cstdlib>
#include <thread>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  const char* d = std::getenv("TEST_TMPDIR");
  return d != nullptr ? d : "/tmp";
}

TEST(FileStoreTest, SetGetWriteOnceAndBinaryKeys) {
  FileStore a(TempDir()), b(TempDir());
  ASSERT_TRUE(a.Set("job/1/tcp/0", std::string("h\0st:1", 6)).ok());
  auto v = b.Get("job/1/tcp/0", absl::Now() + absl::Seconds(1));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, std::string("h\0st:1", 6));
  absl::Status again = b.Set("job/1/tcp/0", "x");
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  EXPECT_THAT(std::string(again.message()), HasSubstr("'job/1/tcp/0' is already set"));
  // The refused write changed nothing.
  auto still = a.Get("job/1/tcp/0", absl::Now() + absl::Seconds(1));
  ASSERT_TRUE(still.ok()) << still.status();
  EXPECT_EQ(*still, std::string("h\0st:1", 6));
}

TEST(FileStoreTest, GetWaitsAndTimesOut) {
  FileStore store(TempDir());
  std::thread setter([&] { ASSERT_TRUE(store.Set("later", "v").ok()); });
  auto v = store.Get("later", absl::Now() + absl::Seconds(10));
  setter.join();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "v");
  absl::Status never = store.Get("never", absl::Now() + absl::Milliseconds(20)).status();
  EXPECT_EQ(never.code(), absl::StatusCode::kDeadlineExceeded) << never;
  EXPECT_THAT(std::string(never.message()), HasSubstr("store key 'never' not set"));
  store.Abort();
  absl::Status aborted = store.Get("later", absl::Now()).status();
  EXPECT_EQ(aborted.code(), absl::StatusCode::kAborted) << aborted;
  EXPECT_THAT(std::string(aborted.message()), HasSubstr("Get(later)"));
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep
