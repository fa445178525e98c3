#include "worker/chief/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::chief {
namespace {

using ::testing::HasSubstr;

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return std::string(base != nullptr ? base : "/tmp") + "/file_util_test_" + name;
}

TEST(FileUtilTest, MakeDirsCreatesParentsAndIsIdempotent) {
  std::string dir = TempDir("a") + "/b/c";
  ASSERT_TRUE(MakeDirs(dir).ok());
  ASSERT_TRUE(MakeDirs(dir).ok());
  struct stat st;
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
}

TEST(FileUtilTest, WriteReadRoundTrip) {
  std::string dir = TempDir("rw");
  ASSERT_TRUE(MakeDirs(dir).ok());
  std::string path = dir + "/f";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  std::string data(200000, 'x');
  ASSERT_TRUE(WriteAll(fd, data, path).ok());
  ::close(fd);
  ASSERT_TRUE(FsyncDir(dir).ok());
  absl::StatusOr<std::string> back = ReadFileToString(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, data);
  EXPECT_TRUE(absl::IsNotFound(ReadFileToString(dir + "/missing").status()));
}

TEST(FileUtilTest, CheckWritableNamesTheFieldAndTheDirectory) {
  EXPECT_TRUE(CheckWritable(TempDir("w") + "/new/sub", "checkpoint.dir").ok());

  // A directory below a regular file can never be created, even by root.
  std::string file = TempDir("plain_file");
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ::close(fd);
  absl::Status status = CheckWritable(file + "/ckpt", "checkpoint.dir");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("checkpoint.dir"));
  EXPECT_THAT(status.message(), HasSubstr(file + "/ckpt"));

  if (::geteuid() != 0) {  // root ignores permission bits
    std::string ro = TempDir("read_only");
    ASSERT_TRUE(MakeDirs(ro).ok());
    ASSERT_EQ(::chmod(ro.c_str(), 0555), 0);
    status = CheckWritable(ro, "summaries.dir");
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("summaries.dir"));
    ::chmod(ro.c_str(), 0755);
  }
}

}  // namespace
}  // namespace lockstep::chief
