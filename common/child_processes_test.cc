// ChildProcesses: a group that succeeds together, fails on its first failed child (the others
// killed), and is killed whole at its deadline; every child reaped in each case.
#include "common/child_processes.h"

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

TEST(ChildProcessesTest, AllExitZero) {
  ChildProcesses children;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(children.Fork("rank", [] { return 0; }).ok());
  }
  EXPECT_TRUE(children.WaitAll(absl::Seconds(30)).ok());
}

TEST(ChildProcessesTest, FirstFailureNamesTheChildAndStopsTheOthers) {
  ChildProcesses children;
  // pause() returns only on a signal: this child ends only when it is killed.
  absl::StatusOr<pid_t> stuck = children.Fork("rank 0", [] {
    pause();
    return 0;
  });
  ASSERT_TRUE(stuck.ok());
  ASSERT_TRUE(children.Fork("rank 1", [] { return 3; }).ok());
  const absl::Time start = absl::Now();
  absl::Status s = children.WaitAll(absl::Seconds(30));
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));  // not the deadline: the failure
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("rank 1"));
  EXPECT_THAT(s.message(), HasSubstr("exit 3"));  // common/subprocess.h's DescribeWaitStatus
  EXPECT_EQ(kill(*stuck, 0), -1);                 // reaped: the pid is gone
}

TEST(ChildProcessesTest, DeadlineKillsEveryChild) {
  ChildProcesses children;
  absl::StatusOr<pid_t> stuck = children.Fork("rank 0", [] {
    pause();
    return 0;
  });
  ASSERT_TRUE(stuck.ok());
  absl::Status s = children.WaitAll(absl::Milliseconds(300));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("did not finish within 300ms"));
  EXPECT_EQ(kill(*stuck, 0), -1);
}

TEST(ChildProcessesTest, ExecOfAMissingProgramFails) {
  ChildProcesses children;
  ASSERT_TRUE(children.Exec("missing", {"/nonexistent/program"}).ok());
  absl::Status s = children.WaitAll(absl::Seconds(30));
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("exit 127"));
}

TEST(ChildProcessesTest, ExecWritesStdoutToItsFile) {
  const std::string out = std::string(getenv("TEST_TMPDIR")) + "/rank0.out";
  ChildProcesses children;
  ASSERT_TRUE(children.Exec("rank 0", {"/bin/sh", "-c", "echo EPS 12.5"}, out).ok());
  ASSERT_TRUE(children.WaitAll(absl::Seconds(30)).ok());
  std::ifstream f(out);
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_EQ(text.str(), "EPS 12.5\n");
}

TEST(ChildProcessesTest, ExecNamesAStdoutFileItCannotOpen) {
  ChildProcesses children;
  absl::StatusOr<pid_t> pid = children.Exec("rank 0", {"/bin/true"}, "/nonexistent/dir/rank0.out");
  EXPECT_EQ(pid.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(pid.status().message(), HasSubstr("/nonexistent/dir/rank0.out"));
  EXPECT_TRUE(children.WaitAll(absl::Seconds(1)).ok());  // nothing was started
}

TEST(ChildProcessesTest, KillAllStopsAndReapsEveryChild) {
  ChildProcesses children;
  absl::StatusOr<pid_t> stuck = children.Fork("rank 0", [] {
    pause();
    return 0;
  });
  ASSERT_TRUE(stuck.ok());
  absl::StatusOr<pid_t> sleeping = children.Exec("rank 1", {"/bin/sleep", "30"});
  ASSERT_TRUE(sleeping.ok());
  const absl::Time start = absl::Now();
  children.KillAll();
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_EQ(kill(*stuck, 0), -1);  // reaped: the pids are gone
  EXPECT_EQ(kill(*sleeping, 0), -1);
}

}  // namespace
}  // namespace lockstep
