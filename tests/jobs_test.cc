// Jobs end to end, multi-process: a real lockstep-coordinator and lockstepd on loopback,
// driven through the real `lockstep` CLI and the JobServiceClient. Training is the bundled
// digits MLP (seconds). Fault injection: a worker SIGKILLed, a worker SIGSTOPped (hung), the
// coordinator SIGKILLed. Heartbeats are every 150 ms (timeout 3 s); every child is reaped
// by LocalCluster/Subprocess destructors, also when an assertion fails (a stopped worker is
// sent SIGCONT first).
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "checkpoint/checkpoint.h"
#include "client/job_format.h"
#include "client/job_service_client.h"
#include "client/local_cluster.h"
#include "common/subprocess.h"
#include "common/tfrecord.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "lockstep/v1/event.pb.h"
#include "tests/test_util.h"
#include "worker/chief/weights_match.h"

namespace lockstep {
namespace {

using ::google::protobuf::util::JsonStringToMessage;
using ::testing::HasSubstr;

// Short heartbeats so that reports arrive quickly; the timeout leaves room for a loaded CI
// machine (2 cores, training and compiling at once) so that no worker is wrongly LOST.
constexpr absl::Duration kInterval = absl::Milliseconds(150);
constexpr absl::Duration kTimeout = absl::Seconds(3);

using testing::DigitsJob;
using testing::EndlessJob;
using testing::ExpectBitwiseEqual;
using testing::ReadFile;
using testing::Result;
using testing::Runfile;
using testing::RunTool;
using testing::TmpDir;

// Every process but this one whose environment holds `marker` (a "NAME=value" entry) or
// whose command line mentions `dir`. `lockstep local` started with the marker in its
// environment hands it to the coordinator and to every lockstepd it starts (and to their
// children), while only the coordinator's command line names the work dir: lockstepd gets
// --coordinator and --cpu_devices only. So this sees every process the run started.
std::vector<std::string> ProcessesOf(const std::string& marker, const std::string& dir) {
  std::vector<std::string> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) {
    ADD_FAILURE() << "cannot list /proc";
    return found;
  }
  while (dirent* e = readdir(proc)) {
    int pid;
    if (!absl::SimpleAtoi(e->d_name, &pid) || pid == getpid()) continue;
    std::string cmd = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    bool mine = absl::StrContains(cmd, dir);
    const std::string env = ReadFile(absl::StrCat("/proc/", pid, "/environ"));
    for (absl::string_view var : absl::StrSplit(env, '\0')) mine = mine || var == marker;
    if (mine) found.push_back(absl::StrCat(pid, ": ", cmd));
  }
  closedir(proc);
  return found;
}

// A bundled job of TFRECORD data (examples/jobs/) with absolute data paths (train and eval)
// and its outputs under `dir`.
v1::JobSpec BundledTfRecordJob(const std::string& path, const std::string& dir) {
  auto spec = client::ReadJobSpecFile(Runfile(path));
  EXPECT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->data().train().format(), v1::DataSource::TFRECORD);
  for (std::string& file : *spec->mutable_data()->mutable_train()->mutable_files()) {
    file = Runfile(file);
  }
  if (spec->data().has_eval()) {
    for (std::string& file : *spec->mutable_data()->mutable_eval()->mutable_files()) {
      file = Runfile(file);
    }
  }
  spec->mutable_checkpoint()->set_dir(dir + "/ckpt");
  spec->mutable_summaries()->set_dir(dir + "/tb");
  return *spec;
}

// The equivalence tests on the residual CNN (2 workers against 1) train it with SGD at a
// constant 0.01 (ResidualCnnSgdJob) for kResidualCnnSteps steps, inside the first epoch, where
// training does not amplify the rounding of another summation order. The two runs sum in
// different orders (each OpenBLAS kernel set blocks the convolutions' products over the batch
// rows its own way, then the all-reduce adds the halves), and this ReLU + max-pool model
// amplifies those roundings, at times abruptly (a ReLU input or a max-pool tie near zero that
// flips). Measured, worst variable, OpenBLAS 0.3.21 under OPENBLAS_CORETYPE Cooperlake,
// SkylakeX, Haswell, Zen, SandyBridge, Nehalem and Prescott (an AVX-512 Xeon's own choice):
// at 5 and 10 steps, virtual batches and synchronized statistics both within 1e-6 under all
// seven; at 20 steps, synchronized statistics jumped to 3e-3 under Prescott (all others
// within 1e-6); the bundled Adam schedule for 60 steps ended 0.0036 (Cooperlake) and 0.10
// (Prescott) apart with virtual batches. Each replica's own statistics miss by 0.1 to 0.3 at
// 5, 10 and 20 steps under every kernel set: the control.
constexpr int kResidualCnnSteps = 10;

v1::JobSpec ResidualCnnSgdJob(const std::string& dir) {
  v1::JobSpec spec = DigitsJob(dir);
  spec.mutable_optimizer()->Clear();
  spec.mutable_optimizer()->mutable_sgd();
  spec.mutable_optimizer()->mutable_learning_rate()->mutable_constant()->set_value(0.01);
  const auto parsed = google::protobuf::util::JsonStringToMessage(
      ReadFile(Runfile("examples/digits_residual.json")), spec.mutable_model());
  EXPECT_TRUE(parsed.ok()) << parsed;
  return spec;
}

// The bundled TFRecord digits job (examples/jobs/digits_tfrecord.json).
v1::JobSpec TfRecordDigitsJob(const std::string& dir) {
  return BundledTfRecordJob("examples/jobs/digits_tfrecord.json", dir);
}

// Checks every record's CRCs; returns the number of scalar values found.
int ValidateEventFiles(const std::string& dir) {
  int scalars = 0, files = 0;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    ADD_FAILURE() << "no summary directory " << dir;
    return 0;
  }
  while (dirent* e = readdir(d)) {
    if (!absl::StartsWith(e->d_name, "events.out.tfevents.")) continue;
    ++files;
    auto reader = TfRecordReader::Open(dir + "/" + e->d_name);
    if (!reader.ok()) {
      ADD_FAILURE() << reader.status();
      continue;
    }
    while (true) {
      absl::StatusOr<std::string> record = reader->Next();
      if (record.status().code() == absl::StatusCode::kOutOfRange) break;
      if (!record.ok()) {
        ADD_FAILURE() << record.status();
        break;
      }
      v1::Event event;
      EXPECT_TRUE(event.ParseFromString(*record));
      scalars += event.summary().value_size();
    }
  }
  closedir(d);
  EXPECT_GE(files, 1) << "no event file in " << dir;
  return scalars;
}

