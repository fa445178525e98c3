#include "common/subprocess.h"

#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

TEST(SubprocessTest, RunsWithEnvAndLogFile) {
  std::string log = absl::StrCat(getenv("TEST_TMPDIR"), "/echo.log");
  SubprocessOptions o;
  o.argv = {"/bin/sh", "-c", "echo \"$GREETING\"; exit 3"};
  o.env = {{"GREETING", "hello"}};
  o.log_file = log;
  auto p = Subprocess::Start(o);
  ASSERT_TRUE(p.ok()) << p.status();
  auto status = (*p)->Wait(Soon());
  ASSERT_TRUE(status.ok());
  EXPECT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), 3);
  std::ifstream f(log);
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(ss.str(), "hello\n");
}

TEST(SubprocessTest, StopEscalatesToKill) {
  // The child ignores SIGTERM (an ignored signal stays ignored across exec) and says so
  // by creating a file, so SIGTERM cannot arrive before the trap is set.
  std::string mark = absl::StrCat(getenv("TEST_TMPDIR"), "/trap_set");
  SubprocessOptions o;
  o.argv = {"/bin/sh", "-c", absl::StrCat("trap '' TERM; touch ", mark, "; exec sleep 30")};
  auto p = Subprocess::Start(o);
  ASSERT_TRUE(p.ok());
  absl::Time limit = Soon();
  while (access(mark.c_str(), F_OK) != 0 && absl::Now() < limit) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_TRUE((*p)->running());
  int status = (*p)->Stop(absl::Milliseconds(200));
  ASSERT_TRUE(WIFSIGNALED(status)) << DescribeWaitStatus(status);
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_FALSE((*p)->running());
}

TEST(SubprocessTest, MissingProgramIsNotFound) {
  SubprocessOptions o;
  o.argv = {"/nonexistent/lockstepd"};
  EXPECT_TRUE(absl::IsNotFound(Subprocess::Start(o).status()));
}

TEST(SubprocessTest, WaitTimesOutAndDestructorReaps) {
  SubprocessOptions o;
  o.argv = {"/bin/sleep", "30"};
  auto p = Subprocess::Start(o);
  ASSERT_TRUE(p.ok());
  pid_t pid = (*p)->pid();
  EXPECT_TRUE(absl::IsDeadlineExceeded((*p)->Wait(absl::Now()).status()));
  p->reset();                                     // SIGKILL + reap
  EXPECT_EQ(waitpid(pid, nullptr, WNOHANG), -1);  // already reaped: no such child
}

}  // namespace
}  // namespace lockstep
