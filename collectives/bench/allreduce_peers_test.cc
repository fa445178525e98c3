// RunPeer against stand-in peer programs (shell scripts): the JSON lines of one that
// succeeds, the stderr tail of one that fails, and a timeout that kills the launcher and
// what it started, without waiting for them.
#include "collectives/bench/allreduce_peers.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::bench {
namespace {

using ::testing::HasSubstr;

// Writes an executable `program` into a directory of its own and returns the directory.
std::string PeerDir(const std::string& name, const std::string& script) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/fake_allreduce";
  std::ofstream(path) << "#!/bin/sh\n" << script;
  chmod(path.c_str(), 0755);
  return dir;
}

PeerSpec Fake(std::vector<std::string> args = {}) {
  return PeerSpec{"fake_impl", "fake_allreduce", std::move(args)};
}

TEST(RunPeerTest, ReadsTheRowsByMessageSize) {
  const std::string dir = PeerDir("ok", R"(echo "starting $1" >&2
echo "a banner line"
echo '{"bytes": 8, "time_us_p50": 3.5, "busbw_gbps": 0.01, "correct": true}'
echo '{"bytes": 1024, "time_us_p50": 9.0, "busbw_gbps": 0.2, "correct": false}'
)");
  absl::StatusOr<std::map<uint64_t, PeerRow>> rows =
      RunPeer(dir, Fake({"--np"}), absl::Seconds(30));
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_DOUBLE_EQ(rows->at(8).time_us_p50, 3.5);
  EXPECT_TRUE(rows->at(8).correct);
  EXPECT_DOUBLE_EQ(rows->at(1024).busbw_gbps, 0.2);
  EXPECT_FALSE(rows->at(1024).correct);
}

TEST(RunPeerTest, AFailureIsUnavailableWithItsStatusAndStderr) {
  const std::string dir = PeerDir("fails", "echo 'mpirun: no slots' >&2\nexit 3\n");
  absl::Status s = RunPeer(dir, Fake(), absl::Seconds(30)).status();
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("fake_impl failed (exit 3)"));
  EXPECT_THAT(s.message(), HasSubstr("mpirun: no slots"));
}

TEST(RunPeerTest, NoRowsIsUnavailable) {
  const std::string dir = PeerDir("silent", "echo 'nothing to say'\n");
  absl::Status s = RunPeer(dir, Fake(), absl::Seconds(30)).status();
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("printed no rows"));
}

TEST(RunPeerTest, AMissingProgramIsNotFound) {
  absl::Status s = RunPeer("/nonexistent/peers", Fake(), absl::Seconds(30)).status();
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("--peers_dir"));
}

// A launcher that hangs with a rank of its own (a background sleep holding its stdout open):
// RunPeer returns at its timeout, having killed the launcher's whole process group.
TEST(RunPeerTest, ATimeoutKillsTheLauncherAndItsRanks) {
  const std::string dir = PeerDir("hangs", "echo 'rank started' >&2\nsleep 60 &\nsleep 60\n");
  const absl::Time start = absl::Now();
  absl::Status s = RunPeer(dir, Fake(), absl::Milliseconds(500)).status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("fake_impl timed out"));
  EXPECT_THAT(s.message(), HasSubstr("killed by"));
  EXPECT_THAT(s.message(), HasSubstr("rank started"));
}

}  // namespace
}  // namespace lockstep::bench