TEST(LocalTest, LocalTrainsDigitsAndLeavesCheckpointAndSummaries) {
  const std::string dir = TmpDir("local");
  // Marks every process of this run (see ProcessesOf).
  const std::string marker = absl::StrCat("LOCKSTEP_JOBS_TEST_RUN=", getpid(), "-", dir);
  const size_t eq = marker.find('=');
  Result r = RunTool({Runfile("client/lockstep"), "local", "--workers=2",
                      "--coordinator_bin=" + Runfile("coordinator/lockstep-coordinator"),
                      "--lockstepd_bin=" + Runfile("worker/lockstepd"), "--work_dir=" + dir,
                      "--heartbeat_interval=150ms"},
                     absl::StrCat(getenv("TEST_TMPDIR"), "/local.out"),
                     {{marker.substr(0, eq), marker.substr(eq + 1)}}, absl::Seconds(120));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("SUCCEEDED"));
  const size_t at = r.output.find("test accuracy: ");
  ASSERT_NE(at, std::string::npos) << r.output;
  double accuracy = 0;
  ASSERT_TRUE(
      absl::SimpleAtod(r.output.substr(at + 15, r.output.find('\n', at) - at - 15), &accuracy));
  EXPECT_GE(accuracy, 0.96) << r.output;
  EXPECT_THAT(r.output, HasSubstr("checkpoint: " + dir + "/checkpoints/"));

  auto restored = checkpoint::CheckpointManager::RestoreLatest(dir + "/checkpoints");
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_GT(restored->checkpoint.global_step(), 0);
  EXPECT_EQ(restored->checkpoint.variables_size(), 4);  // hidden and logits kernel + bias
  EXPECT_GT(ValidateEventFiles(dir + "/summaries"), 10);
  // `lockstep local` has exited: it stopped and reaped every process it started.
  EXPECT_THAT(ProcessesOf(marker, dir), ::testing::IsEmpty()) << r.output;
}

class JobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // lockstepd i is worker/i (job rank i)
    auto cluster =
        client::LocalCluster::StartCoordinator(testing::TestClusterOptions(2, kInterval, kTimeout));
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
    ASSERT_TRUE(cluster_->StartWorkers().ok());
    ASSERT_TRUE(cluster_->WaitForAlive(2, absl::Now() + absl::Seconds(20)).ok());
    Connect();
  }
  void Connect() {
    auto jobs = client::JobServiceClient::Create(cluster_->coordinator_address(),
                                                 cluster_->client_tls(), absl::Seconds(10));
    ASSERT_TRUE(jobs.ok());
    jobs_ = std::move(*jobs);
  }
  const std::string& dir() { return cluster_->options().work_dir; }

  // Runs `spec` for `steps` steps on `workers` workers with its checkpoints under `ckpt_dir`;
  // returns the final checkpoint (after checking it is at `steps`).
  absl::StatusOr<v1::Checkpoint> TrainToCheckpoint(v1::JobSpec spec, int workers, int steps,
                                                   const std::string& ckpt_dir) {
    spec.set_epochs(0);
    spec.set_steps(steps);
    spec.set_num_workers(workers);
    spec.mutable_checkpoint()->set_dir(ckpt_dir);
    auto id = jobs_->SubmitJob(spec);
    if (!id.ok()) return id.status();
    auto last = jobs_->WatchJob(
        *id, [](const v1::JobEvent&) {}, absl::Now() + absl::Seconds(120));
    if (!last.ok()) return last.status();
    if (last->job().state() != v1::SUCCEEDED) {
      return absl::InternalError(
          absl::StrCat("the ", workers, "-worker job did not succeed: ", last->job().reason()));
    }
    auto restored = checkpoint::CheckpointManager::RestoreLatest(ckpt_dir);
    if (!restored.ok()) return restored.status();
    EXPECT_EQ(restored->checkpoint.global_step(), steps) << ckpt_dir;
    return restored->checkpoint;
  }

  // Whether checkpoints `a` and `b` hold the same weights within `rel_tol`
  // (worker/chief/weights_match.h); prints each variable's relative errors under `what`.
  static absl::Status CompareWeights(const v1::Checkpoint& a, const v1::Checkpoint& b,
                                     double rel_tol, const std::string& what) {
    std::string summary;
    const absl::Status match = chief::WeightsMatch(a, b, rel_tol, &summary);
    std::cerr << what << ":\n" << summary;
    return match;
  }

  // Runs `spec` for `steps` steps on two workers (outputs under its checkpoint dir + "2") and
  // on one ("1"); returns whether the final checkpoints hold the same weights within
  // `rel_tol` (worker/chief/weights_match.h) and prints each variable's relative errors.
  absl::Status TwoWorkersAgainstOne(const v1::JobSpec& spec, int steps, double rel_tol) {
    const std::string ckpt = spec.checkpoint().dir();
    auto two = TrainToCheckpoint(spec, 2, steps, ckpt + "2");
    if (!two.ok()) return two.status();
    auto one = TrainToCheckpoint(spec, 1, steps, ckpt + "1");
    if (!one.ok()) return one.status();
    return CompareWeights(
        *two, *one, rel_tol,
        absl::StrCat(spec.name(), " (", ckpt, "), 2 vs 1 workers after ", steps, " steps"));
  }

  // The same within 1e-5 relative, the criterion of the equivalence tests.
  void ExpectTwoWorkersMatchOne(const v1::JobSpec& spec, int steps) {
    const absl::Status match = TwoWorkersAgainstOne(spec, steps, chief::kWeightsRelativeTolerance);
    EXPECT_TRUE(match.ok()) << match;
  }

  // Runs the CLI against this cluster.
  Result Cli(std::vector<std::string> args) { return testing::RunCli(*cluster_, std::move(args)); }

  // Waits until the job's chief reports a step >= `step`.
  // Waits until job `id` reached `step` and `workers` workers have reported on it (reports
  // ride on heartbeats, once a second, so a fast job reaches a step before every worker
  // said anything).
  void WaitForStep(const std::string& id, int64_t step, int workers = 1) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      auto job = jobs_->GetJob(id);
      ASSERT_TRUE(job.ok()) << job.status();
      ASSERT_EQ(job->job().state(), v1::RUNNING) << job->job().reason();
      if (job->job().progress().step() >= step && job->workers_size() >= workers) return;
      absl::SleepFor(absl::Milliseconds(20));
    }
    FAIL() << "job " << id << " did not reach step " << step << " with reports from " << workers
           << " worker(s)";
  }

  static bool Left(const v1::JobReport& w) {
    return w.phase() == v1::JobReport::ABORTED || w.phase() == v1::JobReport::FAILED;
  }

  // Waits until every worker's report of the job says it left the attempt; returns how
  // long that took, or InfiniteDuration() (after a failure naming the last answer) when
  // not within `limit`.
  absl::Duration WaitAllLeft(const std::string& id, absl::Duration limit) {
    const absl::Time start = absl::Now();
    absl::StatusOr<v1::GetJobResponse> job;
    while (absl::Now() < start + limit) {
      job = jobs_->GetJob(id);
      if (!job.ok()) {
        ADD_FAILURE() << "GetJob(" << id << "): " << job.status();
        return absl::InfiniteDuration();
      }
      const auto& workers = job->workers();
      if (!workers.empty() && std::all_of(workers.begin(), workers.end(), Left)) {
        return absl::Now() - start;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    ADD_FAILURE() << "not every worker left job " << id << " within " << limit << "; last:\n"
                  << (job.ok() ? client::FormatJobDescription(*job) : job.status().ToString());
    return absl::InfiniteDuration();
  }

  // Waits until worker `rank`'s report says it left job `id`; false (with its log and the
  // coordinator's) when not by `deadline`.
  bool WaitWorkerLeft(const std::string& id, int rank, absl::Time deadline) {
    while (true) {
      auto job = jobs_->GetJob(id);
      if (job.ok() && job->workers_size() > rank && Left(job->workers(rank))) return true;
      if (absl::Now() >= deadline) break;
      absl::SleepFor(absl::Milliseconds(20));
    }
    ADD_FAILURE() << "worker/" << rank << " did not leave job " << id << " in time; its log:\n"
                  << ReadFile(absl::StrCat(dir(), "/lockstepd.", rank, ".log"))
                  << "\ncoordinator log:\n"
                  << ReadFile(dir() + "/coordinator.log");
    return false;
  }

  // `describe` (JSON and table) of a job that failed when worker/1 went away: FAILED, the
  // reason names worker/1, and worker `survivor`'s row says it left the attempt.
  void ExpectDescribedFailure(const std::string& id, int survivor) {
    Result r = Cli({"describe", id, "--output=json"});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    v1::GetJobResponse described;
    ASSERT_TRUE(JsonStringToMessage(r.output, &described).ok()) << r.output;
    EXPECT_EQ(described.job().id(), id);
    EXPECT_EQ(described.job().state(), v1::FAILED);
    EXPECT_THAT(described.job().reason(), HasSubstr("worker/1"));
    ASSERT_EQ(described.workers_size(), 2) << r.output;
    EXPECT_TRUE(Left(described.workers(survivor))) << r.output;
    r = Cli({"describe", id});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("State:     FAILED\n"));
    EXPECT_THAT(r.output,
                ::testing::ContainsRegex(absl::StrCat("\n  ", survivor, " +(ABORTED|FAILED) ")));
  }

  std::unique_ptr<client::LocalCluster> old_cluster_;
  std::unique_ptr<client::LocalCluster> cluster_;
  std::unique_ptr<client::JobServiceClient> jobs_;
};

