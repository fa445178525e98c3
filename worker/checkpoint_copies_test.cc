#include "worker/checkpoint_copies.h"

#include <sys/stat.h>
#include <utime.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace worker {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::string TestDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", info->name());
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// A job folder with one checkpoint file, last written at `seconds` (unix time).
void AddJob(const std::string& state_dir, const std::string& job, long seconds) {
  ::mkdir((state_dir + "/checkpoints").c_str(), 0755);
  const std::string dir = state_dir + "/checkpoints/" + job;
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  ASSERT_TRUE(static_cast<bool>(std::ofstream(dir + "/ckpt-0000000010.lsckpt") << "bytes"));
  struct utimbuf times = {seconds, seconds};
  ASSERT_EQ(::utime(dir.c_str(), &times), 0);
}

TEST(PruneCheckpointCopiesTest, KeepsTheStartingJobAndTheNewestOthers) {
  const std::string state = TestDir();
  AddJob(state, "job-000001@1", 1000);
  AddJob(state, "job-000003@3", 3000);
  AddJob(state, "job-000002@2", 2000);
  AddJob(state, "job-000004@4", 500);  // the starting job: kept however old
  absl::StatusOr<std::vector<std::string>> deleted =
      PruneCheckpointCopies(state, "job-000004@4", 1);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  const std::string root = state + "/checkpoints/";
  EXPECT_THAT(*deleted, ElementsAre(root + "job-000001@1", root + "job-000002@2"));
  EXPECT_FALSE(Exists(root + "job-000001@1"));
  EXPECT_FALSE(Exists(root + "job-000002@2"));
  EXPECT_TRUE(Exists(root + "job-000003@3/ckpt-0000000010.lsckpt"));
  EXPECT_TRUE(Exists(root + "job-000004@4/ckpt-0000000010.lsckpt"));
  // 0: only the starting job's copies stay.
  deleted = PruneCheckpointCopies(state, "job-000004@4", 0);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_THAT(*deleted, ElementsAre(root + "job-000003@3"));
  EXPECT_TRUE(Exists(root + "job-000004@4"));
}

TEST(PruneCheckpointCopiesTest, NothingToDoWithoutCopies) {
  absl::StatusOr<std::vector<std::string>> deleted = PruneCheckpointCopies(TestDir(), "j", 0);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_THAT(*deleted, IsEmpty());
}

}  // namespace
}  // namespace worker
}  // namespace lockstep
