// Runs the peer benchmark programs as a caller would: small sizes, --np 2, and checks
// that stdout holds exactly one well-formed, correct JSON line per size; that bad flags
// fail with a message; and that the watchdog stops a run that takes too long.
#include <stdlib.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/ci_skip.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace {

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
  double seconds = 0;
};

std::string TempDir() {
  const char* dir = getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string Binary(const std::string& name) {
  const char* srcdir = getenv("TEST_SRCDIR");
  EXPECT_NE(srcdir, nullptr) << "run this test with bazel test";
  return absl::StrCat(srcdir == nullptr ? "." : srcdir, "/lockstep/bench/peers/", name);
}

// Runs `command` through the shell, bounded by coreutils `timeout` so a hang fails the
// test instead of stalling it; captures stdout and stderr.
Result RunCommand(const std::string& command, int limit_s = 60) {
  static int counter = 0;
  const std::string err_path = absl::StrCat(TempDir(), "/peers_test_stderr_", ++counter);
  const std::string full = absl::StrCat("timeout -k 5 ", limit_s, " ", command, " 2>", err_path);
  Result result;
  const auto start = std::chrono::steady_clock::now();
  FILE* pipe = popen(full.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.out.append(buffer, n);
  const int status = pclose(pipe);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream err(err_path);
  std::stringstream err_text;
  err_text << err.rdbuf();
  result.err = err_text.str();
  return result;
}

// True when mpirun can start a trivial process here (else the MPI tests are skipped).
bool MpirunWorks(std::string* why) {
  const Result r = RunCommand("mpirun --allow-run-as-root --oversubscribe -np 1 true", 30);
  *why = absl::StrCat("exit code ", r.exit_code, ": ", r.err);
  return r.exit_code == 0;
}

void ExpectCorrectLines(const Result& r, const std::string& impl) {
  ASSERT_EQ(r.exit_code, 0) << "stderr:\n" << r.err;
  const std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  const std::vector<int> want_bytes = {8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
  ASSERT_EQ(lines.size(), want_bytes.size()) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  for (size_t i = 0; i < lines.size(); ++i) {
    SCOPED_TRACE(lines[i]);
    const nlohmann::json j = nlohmann::json::parse(lines[i], nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j["impl"], impl);
    EXPECT_EQ(j["np"], 2);
    EXPECT_EQ(j["bytes"], want_bytes[i]);
    EXPECT_EQ(j["correct"], true);
    EXPECT_EQ(j["iters"], 5);
    EXPECT_GT(j["time_us_p50"].get<double>(), 0);
    EXPECT_GT(j["algbw_gbps"].get<double>(), 0);
    EXPECT_DOUBLE_EQ(j["busbw_gbps"].get<double>(), j["algbw_gbps"].get<double>());  // np=2.
  }
}

class GlooTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GlooTest, PrintsCorrectJsonLines) {
  ExpectCorrectLines(RunCommand(absl::StrCat(Binary("gloo_allreduce"),
                                             " --np 2 --sizes 8:4K --iters 5 --timeout_s 30"
                                             " --algorithm ",
                                             GetParam())),
                     "gloo_" + GetParam());
}

INSTANTIATE_TEST_SUITE_P(Algorithms, GlooTest,
                         ::testing::Values("ring_chunked", "halving_doubling"));

class MpiTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    if (!MpirunWorks(&why)) {
      LS_SKIP_OR_FAIL_UNLESS_CI("Open MPI (mpirun)")
          << "mpirun cannot start a process here (" << why << ")";
    }
  }
};

TEST_P(MpiTest, PrintsCorrectJsonLines) {
  ExpectCorrectLines(
      RunCommand(absl::StrCat(Binary("mpi_allreduce"),
                              " --np 2 --sizes 8:4K --iters 5 --timeout_s 30 --btl ", GetParam())),
      "mpi_" + GetParam());
}

INSTANTIATE_TEST_SUITE_P(Transports, MpiTest, ::testing::Values("vader", "tcp"));

TEST(PeersTest, BadFlagsFailWithAMessage) {
  for (const std::string& program : {Binary("gloo_allreduce"), Binary("mpi_allreduce")}) {
    for (const char* flags : {"--sizes 8:x", "--sizes 64:8", "--np 0", "--iters 0"}) {
      const Result r = RunCommand(absl::StrCat(program, " ", flags));
      EXPECT_NE(r.exit_code, 0) << program << " " << flags;
      EXPECT_TRUE(r.out.empty()) << r.out;
      EXPECT_FALSE(r.err.empty()) << program << " " << flags;
    }
  }
  EXPECT_NE(RunCommand(Binary("gloo_allreduce") + " --algorithm ring").exit_code, 0);
  EXPECT_NE(RunCommand(Binary("mpi_allreduce") + " --btl ib").exit_code, 0);
}

// 64 MiB x 1000 iterations takes far longer than --timeout_s 1: the run must stop soon
// after and fail with a message, leaving nothing behind (pclose returns only once every
// process that inherited stdout, ranks included, has closed it).
void ExpectWatchdogStops(const std::string& program) {
  const Result r =
      RunCommand(program + " --np 2 --sizes 64M --iters 1000 --min_iters 1000 --timeout_s 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "only the test's own timeout stopped it";
  EXPECT_LT(r.seconds, 20);
  EXPECT_FALSE(r.err.empty());
}

TEST(PeersTest, WatchdogStopsALongGlooRun) { ExpectWatchdogStops(Binary("gloo_allreduce")); }

TEST_P(MpiTest, WatchdogStopsALongRun) {
  ExpectWatchdogStops(Binary("mpi_allreduce") + " --btl " + GetParam());
}

}  // namespace