// The bundled job as it is (AUTO sharding, which is DATA rebatching for its in-memory
// data, and shuffling by (seed, epoch)) on two worker processes and on one, with the same
// global batch and seed, ends with the same weights (worker/chief/weights_match.h says
// what "the same" means and why).
TEST_F(JobsTest, TwoWorkersAndOneWorkerEndWithTheSameWeights) {
  v1::JobSpec two = DigitsJob(dir() + "/two");
  two.set_epochs(0);
  two.set_steps(60);
  two.set_num_workers(2);
  ASSERT_EQ(two.data().auto_shard_policy(), v1::AUTO);
  ASSERT_FALSE(two.data().no_shuffle());
  v1::JobSpec one = two;
  one.set_num_workers(1);
  one.mutable_checkpoint()->set_dir(dir() + "/one/ckpt");
  one.mutable_summaries()->set_dir(dir() + "/one/tb");
  for (const v1::JobSpec& spec : {two, one}) {
    auto id = jobs_->SubmitJob(spec);
    ASSERT_TRUE(id.ok()) << id.status();
    auto last = jobs_->WatchJob(
        *id, [](const v1::JobEvent&) {}, absl::Now() + absl::Seconds(60));
    ASSERT_TRUE(last.ok()) << last.status();
    ASSERT_EQ(last->job().state(), v1::SUCCEEDED) << last->job().reason();
  }
  auto a = checkpoint::CheckpointManager::RestoreLatest(dir() + "/two/ckpt");
  auto b = checkpoint::CheckpointManager::RestoreLatest(dir() + "/one/ckpt");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->checkpoint.global_step(), 60);
  EXPECT_EQ(b->checkpoint.global_step(), 60);
  const absl::Status match = chief::WeightsMatch(a->checkpoint, b->checkpoint);
  EXPECT_TRUE(match.ok()) << match;
}

// The bundled character-level Transformer language model (examples/jobs/char_transformer.json:
// embedding, position embedding, two causal self-attention blocks with layer norm, a label per
// position) on two workers and on one, with the same global batch and seed, ends with the same
// weights within 1e-5 relative.
TEST_F(JobsTest, CharTransformerOnTwoWorkersAndOneEndsWithTheSameWeights) {
  ExpectTwoWorkersMatchOne(BundledTfRecordJob("examples/jobs/char_transformer.json", dir() + "/lm"),
                           40);
}

// The residual CNN with batch normalization (examples/digits_residual.json, virtual batches
// of 8) as the digits job's model: the moving statistics are all-reduced like the gradients,
// so two workers end with one worker's weights and statistics within 1e-5 relative. Control:
// one worker whose statistics run over its whole batch of 48 instead of virtual batches of 8
// ends more than 1e-2 away, so the comparison sees which examples each statistic covered.
// Trained in the setting of kResidualCnnSteps (ResidualCnnSgdJob): there, under every OpenBLAS
// kernel set, the two runs end within 1e-6.
TEST_F(JobsTest, ResidualCnnOnTwoWorkersAndOneEndsWithTheSameWeights) {
  const v1::JobSpec spec = ResidualCnnSgdJob(dir() + "/cnn");
  const absl::Status match =
      TwoWorkersAgainstOne(spec, kResidualCnnSteps, chief::kWeightsRelativeTolerance);
  EXPECT_TRUE(match.ok()) << match;

  v1::JobSpec whole_batch = spec;
  for (v1::Layer& layer : *whole_batch.mutable_model()->mutable_layers()) {
    if (layer.has_batch_norm()) layer.mutable_batch_norm()->set_virtual_batch_size(0);
  }
  auto two = checkpoint::CheckpointManager::RestoreLatest(spec.checkpoint().dir() + "2");
  ASSERT_TRUE(two.ok()) << two.status();
  auto whole = TrainToCheckpoint(whole_batch, 1, kResidualCnnSteps, dir() + "/cnn_whole_batch");
  ASSERT_TRUE(whole.ok()) << whole.status();
  const absl::Status control =
      CompareWeights(two->checkpoint, *whole, 1e-2, "virtual batches of 8 vs the whole batch");
  EXPECT_EQ(control.code(), absl::StatusCode::kFailedPrecondition) << control;
  EXPECT_THAT(control.message(), HasSubstr("the weights differ by more than")) << control;
}

