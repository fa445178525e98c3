// `lockstep export JOB` end to end: a real coordinator and two lockstepd train the digits job;
// the CLI, with the viewer's credentials, exports the job's newest checkpoint through the
// coordinator (JobService.FetchCheckpoint: the chief uploads it, coordinator/
// checkpoint_fetch.h) to safetensors, which reads back bitwise equal to the chief's checkpoint;
// with the chief gone the other worker's copy is sent; with no worker left the export fails
// at once naming the job and the tasks it tried. Every process is stopped by the LocalCluster
// destructor, also when an assertion fails.
#include <csignal>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint.h"
#include "client/job_service_client.h"
#include "client/local_cluster.h"
#include "export/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;
using testing::Result;

constexpr absl::Duration kInterval = absl::Milliseconds(150);
constexpr absl::Duration kTimeout = absl::Seconds(2);

// The `lockstep` CLI as the cluster's viewer.
Result RunAsViewer(const client::LocalCluster& cluster, std::vector<std::string> args) {
  std::vector<std::string> argv = {testing::Runfile("client/lockstep")};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--coordinator=" + cluster.coordinator_address());
  for (const std::string& f : cluster.credentials()->ViewerFlags()) argv.push_back(f);
  return testing::RunTool(argv, cluster.options().work_dir + "/cli.out", {}, absl::Seconds(30));
}

// Every variable of `checkpoint`, byte for byte, in `path` (a safetensors file).
void ExpectSafetensorsHold(const std::string& path, const v1::Checkpoint& checkpoint) {
  absl::StatusOr<exporting::Weights> weights = exporting::ReadSafetensorsFile(path);
  ASSERT_TRUE(weights.ok()) << weights.status();
  ASSERT_EQ(weights->tensors.size(), static_cast<size_t>(checkpoint.variables_size()));
  for (int i = 0; i < checkpoint.variables_size(); ++i) {
    const v1::NamedTensor& want = checkpoint.variables(i);
    const v1::NamedTensor& got = weights->tensors[i];
    EXPECT_EQ(got.name(), want.name());
    EXPECT_TRUE(got.tensor().content() == want.tensor().content()) << want.name();
  }
  EXPECT_EQ(weights->metadata["step"], absl::StrCat(checkpoint.global_step()));
  EXPECT_EQ(weights->metadata["job_uid"], checkpoint.job_uid());
}

TEST(ExportJobTest, AFinishedJobsCheckpointLeavesThroughTheCoordinator) {
  auto cluster =
      client::LocalCluster::StartCoordinator(testing::TestClusterOptions(2, kInterval, kTimeout));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  client::LocalCluster& c = **cluster;
  ASSERT_TRUE(c.StartWorkers().ok());
  ASSERT_TRUE(c.WaitForAlive(2, absl::Now() + absl::Seconds(20)).ok());
  const std::string dir = c.options().work_dir;

  v1::JobSpec spec = testing::DigitsJob(dir + "/digits");
  spec.set_epochs(0);
  spec.set_steps(30);
  spec.set_num_workers(2);
  absl::StatusOr<std::string> id = c.client()->SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  auto last = c.client()->WatchJob(
      *id, [](const v1::JobEvent&) {}, absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(last.ok()) << last.status();
  ASSERT_EQ(last->job().state(), v1::SUCCEEDED) << last->job().reason();
  auto chief = checkpoint::CheckpointManager::RestoreLatest(dir + "/digits/ckpt");
  ASSERT_TRUE(chief.ok()) << chief.status();
  ASSERT_EQ(chief->checkpoint.global_step(), 30);

  // The chief's copy, as the viewer.
  const std::string out = dir + "/model.safetensors";
  Result r = RunAsViewer(c, {"export", *id, "--format=safetensors", "--output=" + out});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("exporting job " + *id + "'s newest checkpoint, fetched through"));
  EXPECT_THAT(r.output, HasSubstr("from worker/0: " + chief->path));
  EXPECT_THAT(r.output, HasSubstr(" of "));  // the progress line
  ExpectSafetensorsHold(out, chief->checkpoint);
  // ONNX with no --spec: the job's own, from describe (the graph itself is checked by
  // tests/export_test.sh's onnx_check.py).
  const std::string onnx = dir + "/model.onnx";
  r = RunAsViewer(c, {"export", *id, "--format=onnx", "--output=" + onnx});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(testing::ReadFile(onnx), HasSubstr(chief->checkpoint.job_uid()));

  // The chief's host gone: worker/1's own copy (under its --state_dir) is sent.
  c.worker(0)->Signal(SIGKILL);
  ASSERT_TRUE(c.WaitFor(
                   [](const v1::GetClusterStatusResponse& s) {
                     for (const v1::TaskStatus& t : s.tasks()) {
                       if (t.task().index() == 0 && t.state() == v1::LOST) return true;
                     }
                     return false;
                   },
                   absl::Now() + absl::Seconds(10))
                  .ok());
  const std::string copy = dir + "/copy.safetensors";
  r = RunAsViewer(c, {"export", *id, "--format=safetensors", "--output=" + copy});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("from worker/1: " + dir + "/worker-1/"));
  ExpectSafetensorsHold(copy, chief->checkpoint);

  // No worker left: a clear error at once, naming the job and each task tried.
  c.worker(1)->Signal(SIGKILL);
  ASSERT_TRUE(c.WaitFor(
                   [](const v1::GetClusterStatusResponse& s) {
                     for (const v1::TaskStatus& t : s.tasks()) {
                       if (t.state() == v1::ALIVE) return false;
                     }
                     return true;
                   },
                   absl::Now() + absl::Seconds(10))
                  .ok());
  const absl::Time start = absl::Now();
  r = RunAsViewer(c, {"export", *id, "--format=npz", "--output=" + dir + "/none.npz"});
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("job " + *id + ": no worker of its last attempt"));
  EXPECT_THAT(r.output, HasSubstr("worker/0 (the chief): worker/0 is LOST"));
  EXPECT_THAT(r.output, HasSubstr("worker/1: worker/1 is LOST"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

}  // namespace
}  // namespace lockstep
