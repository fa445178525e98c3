#include "common/file_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

class FileUtilTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_EQ(::mkdir(dir_.c_str(), 0755), 0);
  }
  std::string dir_;
};

TEST_F(FileUtilTest, ExistingOrCreatableDirectoryPassesAndNothingIsCreated) {
  EXPECT_TRUE(CheckDirWritableWithoutCreating(dir_, "checkpoint.dir").ok());
  const std::string missing = dir_ + "/a/b/c";
  EXPECT_TRUE(CheckDirWritableWithoutCreating(missing, "checkpoint.dir").ok());
  EXPECT_TRUE(CheckDirWritableWithoutCreating(missing + "/", "checkpoint.dir").ok());
  EXPECT_FALSE(Exists(dir_ + "/a"));
}

TEST_F(FileUtilTest, AFileOnThePathIsRefusedNamingTheField) {
  const std::string file = dir_ + "/file";
  std::ofstream(file) << "x";
  absl::Status s = CheckDirWritableWithoutCreating(file, "summaries.dir");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              StartsWith("summaries.dir: directory '" + file + "' is not writable"));
  EXPECT_THAT(s.message(), HasSubstr("exists and is not a directory"));
  s = CheckDirWritableWithoutCreating(file + "/ckpt/x", "checkpoint.dir");
  EXPECT_THAT(std::string(s.message()), StartsWith("checkpoint.dir: "));
  EXPECT_THAT(s.message(), HasSubstr("'" + file + "' exists and is not a directory"));
}

TEST_F(FileUtilTest, ADanglingLinkIsRefused) {
  ASSERT_EQ(::symlink((dir_ + "/nowhere").c_str(), (dir_ + "/link").c_str()), 0);
  absl::Status s = CheckDirWritableWithoutCreating(dir_ + "/link/ckpt", "checkpoint.dir");
  EXPECT_THAT(s.message(), HasSubstr("is a link to nothing"));
  EXPECT_FALSE(Exists(dir_ + "/nowhere"));
}

TEST_F(FileUtilTest, AReadOnlyParentIsRefused) {
  const std::string ro = dir_ + "/ro";
  ASSERT_EQ(::mkdir(ro.c_str(), 0555), 0);
  absl::Status s = CheckDirWritableWithoutCreating(ro + "/ckpt", "checkpoint.dir");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("cannot create it in '" + ro + "'"));
  absl::Status itself = CheckDirWritableWithoutCreating(ro, "checkpoint.dir");
  EXPECT_EQ(itself.code(), absl::StatusCode::kInvalidArgument) << itself;
  EXPECT_THAT(itself.message(),
              HasSubstr("checkpoint.dir: directory '" + ro + "' is not writable"));
}

TEST_F(FileUtilTest, ProcIsRefusedEvenForRoot) {
  absl::Status s = CheckDirWritableWithoutCreating("/proc/lockstep-probe/ckpt", "checkpoint.dir");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("cannot create it in '/proc'"));
}

TEST_F(FileUtilTest, EmptyPathIsRefused) {
  EXPECT_THAT(std::string(CheckDirWritableWithoutCreating("", "checkpoint.dir").message()),
              StartsWith("checkpoint.dir: "));
}

}  // namespace
}  // namespace lockstep