// SyncBatchNorm in a job: the same residual CNN with synchronized statistics instead of
// virtual batches, on two lockstepd processes, ends with the weights (moving statistics
// included) of one worker on the whole batch within 1e-5 relative, while the same job with
// each replica's own statistics ends more than 1e-2 away. Trained in the setting of
// kResidualCnnSteps. (The statistics' sums are f64: with f32 sums even SGD ended 2e-2 apart.)
TEST_F(JobsTest, SyncBatchNormOnTwoWorkersMatchesOneWorkerOnTheWholeBatch) {
  v1::JobSpec spec = ResidualCnnSgdJob(dir() + "/sync_bn");
  for (const bool synchronized : {true, false}) {
    int batch_norms = 0;
    for (v1::Layer& layer : *spec.mutable_model()->mutable_layers()) {
      if (!layer.has_batch_norm()) continue;
      layer.mutable_batch_norm()->set_virtual_batch_size(0);
      layer.mutable_batch_norm()->set_synchronized(synchronized);
      ++batch_norms;
    }
    ASSERT_EQ(batch_norms, 3);
    spec.mutable_checkpoint()->set_dir(dir() + (synchronized ? "/sync_bn" : "/local_bn"));
    const absl::Status match = TwoWorkersAgainstOne(
        spec, kResidualCnnSteps, synchronized ? chief::kWeightsRelativeTolerance : 1e-2);
    if (synchronized) {
      EXPECT_TRUE(match.ok()) << match;
    } else {
      // Both jobs ran, and their weights differ (not: a job failed).
      EXPECT_EQ(match.code(), absl::StatusCode::kFailedPrecondition) << match;
      EXPECT_THAT(match.message(), HasSubstr("the weights differ by more than")) << match;
    }
  }
}

// The CLI on a job that succeeds: `submit --watch` follows it to the end and exits 0 with
// the final figures and where the checkpoint and the summaries are; `watch` of the finished
// job says the same and exits 0 too.
TEST_F(JobsTest, SubmitWatchFollowsAJobToSuccessAndExitsZero) {
  v1::JobSpec spec = DigitsJob(dir() + "/cli");
  spec.set_epochs(0);
  spec.set_steps(30);
  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(spec, &json).ok());
  const std::string path = dir() + "/short.json";
  std::ofstream(path) << json;
  Result submit = Cli({"submit", path, "--watch"});
  EXPECT_EQ(submit.exit_code, 0) << submit.output;
  const size_t at = submit.output.find("submitted ");
  ASSERT_NE(at, std::string::npos) << submit.output;
  const std::string id =
      submit.output.substr(at + 10, submit.output.find_first_of(" \n", at + 10) - at - 10);
  for (const Result& r : {submit, Cli({"watch", id})}) {
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("job " + id + " SUCCEEDED"));
    EXPECT_THAT(r.output, HasSubstr("steps 30/30"));
    EXPECT_THAT(r.output, HasSubstr("checkpoint: " + dir() + "/cli/ckpt/ckpt-0000000030"));
    EXPECT_THAT(r.output, HasSubstr("summaries:  " + dir() + "/cli/tb"));
  }

  // --output=json: JSON lines and nothing else. submit --watch: {"jobId"}, then the
  // watch's lines; watch: a JobEvent per line while the job runs, then the final JobRecord.
  Result json_submit = Cli({"submit", path, "--watch", "--output=json"});
  EXPECT_EQ(json_submit.exit_code, 0) << json_submit.output;
  std::vector<std::string> lines = absl::StrSplit(json_submit.output, '\n', absl::SkipEmpty());
  ASSERT_GE(lines.size(), 2u) << json_submit.output;
  v1::SubmitJobResponse submitted;
  ASSERT_TRUE(JsonStringToMessage(lines[0], &submitted).ok()) << lines[0];
  const std::string json_id = submitted.job_id();
  EXPECT_NE(json_id, id);
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    v1::JobEvent event;
    ASSERT_TRUE(JsonStringToMessage(lines[i], &event).ok()) << "line " << i << ": " << lines[i];
    EXPECT_EQ(event.job().id(), json_id);
  }
  for (const Result& r : {json_submit, Cli({"watch", json_id, "--output=json"})}) {
    EXPECT_EQ(r.exit_code, 0) << r.output;
    lines = absl::StrSplit(r.output, '\n', absl::SkipEmpty());
    ASSERT_FALSE(lines.empty());
    v1::JobRecord final;
    ASSERT_TRUE(JsonStringToMessage(lines.back(), &final).ok()) << lines.back();
    EXPECT_EQ(final.id(), json_id);
    EXPECT_EQ(final.state(), v1::SUCCEEDED);
    EXPECT_EQ(final.progress().step(), 30);
    EXPECT_EQ(final.progress().checkpoint_path(),
              dir() + "/cli/ckpt/" +
                  checkpoint::CheckpointManager::FileName(
                      30, absl::StrCat(json_id, "@", final.created_unix_micros())));
  }
}

