// Every bundled job file (examples/jobs/*.json) trains through the real cluster path, as a
// new user runs it: `lockstep local --workers=2 JOB.json` (a real lockstep-coordinator and two
// lockstepd, TLS), the coordinator's submit validation deciding. The job's data paths stay
// relative and `lockstep local` runs in a directory holding no data, as a fresh checkout holds
// no generated fortunes windows: it must find every file in its own runfiles (the windows are
// made by the genrule //examples:fortunes_tfrecord when Bazel builds `lockstep`). Only
// `steps` is changed (to kSteps, `epochs` cleared) so that each job costs seconds.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/job_format.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "lockstep/v1/job_spec.pb.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using testing::Result;
using testing::Runfile;
using testing::RunTool;
using testing::TmpDir;

constexpr int kSteps = 4;

// The job files the examples bundle; the first test checks that this is all of them.
const char* const kJobs[] = {"char_transformer.json", "digits_mlp.json", "digits_residual.json",
                             "digits_tfrecord.json"};

TEST(ExampleJobsTest, EveryBundledJobFileIsCovered) {
  const std::string dir = Runfile("examples/jobs");
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr) << dir;
  std::vector<std::string> found;
  while (dirent* e = readdir(d)) {
    if (absl::EndsWith(e->d_name, ".json")) found.push_back(e->d_name);
  }
  closedir(d);
  std::sort(found.begin(), found.end());
  EXPECT_THAT(found, ::testing::ElementsAreArray(kJobs));
}

class ExampleJobTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ExampleJobTest, TrainsWithLockstepLocalOnTwoWorkers) {
  const std::string name = GetParam();
  auto spec = client::ReadJobSpecFile(Runfile("examples/jobs/" + name));
  ASSERT_TRUE(spec.ok()) << spec.status();
  // A fresh checkout has no generated data next to the job files: the relative paths stay.
  for (const std::string& file : spec->data().train().files()) {
    ASSERT_FALSE(absl::StartsWith(file, "/")) << name << ": " << file;
  }
  spec->set_epochs(0);
  spec->set_steps(kSteps);
  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(*spec, &json).ok());
  const std::string dir = TmpDir(spec->name());
  const std::string job_file = absl::StrCat(dir, "/", name);
  std::ofstream(job_file) << json;

  // The work dir, not the runfiles, is the current directory of `lockstep local`.
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(chdir(dir.c_str()), 0) << dir;
  Result r = RunTool({Runfile("client/lockstep"), "local", "--workers=2",
                      "--coordinator_bin=" + Runfile("coordinator/lockstep-coordinator"),
                      "--lockstepd_bin=" + Runfile("worker/lockstepd"),
                      "--work_dir=" + dir + "/cluster", "--heartbeat_interval=150ms", job_file},
                     dir + "/local.out", {}, absl::Seconds(120));
  ASSERT_EQ(chdir(cwd), 0) << cwd;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("(", spec->name(), ", ", job_file, ")")));
  EXPECT_THAT(r.output,
              HasSubstr(absl::StrCat("SUCCEEDED: every worker finished: ", kSteps, " steps")));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("refused"))) << r.output;
  std::cerr << name << ": lockstep local took " << r.took << "\n";
}

INSTANTIATE_TEST_SUITE_P(BundledJobs, ExampleJobTest, ::testing::ValuesIn(kJobs),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string n = info.param;
                           n.resize(n.size() - 5);  // ".json"
                           return n;
                         });

}  // namespace
}  // namespace lockstep
