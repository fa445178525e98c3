// `lockstep bench allreduce` end to end: the real binary, small sizes, no peers (--peers
// none): every size measured and checked correct, over shared memory and over TCP with a
// world size and element counts that do not divide evenly; bad flags refused.
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace lockstep {
namespace cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string TmpPath(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

std::string Contents(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

struct CliRun {
  int exit_code = -1;
  std::string output;
};

// Runs the lockstep CLI from the runfiles with `args`, its output in TmpPath(name).
CliRun Lockstep(const std::string& name, std::vector<std::string> args) {
  SubprocessOptions o;
  o.argv = {absl::StrCat(std::getenv("TEST_SRCDIR"), "/lockstep/client/lockstep")};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.log_file = TmpPath(name + ".out");
  CliRun run;
  auto p = Subprocess::Start(o);
  if (!p.ok()) {
    run.output = p.status().ToString();
    return run;
  }
  absl::StatusOr<int> code = (*p)->Wait(absl::Now() + absl::Seconds(120));
  if (!code.ok()) (*p)->Stop(absl::Seconds(1));
  // Wait() answers the wait status.
  run.exit_code = code.ok() && WIFEXITED(*code) ? WEXITSTATUS(*code) : -1;
  run.output = Contents(o.log_file);
  return run;
}

// The table rows of the output: "bytes iters time_us algbw busbw ok", keyed by the size as
// printed ("8", "1K").
std::vector<std::vector<std::string>> TableRows(const std::string& output) {
  std::vector<std::vector<std::string>> rows;
  bool in_table = false;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    std::vector<std::string> cells = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (!cells.empty() && cells[0] == "bytes") {
      in_table = true;
      continue;
    }
    if (in_table && cells.size() == 6) rows.push_back(cells);
  }
  return rows;
}

void ExpectEverySizeMeasuredAndCorrect(const CliRun& run, const std::string& json_path,
                                       const std::string& impl,
                                       const std::vector<std::string>& printed_sizes,
                                       const std::set<uint64_t>& sizes) {
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::vector<std::vector<std::string>> rows = TableRows(run.output);
  ASSERT_EQ(rows.size(), printed_sizes.size()) << run.output;
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i][0], printed_sizes[i]) << run.output;
    EXPECT_EQ(rows[i][5], "ok") << "size " << rows[i][0] << " not correct:\n" << run.output;
  }
  EXPECT_THAT(run.output, Not(HasSubstr("x gloo")));  // --peers none: no ratio columns
  EXPECT_THAT(run.output, Not(HasSubstr("x mpi")));
  std::set<uint64_t> measured;
  std::istringstream lines(Contents(json_path));
  std::string line;
  while (std::getline(lines, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;
    EXPECT_EQ(j["impl"], impl) << line;
    EXPECT_GT(j["time_us_p50"].get<double>(), 0) << line;
    measured.insert(j["bytes"].get<uint64_t>());
  }
  EXPECT_EQ(measured, sizes);
}

TEST(BenchCommandTest, AllreduceOverSharedMemoryMeasuresAndChecksEverySize) {
  const std::string json = TmpPath("shm.jsonl");
  CliRun run = Lockstep("shm", {"bench", "allreduce", "--np=2", "--transport=shm", "--sizes=8:4K",
                                "--iters=5", "--target_s=0.01", "--peers=none", "--fusion=false",
                                "--interleave=sweep", "--json_out=" + json});
  ExpectEverySizeMeasuredAndCorrect(run, json, "lockstep_shm",
                                    {"8", "16", "32", "64", "128", "256", "512", "1K", "2K", "4K"},
                                    {8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096});
  EXPECT_THAT(run.output, HasSubstr("np=2 transport=shm"));
}

// Three ranks over TCP, 3..768 floats: counts that three ranks cannot split evenly.
TEST(BenchCommandTest, AllreduceOverTcpWithThreeRanksAndUnevenCounts) {
  const std::string json = TmpPath("tcp.jsonl");
  CliRun run = Lockstep("tcp", {"bench", "allreduce", "--np=3", "--transport=tcp", "--sizes=12:3K",
                                "--iters=5", "--target_s=0.01", "--peers", "none", "--fusion=false",
                                "--interleave=sweep", "--json_out=" + json});
  ExpectEverySizeMeasuredAndCorrect(run, json, "lockstep_tcp",
                                    {"12", "24", "48", "96", "192", "384", "768", "1536", "3K"},
                                    {12, 24, 48, 96, 192, 384, 768, 1536, 3072});
  EXPECT_THAT(run.output, HasSubstr("np=3 transport=tcp"));
}

TEST(BenchCommandTest, BadFlagsAndAMissingSubcommandAreRefused) {
  CliRun bogus = Lockstep("bogus", {"bench", "allreduce", "--peers=none", "--bogus=1"});
  EXPECT_EQ(bogus.exit_code, 2) << bogus.output;
  EXPECT_THAT(bogus.output, HasSubstr("unknown flag --bogus"));
  CliRun sizes = Lockstep("sizes", {"bench", "allreduce", "--peers=none", "--sizes=6:4K"});
  EXPECT_EQ(sizes.exit_code, 2) << sizes.output;
  EXPECT_THAT(sizes.output, HasSubstr("--sizes"));
  CliRun bare = Lockstep("bare", {"bench"});
  EXPECT_EQ(bare.exit_code, 2) << bare.output;
  EXPECT_THAT(bare.output, HasSubstr("usage: lockstep bench allreduce"));
}

}  // namespace
}  // namespace cli
}  // namespace lockstep
