// The driver's size parsing and iteration rules, a tiny end-to-end run (2 ranks over shm and
// tcp, no peers) that checks exit status 0 (correct results), the tables of --rounds in both
// --interleave orders, a peer that cannot start, and --help.
#include "collectives/bench/allreduce_bench.h"

#include <cctype>
#include <sstream>
#include <string>
#include <vector>

#include "collectives/bench/allreduce_rank.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace bench {
namespace {

struct Run {
  int status;
  std::string out;  // stdout
};

// RunAllreduceBench on `args` (after the program name), capturing what it prints.
Run RunCaptured(std::vector<const char*> args) {
  args.insert(args.begin(), "allreduce");
  testing::internal::CaptureStdout();
  const int status =
      RunAllreduceBench(static_cast<int>(args.size()), const_cast<char**>(args.data()));
  return {status, testing::internal::GetCapturedStdout()};
}

// How many times `needle` occurs in `text`.
int Occurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// The sum of the "sweeps: ours N" counts over every placement's table.
int OurSweeps(const std::string& out) {
  int sweeps = 0;
  for (size_t at = out.find("sweeps: ours "); at != std::string::npos;
       at = out.find("sweeps: ours ", at + 1)) {
    sweeps += std::stoi(out.substr(at + 13));
  }
  return sweeps;
}

TEST(AllreduceBenchTest, ParsesSizesLikeNcclTests) {
  auto s = ParseSizes("8:64");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, (std::vector<uint64_t>{8, 16, 32, 64}));
  auto m = ParseSizes("1M:4m");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, (std::vector<uint64_t>{1 << 20, 2 << 20, 4 << 20}));
  auto refused = [](const char* sizes, const std::string& words) {
    absl::Status s = ParseSizes(sizes).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << sizes << ": " << s;
    EXPECT_NE(s.message().find(words), absl::string_view::npos) << s << " lacks: " << words;
  };
  refused("7:64", "--sizes: MIN must be a multiple of 4 and <= MAX");
  refused("64", "--sizes is MIN:MAX");
  refused("64:8", "--sizes: MIN must be a multiple of 4 and <= MAX");
}

TEST(AllreduceBenchTest, IterationRules) {
  EXPECT_EQ(WarmupIters(8, 5), 5);
  EXPECT_EQ(WarmupIters(64 << 20, 5), 2);
  EXPECT_EQ(WarmupIters(512 << 20, 5), 1);
  EXPECT_EQ(ChooseTimedIters(10, 0.25, 5, 1000), 1000);
  EXPECT_EQ(ChooseTimedIters(1e6, 0.25, 5, 1000), 5);
  EXPECT_EQ(ChooseTimedIters(1e4, 0.25, 5, 1000), 25);
  EXPECT_EQ(ChooseTimedIters(1e6, 0.25, 5, 3), 3);
}

TEST(AllreduceBenchTest, EndToEndTinyRunIsCorrect) {
  for (const char* transport : {"shm", "tcp"}) {
    const char* argv[] = {"allreduce", "--np",     "2",       "--transport", transport,
                          "--sizes",   "8:4K",     "--iters", "5",           "--peers",
                          "none",      "--fusion", "false",   "--target_s",  "0.01"};
    EXPECT_EQ(RunAllreduceBench(sizeof(argv) / sizeof(argv[0]), const_cast<char**>(argv)), 0)
        << transport;
  }
}

// The nccl-tests columns: algbw = bytes / time, busbw = algbw * 2(n-1)/n (4/3 for three
// ranks), a checked row, and the fused result checked too.
TEST(AllreduceBenchTest, RowsFollowTheBusBandwidthFormulaAndFusionIsChecked) {
  const auto run = RunCaptured({"--np", "3", "--transport", "shm", "--sizes", "64K:64K", "--iters",
                                "5", "--peers", "none", "--fusion", "true", "--target_s", "0.01"});
  ASSERT_EQ(run.status, 0) << run.out;
  std::istringstream lines(run.out);
  std::string line;
  bool header = false, row = false;
  while (std::getline(lines, line)) {
    if (line.find("busbw") != std::string::npos && line[0] != '#') {
      header = true;
      std::istringstream cols(line);
      std::string bytes, iters, time, algbw, busbw, ok;
      cols >> bytes >> iters >> time >> algbw >> busbw >> ok;
      EXPECT_EQ(bytes + iters + time + algbw + busbw + ok, "bytesiterstime_usalgbwbusbwok");
      continue;
    }
    if (!header || line.empty() || line[0] == '#') continue;
    std::istringstream cols(line);
    std::string size, ok;
    int iters = 0;
    double time_us = 0, algbw = 0, busbw = 0;
    cols >> size >> iters >> time_us >> algbw >> busbw >> ok;
    ASSERT_GT(time_us, 0) << line;
    EXPECT_NEAR(algbw, 65536 / time_us / 1e3, 0.002 + algbw * 1e-3) << line;
    EXPECT_NEAR(busbw, algbw * 4 / 3, 0.002 + busbw * 1e-3) << line;
    EXPECT_EQ(ok, "ok") << line;
    row = true;
    break;
  }
  EXPECT_TRUE(row) << run.out;
  EXPECT_NE(run.out.find("fused result ok"), std::string::npos) << run.out;
}

