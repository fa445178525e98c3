#include "common/file_util.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
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
}

// What CheckWritable answered in a child process.
struct ChildCheck {
  bool ran = false;  // the child dropped its capabilities, checked and reported
  absl::StatusCode code = absl::StatusCode::kUnknown;
  std::string message;
};

// Runs CheckWritable(dir, field) in a forked child without CAP_DAC_OVERRIDE and
// CAP_DAC_READ_SEARCH (dropped from its bounding, effective, permitted and inheritable
// sets), so that permission bits bind even when the test runs as root, as CI does. Without
// these capabilities root is only the owner of what it made.
ChildCheck CheckWritableWithoutDacOverride(const std::string& dir, const std::string& field) {
  ChildCheck out;
  int fds[2];
  if (::pipe(fds) != 0) return out;
  pid_t pid = ::fork();
  if (pid < 0) return out;
  if (pid == 0) {
    ::close(fds[0]);
    // Only a process with CAP_SETPCAP may shrink its bounding set; the effective set is what
    // the check depends on.
    for (int cap : {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH}) ::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
    if (::syscall(SYS_capget, &header, data) != 0) ::_exit(2);
    for (int cap : {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH}) {
      const uint32_t bit = 1u << (cap % 32);
      data[cap / 32].effective &= ~bit;
      data[cap / 32].permitted &= ~bit;
      data[cap / 32].inheritable &= ~bit;
    }
    if (::syscall(SYS_capset, &header, data) != 0) ::_exit(3);
    absl::Status status = CheckWritable(dir, field);
    const std::string report = absl::StrCat(static_cast<int>(status.code()), " ", status.message());
    const bool written =
        ::write(fds[1], report.data(), report.size()) == static_cast<ssize_t>(report.size());
    ::_exit(written ? 0 : 4);
  }
  ::close(fds[1]);
  std::string report;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof(buf))) > 0) report.append(buf, n);
  ::close(fds[0]);
  int wstatus = 0;
  if (::waitpid(pid, &wstatus, 0) != pid || !WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    out.message = absl::StrCat("child wait status ", wstatus, ": ", report);
    return out;
  }
  const size_t space = report.find(' ');
  int code = 0;
  if (space == std::string::npos || !absl::SimpleAtoi(report.substr(0, space), &code)) {
    out.message = absl::StrCat("unreadable report: ", report);
    return out;
  }
  out.ran = true;
  out.code = static_cast<absl::StatusCode>(code);
  out.message = report.substr(space + 1);
  return out;
}

// A read-only directory is refused, as root too: the check runs in a child that has given up
// the capabilities with which root ignores permission bits. A writable directory, checked the
// same way, is accepted (the child itself can write).
TEST(FileUtilTest, CheckWritableRefusesAReadOnlyDirectoryEvenForRoot) {
  std::string rw = TempDir("writable_for_child");
  ASSERT_TRUE(MakeDirs(rw).ok());
  ChildCheck ok = CheckWritableWithoutDacOverride(rw, "summaries.dir");
  ASSERT_TRUE(ok.ran) << ok.message;
  EXPECT_EQ(ok.code, absl::StatusCode::kOk) << ok.message;

  std::string ro = TempDir("read_only");
  ASSERT_TRUE(MakeDirs(ro).ok());
  ASSERT_EQ(::chmod(ro.c_str(), 0555), 0);
  ChildCheck refused = CheckWritableWithoutDacOverride(ro, "summaries.dir");
  ::chmod(ro.c_str(), 0755);
  ASSERT_TRUE(refused.ran) << refused.message;
  EXPECT_EQ(refused.code, absl::StatusCode::kInvalidArgument) << refused.message;
  EXPECT_THAT(refused.message, HasSubstr("summaries.dir"));
  EXPECT_THAT(refused.message, HasSubstr(ro));
  EXPECT_THAT(refused.message, HasSubstr("is not writable"));
}

}  // namespace
}  // namespace lockstep