TEST_F(JobsTest, BadInputIsRefusedNamingTheFieldAndCancelStopsWorkers) {
  auto running = jobs_->SubmitJob(EndlessJob(dir()));
  ASSERT_TRUE(running.ok()) << running.status();
  WaitForStep(*running, 1);

  const std::string malformed = dir() + "/malformed.json";
  std::ofstream(malformed) << "{\"name\": \"broken\", ";
  Result r = Cli({"submit", malformed});
  EXPECT_EQ(r.exit_code, 2) << r.output;  // refused before it is sent
  EXPECT_THAT(r.output, HasSubstr("lockstep submit: " + malformed + ": not a valid job spec: "));

  const std::string unknown = dir() + "/unknown_layer.json";
  std::ofstream(unknown) << R"({"name": "x", "model": {"layers": [{"conv9d": {}}]}})";
  r = Cli({"submit", unknown});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr(unknown + ": not a valid job spec: "));
  EXPECT_THAT(r.output, HasSubstr("model.layers[0]"));  // where the unknown field is
  EXPECT_THAT(r.output, HasSubstr("conv9d"));

  v1::JobSpec bad = DigitsJob(dir() + "/bad");
  bad.set_global_batch_size(33);  // 2 replicas
  absl::Status s = jobs_->SubmitJob(bad).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("global_batch_size"));
  bad = DigitsJob(dir() + "/bad");
  bad.mutable_checkpoint()->set_dir("/var/lib/../../etc/ckpt");
  s = jobs_->SubmitJob(bad).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("checkpoint.dir"));
  bad = DigitsJob(dir() + "/bad");
  bad.mutable_model()->mutable_layers(0)->mutable_dense()->set_units(-5);
  s = jobs_->SubmitJob(bad).status();
  EXPECT_THAT(s.message(), HasSubstr("model.layers[0].dense.units"));
  // None of them was stored: the coordinator holds the running job only.
  auto listed = jobs_->ListJobs();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].id(), *running);

  // The coordinator kept running and the running job is untouched.
  auto job = jobs_->GetJob(*running);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->job().state(), v1::RUNNING);
  const int64_t step = job->job().progress().step();
  WaitForStep(*running, step + 1);

  r = Cli({"cancel", *running, "--output=json", "--reason=the test is done"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  v1::JobRecord cancelled;
  ASSERT_TRUE(JsonStringToMessage(r.output, &cancelled).ok()) << r.output;
  EXPECT_EQ(cancelled.id(), *running);
  EXPECT_EQ(cancelled.state(), v1::CANCELLED);
  EXPECT_THAT(cancelled.reason(), HasSubstr("the test is done"));
  EXPECT_TRUE(cancelled.spec().empty()) << "`describe` shows the spec";
  // Workers report leaving within 2 s (+ one heartbeat to tell us).
  EXPECT_LE(WaitAllLeft(*running, absl::Seconds(5)), absl::Seconds(2) + 2 * kInterval);
  r = Cli({"jobs", "--output=json"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  v1::ListJobsResponse list;
  ASSERT_TRUE(JsonStringToMessage(r.output, &list).ok()) << r.output;
  ASSERT_EQ(list.jobs_size(), 1) << r.output;
  EXPECT_EQ(list.jobs(0).id(), *running);
  EXPECT_EQ(list.jobs(0).state(), v1::CANCELLED);
  EXPECT_EQ(Cli({"watch", *running}).exit_code, 1);  // a CANCELLED job is no success
}

TEST_F(JobsTest, KilledWorkerFailsTheJobNamingItAndOthersLeave) {
  auto id = jobs_->SubmitJob(EndlessJob(dir()));
  ASSERT_TRUE(id.ok()) << id.status();
  WaitForStep(*id, 5, /*workers=*/2);  // describe then has a row for the killed worker too
  cluster_->worker(1)->Signal(SIGKILL);
  const absl::Time killed = absl::Now();
  auto last = jobs_->WatchJob(
      *id, [](const v1::JobEvent&) {}, killed + absl::Seconds(10));
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->job().state(), v1::FAILED);
  EXPECT_THAT(last->job().reason(), HasSubstr("worker/1"));
  // worker/0 left the job within 5 s of the kill.
  EXPECT_TRUE(WaitWorkerLeft(*id, 0, killed + absl::Seconds(5)));
  ExpectDescribedFailure(*id, /*survivor=*/0);
}

// A worker that hangs (SIGSTOP) while its job trains: it neither heartbeats nor closes its
// sockets, so worker/0 waits for it in an all-reduce (communication.timeout_ms is 20 s)
// until the coordinator finds it LOST (heartbeat timeout, kTimeout) and fails the job
// naming it; worker/0 is then aborted and leaves the attempt. Nobody waits for the hung
// worker longer than the heartbeat timeout and an abort.
TEST_F(JobsTest, StoppedWorkerFailsTheJobNamingItAndOthersLeave) {
  auto id = jobs_->SubmitJob(EndlessJob(dir()));
  ASSERT_TRUE(id.ok()) << id.status();
  WaitForStep(*id, 5, /*workers=*/2);  // describe then has a row for the stopped worker too
  Subprocess* hung = cluster_->worker(1);
  // Resumed whatever happens below, so that teardown's SIGTERM can end it.
  struct Resume {
    Subprocess* p;
    ~Resume() { p->Signal(SIGCONT); }
  } resume{hung};
  hung->Signal(SIGSTOP);
  const absl::Time stopped = absl::Now();
  const absl::Duration bound = kTimeout + absl::Seconds(5);
  auto last = jobs_->WatchJob(
      *id, [](const v1::JobEvent&) {}, stopped + bound);
  ASSERT_TRUE(last.ok()) << last.status() << "\ncoordinator log:\n"
                         << ReadFile(dir() + "/coordinator.log");
  const absl::Duration failed_after = absl::Now() - stopped;
  EXPECT_EQ(last->job().state(), v1::FAILED);
  EXPECT_THAT(last->job().reason(), HasSubstr("worker/1"));
  EXPECT_THAT(last->job().reason(), HasSubstr("was lost: no heartbeat"));
  EXPECT_TRUE(WaitWorkerLeft(*id, 0, stopped + bound));
  std::cerr << "worker/1 stopped: job FAILED after " << failed_after << ", worker/0 left after "
            << absl::Now() - stopped << " (heartbeat timeout " << kTimeout << ")\n";
  auto status = cluster_->Status();
  ASSERT_TRUE(status.ok()) << status.status();
  int rows = 0;
  for (const v1::TaskStatus& task : status->tasks()) {
    if (task.task().type() != "worker" || task.task().index() != 1) continue;
    ++rows;
    EXPECT_EQ(task.state(), v1::LOST) << "worker/1 is still stopped";
  }
  EXPECT_EQ(rows, 1);
  EXPECT_TRUE(hung->running());
  ExpectDescribedFailure(*id, /*survivor=*/0);
}

// The bundled TFRecord job trains the digits MLP on two workers to the accuracy bar of the
// CSV job (`lockstep local`, LocalTest above): the files hold the same rows in the same order.
TEST_F(JobsTest, TfRecordDigitsTrainToTheCsvAccuracy) {
  auto id = jobs_->SubmitJob(TfRecordDigitsJob(dir() + "/tfrecord"));
  ASSERT_TRUE(id.ok()) << id.status();
  auto last = jobs_->WatchJob(
      *id, [](const v1::JobEvent&) {}, absl::Now() + absl::Seconds(120));
  ASSERT_TRUE(last.ok()) << last.status();
  ASSERT_EQ(last->job().state(), v1::SUCCEEDED) << last->job().reason();
  EXPECT_GE(last->job().progress().eval_accuracy(), 0.96);
  std::cerr << "TFRecord digits: test accuracy " << last->job().progress().eval_accuracy()
            << " after " << last->job().progress().step() << " steps\n";
}

// Streamed TFRecord files (no held-out split) on two workers: AUTO shards them by FILE (3
// files for 2 workers), as tf.data does, and the job runs to its end.
TEST_F(JobsTest, StreamedTfRecordFilesAreShardedByFile) {
  v1::JobSpec spec = TfRecordDigitsJob(dir() + "/streamed");
  spec.set_epochs(0);
  spec.set_steps(30);
  spec.mutable_data()->set_eval_fraction(0);
  spec.set_eval_every_steps(0);
  auto id = jobs_->SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  auto last = jobs_->WatchJob(
      *id, [](const v1::JobEvent&) {}, absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(last.ok()) << last.status();
  ASSERT_EQ(last->job().state(), v1::SUCCEEDED) << last->job().reason();
  EXPECT_EQ(last->job().progress().step(), 30);
  for (int rank : {0, 1}) {
    EXPECT_THAT(ReadFile(absl::StrCat(dir(), "/lockstepd.", rank, ".log")),
                HasSubstr("AUTO sharding by FILE: 3 files for 2 workers"))
        << "worker/" << rank;
  }
}

// The digits job with restarts allowed: checkpoints every 100 steps, 5800 steps in all (a
// few seconds: long enough to be killed twice before its end).
v1::JobSpec RestartableJob(const std::string& dir) {
  v1::JobSpec spec = DigitsJob(dir);
  spec.set_epochs(200);
  spec.set_num_workers(2);
  spec.mutable_checkpoint()->set_every_steps(100);
  spec.mutable_restart_policy()->set_max_restarts(2);
  return spec;
}

// A job with restart_policy.max_restarts survives a SIGKILLed worker, then a SIGKILLed
// chief whose host lost its disk (checkpoint.dir and its own copies deleted), then a
// SIGTERMed worker (a preemption: not counted as a restart, no step lost): each time it is
// RESTARTING until the lockstepd is started again, resumes from the newest checkpoint a
// surviving worker holds (sent over the data plane), and ends SUCCEEDED with weights
// bitwise equal to an uninterrupted run of the same spec on the same two workers.
TEST_F(JobsTest, KilledWorkersRestartFromTheNewestCheckpointAndEndBitwiseEqual) {
  auto run_to_end = [&](const std::string& id) {
    auto last = jobs_->WatchJob(
        id, [](const v1::JobEvent&) {}, absl::Now() + absl::Seconds(120));
    EXPECT_TRUE(last.ok()) << last.status();
    return last.ok() ? last->job() : v1::JobRecord();
  };
  auto reference_id = jobs_->SubmitJob(RestartableJob(dir() + "/reference"));
  ASSERT_TRUE(reference_id.ok()) << reference_id.status();
  const v1::JobRecord reference = run_to_end(*reference_id);
  ASSERT_EQ(reference.state(), v1::SUCCEEDED) << reference.reason();
  auto expected = checkpoint::CheckpointManager::RestoreLatest(dir() + "/reference/ckpt");
  ASSERT_TRUE(expected.ok()) << expected.status();

  const v1::JobSpec spec = RestartableJob(dir() + "/restarted");
  auto id = jobs_->SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  struct Kill {
    int worker;
    int64_t at_step;
    bool lose_disk;  // its checkpoint directories are gone with it
    int signal;
  };
  int attempt = 1;
  for (const Kill& kill : {Kill{1, 300, false, SIGKILL}, Kill{0, 2000, true, SIGKILL},
                           Kill{1, 4000, false, SIGTERM}}) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    absl::StatusOr<v1::GetJobResponse> job;
    while (absl::Now() < deadline) {
      job = jobs_->GetJob(*id);
      ASSERT_TRUE(job.ok()) << job.status();
      if (job->job().state() == v1::RUNNING && job->job().attempt() == attempt &&
          job->job().progress().step() >= kill.at_step) {
        break;
      }
      ASSERT_FALSE(client::JobEnded(job->job().state())) << job->job().reason();
      absl::SleepFor(absl::Milliseconds(5));
    }
    cluster_->worker(kill.worker)->Signal(kill.signal);
    const absl::Time killed = absl::Now();
    absl::StatusOr<int> exited = cluster_->worker(kill.worker)->Wait(killed + absl::Seconds(10));
    ASSERT_TRUE(exited.ok()) << exited.status();
    if (kill.signal == SIGTERM) {
      // A preemption: the group stopped after one step with a checkpoint, the worker's final
      // report went out, and it left cleanly, well within its 15 s grace.
      EXPECT_EQ(*exited, 0);
      std::cerr << "worker/" << kill.worker << " exited 0 " << absl::Now() - killed
                << " after SIGTERM\n";
    }
    if (kill.lose_disk) {
      ASSERT_EQ(std::system(absl::StrCat("rm -rf '", spec.checkpoint().dir(), "' '", dir(),
                                         "/worker-", kill.worker, "'")
                                .c_str()),
                0);
    }
    // RESTARTING once the killed worker is found lost; RUNNING again once it is back.
    bool restarting = false;
    while (!restarting && absl::Now() < killed + kTimeout + absl::Seconds(10)) {
      job = jobs_->GetJob(*id);
      ASSERT_TRUE(job.ok()) << job.status();
      restarting = job->job().state() == v1::RESTARTING;
      absl::SleepFor(absl::Milliseconds(10));
    }
    ASSERT_TRUE(restarting) << client::FormatJobDescription(*job);
    const absl::Duration detected = absl::Now() - killed;
    EXPECT_THAT(job->job().reason(), HasSubstr(absl::StrCat("worker/", kill.worker)));
    if (kill.signal == SIGTERM) {
      EXPECT_THAT(job->job().reason(), HasSubstr("was preempted (lockstepd received SIGTERM)"));
    }
    ASSERT_TRUE(cluster_->StartWorker(kill.worker).ok());
    ++attempt;
    while (absl::Now() < killed + absl::Seconds(30)) {
      job = jobs_->GetJob(*id);
      ASSERT_TRUE(job.ok()) << job.status();
      if (job->job().attempt() == attempt && job->job().progress().restored_step() > 0) break;
      absl::SleepFor(absl::Milliseconds(10));
    }
    ASSERT_EQ(job->job().attempt(), attempt) << client::FormatJobDescription(*job);
    std::cerr << "worker/" << kill.worker << " killed at step >= " << kill.at_step
              << ": RESTARTING after " << detected << ", attempt " << attempt << " restored step "
              << job->job().progress().restored_step() << " after " << absl::Now() - killed << "\n";
    // A kill loses the steps since the last checkpoint; a preemption none.
    EXPECT_GE(job->job().progress().restored_step(),
              kill.signal == SIGTERM ? kill.at_step : kill.at_step - 100);
  }
  const v1::JobRecord done = run_to_end(*id);
  ASSERT_EQ(done.state(), v1::SUCCEEDED) << done.reason();
  EXPECT_EQ(done.restarts(), 2);  // the preemption is not counted
  Result r = Cli({"describe", *id});
  EXPECT_THAT(r.output, HasSubstr("restarts: 2 of 2 allowed")) << r.output;
  EXPECT_THAT(r.output, HasSubstr("RESTARTING (attempt 1): worker/1")) << r.output;
  EXPECT_THAT(r.output, HasSubstr("RESTARTING (attempt 2): worker/0")) << r.output;
  auto got = checkpoint::CheckpointManager::RestoreLatest(spec.checkpoint().dir());
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectBitwiseEqual(got->checkpoint, expected->checkpoint);
}

// `lockstep drain worker/1` while a job runs: the group stops after its next step with a
// checkpoint, the job waits RESTARTING (not counted) while worker/1 stays ALIVE but drained,
// and `lockstep drain worker/1 --undo` lets it resume from that step to SUCCEEDED.
TEST_F(JobsTest, DrainStopsTheJobWithACheckpointAndUndoLetsItResume) {
  v1::JobSpec spec = RestartableJob(dir() + "/drained");
  spec.mutable_restart_policy()->set_max_restarts(0);  // a drain needs no restart budget
  auto id = jobs_->SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  WaitForStep(*id, 500, /*workers=*/2);
  Result r = Cli({"drain", "worker/1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("worker/1 drained: job " + *id + " stops after its next step"));
  absl::StatusOr<v1::GetJobResponse> job;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    job = jobs_->GetJob(*id);
    ASSERT_TRUE(job.ok()) << job.status();
    if (job->job().state() == v1::RESTARTING) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(job->job().state(), v1::RESTARTING) << client::FormatJobDescription(*job);
  EXPECT_THAT(job->job().reason(), HasSubstr("worker/1 (rank 1) was preempted (worker/1 was "
                                             "drained)"));
  EXPECT_EQ(job->job().restarts(), 0);
  const int64_t stopped_after = job->workers(0).step();
  auto status = cluster_->Status();
  ASSERT_TRUE(status.ok()) << status.status();
  for (const v1::TaskStatus& t : status->tasks()) {
    EXPECT_EQ(t.state(), v1::ALIVE) << t.ShortDebugString();
    EXPECT_EQ(t.draining(), t.task().index() == 1) << t.ShortDebugString();
  }
  EXPECT_THAT(Cli({"status"}).output, HasSubstr("DRAINING"));
  r = Cli({"drain", "worker/1", "--undo"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto last = jobs_->WatchJob(
      *id, [](const v1::JobEvent&) {}, absl::Now() + absl::Seconds(60));
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->job().state(), v1::SUCCEEDED) << last->job().reason();
  EXPECT_EQ(last->job().attempt(), 2);
  EXPECT_EQ(last->job().progress().restored_step(), stopped_after);
  EXPECT_EQ(Cli({"drain", "worker/7"}).exit_code, 1);  // NOT_FOUND
}

// Elastic worker counts with three lockstepd: worker/2 is SIGKILLed and not replaced, so
// after the replacement timeout the job goes on with two (the global batch kept); when
// worker/2 comes back the job stops after a step with a checkpoint and grows back to three.
// The loss keeps falling across both changes and the final accuracy holds.
// The steps of the `tag` scalars in the event files of `dir`, in file order.
std::vector<int64_t> ScalarSteps(const std::string& dir, const std::string& tag) {
  std::vector<int64_t> steps;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return steps;
  while (dirent* e = readdir(d)) {
    if (!absl::StartsWith(e->d_name, "events.out.tfevents.")) continue;
    auto reader = TfRecordReader::Open(dir + "/" + e->d_name);
    if (!reader.ok()) continue;
    for (absl::StatusOr<std::string> record = reader->Next(); record.ok();
         record = reader->Next()) {
      v1::Event event;
      if (!event.ParseFromString(*record)) continue;
      for (const v1::Summary::Value& v : event.summary().value()) {
        if (v.tag() == tag) steps.push_back(event.step());
      }
    }
  }
  closedir(d);
  return steps;
}

// TF_CONFIG's evaluator: a 2-worker job that asks for one trains while evaluator/0, outside
// the training group, evaluates every checkpoint the chief writes exactly once (the chief
// sends them over the data plane: the evaluator reads no checkpoint directory) and writes
// the eval summaries to <summaries.dir>/eval; `status` and `describe` show it.
TEST(EvaluatorTest, EvaluatesEveryCheckpointOnceAndWritesEvalSummaries) {
  client::LocalClusterOptions o;
  o.coordinator_bin = Runfile("coordinator/lockstep-coordinator");
  o.lockstepd_bin = Runfile("worker/lockstepd");
  o.workers = 2;
  o.evaluator = true;
  o.work_dir = TmpDir("evaluator");
  o.heartbeat_interval = kInterval;
  o.heartbeat_timeout = kTimeout;
  o.static_tf_config = true;
  auto cluster = client::LocalCluster::StartCoordinator(o);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE((*cluster)->StartWorkers().ok());
  auto status = (*cluster)->WaitForAlive(3, absl::Now() + absl::Seconds(20));
  ASSERT_TRUE(status.ok()) << status.status();
  auto jobs = client::JobServiceClient::Create((*cluster)->coordinator_address(),
                                               (*cluster)->client_tls(), absl::Seconds(10));
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  v1::JobSpec spec = DigitsJob(o.work_dir + "/job");
  spec.set_epochs(6);
  spec.set_num_workers(2);
  spec.mutable_checkpoint()->set_every_steps(40);
  spec.mutable_evaluator()->set_enabled(true);
  // Without eval data there is nothing to evaluate: refused at submit, naming the field.
  v1::JobSpec no_eval = spec;
  no_eval.mutable_data()->set_eval_fraction(0);
  no_eval.set_epochs(0);
  no_eval.set_steps(10);
  auto refused = (*jobs)->SubmitJob(no_eval);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_THAT(refused.status().message(),
              HasSubstr("evaluator.enabled: the evaluator needs eval data"));

  auto id = (*jobs)->SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  absl::StatusOr<v1::GetJobResponse> job;
  bool seen_running = false;
  while (absl::Now() < deadline) {
    job = (*jobs)->GetJob(*id);
    ASSERT_TRUE(job.ok()) << job.status();
    if (!seen_running && job->job().state() == v1::RUNNING) {
      // The evaluator is busy with the job, as its workers are.
      auto running = (*cluster)->Status();
      ASSERT_TRUE(running.ok()) << running.status();
      for (const v1::TaskStatus& t : running->tasks()) {
        if (t.task().type() == "evaluator") {
          seen_running = true;
          EXPECT_EQ(t.job_id(), *id);
        }
      }
    }
    if (job->job().state() == v1::SUCCEEDED && job->evaluator().phase() == v1::JobReport::DONE) {
      break;
    }
    ASSERT_NE(job->job().state(), v1::FAILED) << job->job().reason();
    ASSERT_NE(job->evaluator().phase(), v1::JobReport::FAILED) << job->evaluator().error();
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_EQ(job->job().state(), v1::SUCCEEDED) << client::FormatJobDescription(*job);
  ASSERT_EQ(job->evaluator().phase(), v1::JobReport::DONE) << client::FormatJobDescription(*job);
  EXPECT_TRUE(seen_running);
  EXPECT_EQ(job->evaluator_task().type(), "evaluator");
  // Every checkpoint the chief wrote: every 40 steps, and the last step.
  const int64_t total = job->job().progress().total_steps();
  ASSERT_GT(total, 80);
  std::vector<int64_t> want;
  for (int64_t step = 40; step < total; step += 40) want.push_back(step);
  want.push_back(total);
  EXPECT_EQ(job->evaluator().checkpoints_evaluated(), static_cast<int>(want.size()));
  EXPECT_EQ(job->evaluator().step(), total);
  EXPECT_GE(job->evaluator().eval_accuracy(), 0.9);
  // The chief's own final evaluation and the evaluator's agree: the same weights, the same
  // held-out data.
  EXPECT_NEAR(job->evaluator().eval_accuracy(), job->job().progress().eval_accuracy(), 1e-9);
  const std::string eval_dir = o.work_dir + "/job/tb/eval";
  EXPECT_EQ(job->evaluator().summary_dir(), eval_dir);
  EXPECT_GT(ValidateEventFiles(eval_dir), 0);
  EXPECT_EQ(ScalarSteps(eval_dir, "accuracy/eval"), want);  // each once, in order
  EXPECT_EQ(ScalarSteps(eval_dir, "loss/eval"), want);

  std::vector<std::string> argv = {Runfile("client/lockstep"), "describe", *id,
                                   "--coordinator=" + (*cluster)->coordinator_address()};
  for (const std::string& f : (*cluster)->cli_flags()) argv.push_back(f);
  Result r = RunTool(argv, o.work_dir + "/cli.out");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("Evaluator: evaluator/0 DONE, ", want.size(),
                                               " checkpoints evaluated")));
}

TEST(ElasticTest, AJobShrinksToTheSurvivorsAndGrowsBackWhenAWorkerReturns) {
  client::LocalClusterOptions o;
  o.coordinator_bin = Runfile("coordinator/lockstep-coordinator");
  o.lockstepd_bin = Runfile("worker/lockstepd");
  o.workers = 3;
  o.work_dir = TmpDir("elastic");
  o.heartbeat_interval = kInterval;
  o.heartbeat_timeout = kTimeout;
  o.static_tf_config = true;
  auto cluster = client::LocalCluster::StartCoordinator(o);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE((*cluster)->StartWorkers().ok());
  ASSERT_TRUE((*cluster)->WaitForAlive(3, absl::Now() + absl::Seconds(20)).ok());
  auto jobs = client::JobServiceClient::Create((*cluster)->coordinator_address(),
                                               (*cluster)->client_tls(), absl::Seconds(10));
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  v1::JobSpec spec = DigitsJob(o.work_dir + "/job");
  spec.set_epochs(600);  // 17400 steps: long enough to shrink and grow while it trains
  spec.set_num_workers(3);
  spec.mutable_checkpoint()->set_every_steps(200);
  spec.mutable_restart_policy()->set_max_restarts(2);
  spec.mutable_restart_policy()->set_min_workers(2);
  spec.mutable_restart_policy()->set_replacement_timeout_ms(4000);
  auto id = (*jobs)->SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  // Waits for `done` on the job; its description on failure.
  auto wait = [&](const std::function<bool(const v1::GetJobResponse&)>& done,
                  absl::Duration limit) -> absl::StatusOr<v1::GetJobResponse> {
    const absl::Time deadline = absl::Now() + limit;
    absl::StatusOr<v1::GetJobResponse> job;
    while (absl::Now() < deadline) {
      job = (*jobs)->GetJob(*id);
      if (job.ok() && done(*job)) return job;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return absl::DeadlineExceededError(job.ok() ? client::FormatJobDescription(*job)
                                                : job.status().ToString());
  };
  auto before = wait([](const v1::GetJobResponse& j) { return j.job().progress().step() >= 1000; },
                     absl::Seconds(60));
  ASSERT_TRUE(before.ok()) << before.status();
  const double loss_before = before->job().progress().loss();
  (*cluster)->worker(2)->Signal(SIGKILL);
  const absl::Time killed = absl::Now();
  auto shrunk = wait(
      [](const v1::GetJobResponse& j) {
        return j.job().state() == v1::RUNNING && j.job().attempt() == 2;
      },
      kTimeout + absl::Seconds(15));
  ASSERT_TRUE(shrunk.ok()) << shrunk.status();
  EXPECT_THAT(shrunk->job().reason(), HasSubstr("2 of 3 workers: no replacement came within"));
  std::cerr << "worker/2 killed: running on 2 workers after " << absl::Now() - killed << "\n";
  ASSERT_TRUE((*cluster)->StartWorker(2).ok());
  const absl::Time returned = absl::Now();
  auto grown = wait(
      [](const v1::GetJobResponse& j) {
        return j.job().state() == v1::RUNNING && j.job().attempt() == 3;
      },
      absl::Seconds(30));
  ASSERT_TRUE(grown.ok()) << grown.status();
  std::cerr << "worker/2 back: running on 3 workers after " << absl::Now() - returned << "\n";
  EXPECT_THAT(grown->job().transitions(grown->job().transitions_size() - 2).reason(),
              HasSubstr("growing from 2 to 3 workers"));
  auto last = (*jobs)->WatchJob(
      *id, [](const v1::JobEvent&) {}, absl::Now() + absl::Seconds(120));
  ASSERT_TRUE(last.ok()) << last.status();
  ASSERT_EQ(last->job().state(), v1::SUCCEEDED) << last->job().reason();
  EXPECT_EQ(last->job().restarts(), 1);  // the loss; the growth is not counted
  EXPECT_LT(last->job().progress().loss(), loss_before);
  EXPECT_GE(last->job().progress().eval_accuracy(), 0.96);
  std::cerr << "elastic digits: loss " << loss_before << " at step "
            << before->job().progress().step() << ", " << last->job().progress().loss()
            << " at the end; test accuracy " << last->job().progress().eval_accuracy() << "\n";
}

// The coordinator is SIGKILLed while a job trains and started again on the same job store
// and port: every job is still listed, and the running one is re-adopted, not restarted:
// its workers train on meanwhile, register again with their incarnations, and its step keeps
// rising in the same attempt.
TEST_F(JobsTest, RestartedCoordinatorReadoptsTheRunningJobAndKeepsEveryJob) {
  v1::JobSpec three = EndlessJob(dir());
  three.set_num_workers(3);  // stays PENDING: two workers only
  auto running = jobs_->SubmitJob(EndlessJob(dir()));
  auto pending = jobs_->SubmitJob(three);
  auto cancelled = jobs_->SubmitJob(three);
  ASSERT_TRUE(pending.ok() && running.ok() && cancelled.ok());
  WaitForStep(*running, 100, /*workers=*/2);
  ASSERT_TRUE(jobs_->CancelJob(*cancelled).ok());
  // The coordinator dies (its workers stay); a new one starts on the same job store.
  const std::string address = cluster_->coordinator_address();
  cluster_->coordinator()->Signal(SIGKILL);
  ASSERT_TRUE(cluster_->coordinator()->Wait(absl::Now() + absl::Seconds(10)).ok());
  const absl::Time killed = absl::Now();
  client::LocalClusterOptions o = cluster_->options();
  o.workers = 0;
  o.coordinator_port = std::stoi(address.substr(address.rfind(':') + 1));
  auto cluster = client::LocalCluster::StartCoordinator(o);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  old_cluster_ = std::move(cluster_);  // its workers are reaped at the end
  cluster_ = std::move(*cluster);
  ASSERT_EQ(cluster_->coordinator_address(), address);
  Result r = Cli({"jobs", "--output=json"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const std::string& id : {*pending, *running, *cancelled})
    EXPECT_THAT(r.output, HasSubstr(id));
  Connect();
  auto jobs = jobs_->ListJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 3u);
  EXPECT_EQ(jobs_->GetJob(*pending)->job().state(), v1::PENDING);
  EXPECT_EQ(jobs_->GetJob(*cancelled)->job().state(), v1::CANCELLED);
  // The running job: the same attempt, reporting again once its workers are back.
  const int64_t before = jobs_->GetJob(*running)->job().progress().step();
  absl::StatusOr<v1::GetJobResponse> job;
  while (absl::Now() < killed + absl::Seconds(20)) {
    job = jobs_->GetJob(*running);
    ASSERT_TRUE(job.ok()) << job.status();
    ASSERT_EQ(job->job().state(), v1::RUNNING) << client::FormatJobDescription(*job);
    if (job->job().progress().step() > before + 100) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_GT(job->job().progress().step(), before + 100) << client::FormatJobDescription(*job);
  EXPECT_EQ(job->job().attempt(), 1);
  EXPECT_EQ(job->job().restarts(), 0);
  std::cerr << "coordinator killed and started again: job " << *running << " reported step "
            << job->job().progress().step() << " (from " << before << ") " << absl::Now() - killed
            << " after the kill\n";
  r = Cli({"jobs"});
  EXPECT_THAT(r.output, HasSubstr("3 jobs"));
  EXPECT_TRUE(jobs_->CancelJob(*running).ok());
}

}  // namespace
}  // namespace lockstep