// Two rounds: each sweep is filed under a placement, and the tables hold both sweeps' rows.
TEST(AllreduceBenchTest, RoundsAggregateAndBadRoundsAreRefused) {
  const auto [status, out] = RunCaptured(
      {"--np", "2", "--transport", "shm", "--sizes", "8:64", "--iters", "5", "--peers", "none",
       "--fusion", "false", "--target_s", "0.01", "--rounds", "2", "--interleave", "sweep"});
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("# round 1 lockstep_shm"), std::string::npos) << out;
  EXPECT_NE(out.find("# round 2 lockstep_shm"), std::string::npos) << out;
  // Whatever placements the two sweeps landed in, their counts add up to two, and every
  // table has one row per size (8, 16, 32, 64).
  const int tables = Occurrences(out, "sweeps: ours ");
  EXPECT_EQ(OurSweeps(out), 2) << out;
  int rows = 0;  // lines "<size> <iters> ... ok"
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const size_t first = line.find_first_not_of(' ');
    if (first != std::string::npos && std::isdigit(line[first]) && line.size() > 3 &&
        line.compare(line.size() - 3, 3, " ok") == 0) {
      ++rows;
    }
  }
  EXPECT_EQ(rows, 4 * tables) << out;
  const char* zero[] = {"allreduce", "--rounds", "0"};
  EXPECT_EQ(RunAllreduceBench(sizeof(zero) / sizeof(zero[0]), const_cast<char**>(zero)), 2);
}

// By size: every size is its own run, so four sizes in two rounds make eight runs of ours,
// and the fusion measurement rides with the last size's run only.
TEST(AllreduceBenchTest, InterleavedBySizeRunsEachSizeOnItsOwn) {
  const auto [status, out] =
      RunCaptured({"--np", "2", "--transport", "shm", "--sizes", "8:64", "--iters", "5", "--peers",
                   "none", "--fusion", "true", "--target_s", "0.01", "--rounds", "2"});
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("# interleaved by size"), std::string::npos) << out;
  for (const char* run : {"# round 1 8 lockstep_shm", "# round 1 64 lockstep_shm",
                          "# round 2 16 lockstep_shm", "# round 2 32 lockstep_shm"}) {
    EXPECT_NE(out.find(run), std::string::npos) << run << " missing from:\n" << out;
  }
  EXPECT_EQ(OurSweeps(out), 8) << out;
  // One fusion line per placement the last size's two runs landed in.
  EXPECT_GE(Occurrences(out, "# fusion: "), 1) << out;
  EXPECT_LE(Occurrences(out, "# fusion: "), 2) << out;
}

// A peer that cannot run is reported for each failed run and left out after three in a row;
// ours still runs every size.
TEST(AllreduceBenchTest, AFailingPeerIsLeftOutAfterThreeFailures) {
  const auto [status, out] = RunCaptured({"--np", "2", "--transport", "shm", "--sizes", "8:64",
                                          "--iters", "5", "--peers", "mpi", "--fusion", "false",
                                          "--target_s", "0.01", "--peers_dir", "/nonexistent"});
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(Occurrences(out, "# peer mpi_vader: "), 3) << out;
  EXPECT_NE(out.find("3 failures in a row: left out"), std::string::npos) << out;
  EXPECT_NE(out.find("# round 1 64 lockstep_shm"), std::string::npos) << out;
}

TEST(AllreduceBenchTest, HelpListsEveryFlagTheParserTakes) {
  const auto [status, out] = RunCaptured({"--np", "2", "--help"});
  EXPECT_EQ(status, 0);
  for (const char* flag : {"--np=",
                           "--transport=",
                           "--sizes=",
                           "--iters=",
                           "--target_s=",
                           "--rounds=",
                           "--json_out=",
                           "--interleave=",
                           "--peers=",
                           "--peers_dir=",
                           "--fusion=",
                           "--bytes_per_pack=",
                           "--algorithm=",
                           "--chunk_bytes=",
                           "--ring_threshold_bytes=",
                           "--doubling_threshold_bytes=",
                           "--segment_bytes=",
                           "--bind=",
                           "--tcp_buffer_bytes=",
                           "--tcp_send_window_bytes=",
                           "--tcp_busy_polls=",
                           "--tcp_congestion=",
                           "--shm_spin=",
                           "--shm_yield=",
                           "--shm_ring_bytes=",
                           "--shm_heap=",
                           "--shm_direct_bytes=",
                           "--shm_cma_bytes="}) {
    EXPECT_NE(out.find(flag), std::string::npos) << flag << " missing from:\n" << out;
    // ... and the parser knows it. "--rounds=0" after it makes every parse fail, so nothing
    // runs; an unknown flag fails first, naming itself.
    const std::string bad = std::string(flag) + "@";
    const char* argv[] = {"allreduce", bad.c_str(), "--rounds=0"};
    testing::internal::CaptureStderr();
    EXPECT_EQ(RunAllreduceBench(3, const_cast<char**>(argv)), 2) << flag;
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(err.find("unknown flag"), std::string::npos) << flag << ": " << err;
  }
}

}  // namespace
}  // namespace bench
}  // namespace lockstep
