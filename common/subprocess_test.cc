#include "common/subprocess.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
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

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(SubprocessTest, StdoutAndStderrGoToFilesOfTheirOwn) {
  const std::string dir = getenv("TEST_TMPDIR");
  SubprocessOptions o;
  o.argv = {"/bin/sh", "-c", "echo '{\"bytes\": 8}'; echo 'a message' >&2"};
  o.stdout_file = dir + "/peer.out";
  o.stderr_file = dir + "/peer.err";
  auto p = Subprocess::Start(o);
  ASSERT_TRUE(p.ok()) << p.status();
  auto status = (*p)->Wait(Soon());
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(DescribeWaitStatus(*status), "exit 0");
  EXPECT_EQ(ReadFile(o.stdout_file), "{\"bytes\": 8}\n");
  EXPECT_EQ(ReadFile(o.stderr_file), "a message\n");
}

TEST(SubprocessTest, AnUnopenableStreamFileIsNamed) {
  SubprocessOptions o;
  o.argv = {"/bin/true"};
  o.stderr_file = "/nonexistent/dir/peer.err";
  absl::Status s = Subprocess::Start(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find("stderr_file /nonexistent/dir/peer.err"), std::string::npos) << s;
}

// A launcher (mpirun) started in a group of its own and what it started (here a `sleep` in
// the background) are both ended by SignalGroup. This test process is made a subreaper, so
// the orphaned sleep becomes its child and its end can be seen by waitpid.
TEST(SubprocessTest, SignalGroupReachesWhatTheChildStarted) {
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  const std::string pid_file = absl::StrCat(getenv("TEST_TMPDIR"), "/grandchild.pid");
  SubprocessOptions o;
  o.argv = {"/bin/sh", "-c",
            absl::StrCat("sleep 30 & echo $! > ", pid_file, ".tmp; mv ", pid_file, ".tmp ",
                         pid_file, "; wait")};
  o.new_process_group = true;
  auto p = Subprocess::Start(o);
  ASSERT_TRUE(p.ok()) << p.status();
  const absl::Time limit = Soon();
  while (access(pid_file.c_str(), F_OK) != 0 && absl::Now() < limit) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  const pid_t grandchild = std::atoi(ReadFile(pid_file).c_str());
  ASSERT_GT(grandchild, 0);
  (*p)->SignalGroup(SIGKILL);
  auto status = (*p)->Wait(Soon());
  ASSERT_TRUE(status.ok());
  ASSERT_TRUE(WIFSIGNALED(*status)) << DescribeWaitStatus(*status);
  EXPECT_EQ(WTERMSIG(*status), SIGKILL);
  int grandchild_status = 0;
  pid_t got = 0;
  while (got != grandchild && absl::Now() < limit) {
    got = waitpid(grandchild, &grandchild_status, WNOHANG);  // ECHILD until it is reparented
    if (got != grandchild) absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(got, grandchild) << "the background sleep outlived its group's SIGKILL";
  EXPECT_TRUE(WIFSIGNALED(grandchild_status));
  EXPECT_EQ(WTERMSIG(grandchild_status), SIGKILL);
}

}  // namespace
}  // namespace lockstep
