#include "worker/job_runner.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "jobspec/lower.h"
#include "worker/fake_worker_service_client.h"
#include "worker/partition_group.h"

namespace lockstep::worker {
namespace {

// A small one-worker job on synthetic data (no files).
v1::Assignment RunAssignment(const std::string& job, int attempt, int64_t steps) {
  v1::Assignment a;
  v1::Partition* p = a.mutable_run();
  p->set_job_id(job);
  p->set_attempt(attempt);
  p->set_rendezvous_prefix(absl::StrCat("jobs/", job, "/", attempt));
  SetWorkerGroup({"127.0.0.1:2000"}, 0, p);
  p->set_num_replicas_in_sync(1);
  v1::JobSpec* spec = p->mutable_spec();
  spec->set_strategy(v1::ONE_DEVICE);
  spec->mutable_model()->add_input_shape(16);
  spec->mutable_model()->set_loss(v1::SPARSE_CATEGORICAL_CROSSENTROPY);
  spec->mutable_model()->add_layers()->mutable_dense()->set_units(4);
  spec->mutable_optimizer()->mutable_sgd();
  spec->mutable_optimizer()->mutable_learning_rate()->mutable_constant()->set_value(0.1);
  spec->mutable_data()->mutable_train()->set_format(v1::DataSource::SYNTHETIC);
  spec->mutable_data()->mutable_train()->set_synthetic_examples(8);
  spec->set_global_batch_size(8);
  spec->set_steps(steps);
  spec->set_seed(3);
  absl::StatusOr<v1::JobPlan> plan =
      jobspec::LowerJobSpec(*spec, jobspec::ClusterFacts::OneWorker(1));
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (plan.ok()) *p->mutable_plan() = *plan;
  return a;
}

v1::Assignment AbortAssignment(const std::string& job, int attempt) {
  v1::Assignment a;
  a.mutable_abort()->set_job_id(job);
  a.mutable_abort()->set_attempt(attempt);
  a.mutable_abort()->set_reason("cancelled by the user");
  return a;
}

JobExecutorOptions Options(WorkerServiceClient* client) {
  JobExecutorOptions o;
  o.client = client;
  return o;
}

absl::Time Soon() { return absl::Now() + absl::Seconds(20); }

TEST(JobRunner, RunsAPartitionAndRepeatsItsFinalReportThenForgetsIt) {
  FakeWorkerServiceClient client;
  JobRunner runner(Options(&client), /*final_report_repeats=*/2);
  runner.Handle(RunAssignment("job-1", 0, 30));
  runner.Handle(RunAssignment("job-1", 0, 30));  // a duplicate push is ignored
  ASSERT_TRUE(runner.WaitIdle(Soon()));
  // Heartbeats that did not reach the coordinator do not count.
  for (int i = 0; i < 5; ++i) ASSERT_EQ(runner.Reports().size(), 1u);
  for (int i = 0; i < 2; ++i) {
    std::vector<v1::JobReport> reports = runner.Reports();
    ASSERT_EQ(reports.size(), 1u);
    EXPECT_EQ(reports[0].phase(), v1::JobReport::DONE) << reports[0].error();
    EXPECT_EQ(reports[0].step(), 30);
    EXPECT_EQ(reports[0].total_steps(), 30);
    runner.ReportsDelivered();
  }
  EXPECT_TRUE(runner.Reports().empty());
}

TEST(JobRunner, AbortJobStopsItWithinTwoSeconds) {
  FakeWorkerServiceClient client;
  JobRunner runner(Options(&client));
  runner.Handle(RunAssignment("job-1", 0, 100000000));
  EXPECT_EQ(runner.running(), 1);
  const absl::Time start = absl::Now();
  runner.Handle(AbortAssignment("job-1", 0));
  ASSERT_TRUE(runner.WaitIdle(start + absl::Seconds(2)));
  std::vector<v1::JobReport> reports = runner.Reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].phase(), v1::JobReport::ABORTED);
  EXPECT_NE(reports[0].error().find("cancelled by the user"), std::string::npos);
}

// The coordinator's peer-loss notice (AbortJob.lost) ends the job as an abort does, its
// reason kept; the strategy's collectives are told the lost rank (distribute's tests show
// NCCL's then name it).
TEST(JobRunner, PeerLossNoticeStopsItWithinTwoSeconds) {
  FakeWorkerServiceClient client;
  JobRunner runner(Options(&client));
  runner.Handle(RunAssignment("job-1", 0, 100000000));
  EXPECT_EQ(runner.running(), 1);
  v1::Assignment lost = AbortAssignment("job-1", 0);
  lost.mutable_abort()->set_reason("worker/1 (rank 1) was lost: no heartbeat for 3s");
  lost.mutable_abort()->mutable_lost()->set_worker_rank(1);
  const absl::Time start = absl::Now();
  runner.Handle(lost);
  ASSERT_TRUE(runner.WaitIdle(start + absl::Seconds(2)));
  std::vector<v1::JobReport> reports = runner.Reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].phase(), v1::JobReport::ABORTED);
  EXPECT_NE(reports[0].error().find("worker/1 (rank 1) was lost"), std::string::npos)
      << reports[0].error();
}

TEST(JobRunner, ANewerAttemptReplacesTheOlder) {
  FakeWorkerServiceClient client;
  JobRunner runner(Options(&client));
  runner.Handle(RunAssignment("job-1", 0, 100000000));
  runner.Handle(RunAssignment("job-1", 1, 10));
  ASSERT_TRUE(runner.WaitIdle(Soon()));
  std::vector<v1::JobReport> reports = runner.Reports();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].attempt(), 0);
  EXPECT_EQ(reports[0].phase(), v1::JobReport::ABORTED);
  EXPECT_EQ(reports[1].attempt(), 1);
  EXPECT_EQ(reports[1].phase(), v1::JobReport::DONE) << reports[1].error();
}

TEST(JobRunner, APartitionThatCannotStartIsReportedFailed) {
  FakeWorkerServiceClient client;
  JobRunner runner(Options(&client));
  v1::Assignment bad = RunAssignment("job-bad", 0, 10);
  bad.mutable_run()->clear_rendezvous_prefix();
  runner.Handle(bad);
  std::vector<v1::JobReport> reports = runner.Reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].phase(), v1::JobReport::FAILED);
  EXPECT_NE(reports[0].error().find("partition.rendezvous_prefix"), std::string::npos)
      << reports[0].error();
}

TEST(JobRunner, DropAllAbortsEveryJob) {
  FakeWorkerServiceClient client;
  JobRunner runner(Options(&client));
  runner.Handle(RunAssignment("job-1", 0, 100000000));
  runner.Handle(RunAssignment("job-2", 0, 100000000));
  runner.DropAll("the coordinator restarted");
  ASSERT_TRUE(runner.WaitIdle(absl::Now() + absl::Seconds(2)));
  std::vector<v1::JobReport> reports = runner.Reports();
  ASSERT_EQ(reports.size(), 2u);
  for (const v1::JobReport& r : reports) {
    EXPECT_EQ(r.phase(), v1::JobReport::ABORTED) << r.job_id();
  }
}

}  // namespace
}  // namespace lockstep::worker
