#include "collectives/file_store.h"

#include <cstdlib>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace collectives {
namespace {

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
  EXPECT_EQ(b.Set("job/1/tcp/0", "x").code(), absl::StatusCode::kAlreadyExists);
}

TEST(FileStoreTest, GetWaitsAndTimesOut) {
  FileStore store(TempDir());
  std::thread setter([&] { ASSERT_TRUE(store.Set("later", "v").ok()); });
  auto v = store.Get("later", absl::Now() + absl::Seconds(10));
  setter.join();
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(store.Get("never", absl::Now() + absl::Milliseconds(20)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  store.Abort();
  EXPECT_EQ(store.Get("later", absl::Now()).status().code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace collectives
}  // namespace lockstep
