#include "coordinator/job_attempt.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace coordinator {
namespace {

using ::testing::HasSubstr;

const TaskRef kW0{"worker", 0}, kW1{"worker", 1};
const absl::Time kNow = absl::FromUnixSeconds(1000);
constexpr absl::Duration kGrace = absl::Seconds(5);

JobAttempt TwoWorkers() {
  return JobAttempt("job-000001", 2, v1::JobSpec(), v1::JobPlan(), {{kW0, 10}, {kW1, 11}});
}

v1::JobReport Report(v1::JobReport::Phase phase, int64_t step = 7, const std::string& error = "") {
  v1::JobReport r;
  r.set_job_id("job-000001");
  r.set_attempt(2);
  r.set_phase(phase);
  r.set_step(step);
  r.set_error(error);
  return r;
}

v1::TaskStatus Status(const TaskRef& t, uint64_t incarnation, v1::TaskState state) {
  v1::TaskStatus s;
  s.mutable_task()->set_type(t.type);
  s.mutable_task()->set_index(t.index);
  s.set_incarnation(incarnation);
  s.set_state(state);
  s.set_address("10.0.0.1:2222");
  return s;
}

TEST(JobAttemptTest, EveryWorkerDoneSucceeds) {
  JobAttempt a = TwoWorkers();
  EXPECT_FALSE(a.OnReport(kW0, Report(v1::JobReport::DONE), kNow, kGrace));
  EXPECT_EQ(a.Settle(kNow), JobAttempt::Outcome::kUndecided);
  a.OnReport(kW1, Report(v1::JobReport::DONE), kNow, kGrace);
  EXPECT_EQ(a.Settle(kNow), JobAttempt::Outcome::kSucceeded);
  EXPECT_EQ(a.ReportOf(1)->phase(), v1::JobReport::DONE);
}

TEST(JobAttemptTest, AFailedReportMakesItFailingUntilTheOthersLeftOrTheGraceRanOut) {
  JobAttempt a = TwoWorkers();
  EXPECT_TRUE(a.OnReport(kW1, Report(v1::JobReport::FAILED, 7, "loss is NaN"), kNow, kGrace));
  EXPECT_EQ(a.state(), JobAttempt::State::kFailing);
  EXPECT_EQ(a.failure(), "worker/1 (rank 1) failed: loss is NaN");
  // Only worker/0 must still be told.
  ASSERT_EQ(a.Unended().size(), 1u);
  EXPECT_EQ(a.Unended()[0].task, kW0);
  EXPECT_EQ(a.Unended()[0].incarnation, 10u);
  EXPECT_EQ(a.Settle(kNow), JobAttempt::Outcome::kUndecided);
  EXPECT_EQ(a.Settle(kNow + kGrace), JobAttempt::Outcome::kFailed);
  // A second failure keeps the first reason and does not abort again.
  EXPECT_FALSE(a.OnReport(kW0, Report(v1::JobReport::FAILED, 7, "peer rank 1"), kNow, kGrace));
  EXPECT_EQ(a.failure(), "worker/1 (rank 1) failed: loss is NaN");
  EXPECT_EQ(a.Settle(kNow), JobAttempt::Outcome::kFailed);  // every worker ended it
}

// A peer's collective usually reports first; the failed worker's own error is the reason.
TEST(JobAttemptTest, AWorkersOwnErrorReplacesARelayedOneAsTheReason) {
  JobAttempt a = TwoWorkers();
  EXPECT_TRUE(a.OnReport(
      kW1, Report(v1::JobReport::FAILED, 7, "receiving from peer rank 0: the connection closed"),
      kNow, kGrace));
  a.OnReport(kW0, Report(v1::JobReport::FAILED, 7, "checkpoint: No space left on device"), kNow,
             kGrace);
  EXPECT_THAT(a.failure(), ::testing::StartsWith("worker/0 (rank 0) failed: checkpoint: No space "
                                                 "left on device; first seen by worker/1"));
  EXPECT_TRUE(IsRelayedFailure("rank 2: peer rank 1 left the group after peer rank 0 failed"));
  EXPECT_FALSE(IsRelayedFailure("loss is NaN"));
}

TEST(JobAttemptTest, APreemptionNamesTheWorkerThatAskedOnceEveryWorkerStopped) {
  JobAttempt a = TwoWorkers();
  v1::JobReport asked = Report(v1::JobReport::PREEMPTED, 42);
  asked.set_preemption("lockstepd received SIGTERM");
  a.OnReport(kW1, asked, kNow, kGrace);
  EXPECT_EQ(a.Settle(kNow), JobAttempt::Outcome::kUndecided);
  a.OnReport(kW0, Report(v1::JobReport::PREEMPTED, 42), kNow, kGrace);
  EXPECT_EQ(a.Settle(kNow), JobAttempt::Outcome::kPreempted);
  EXPECT_THAT(a.preemption(), HasSubstr("worker/1 (rank 1) was preempted (lockstepd received "
                                        "SIGTERM); the job stopped after step 42"));
}

TEST(JobAttemptTest, FindsAWorkerLostRestartedOrGone) {
  JobAttempt a = TwoWorkers();
  v1::TaskStatus w0 = Status(kW0, 10, v1::ALIVE), w1 = Status(kW1, 11, v1::ALIVE);
  std::map<TaskRef, const v1::TaskStatus*> tasks = {{kW0, &w0}, {kW1, &w1}};
  EXPECT_EQ(a.FindLostWorker(tasks, absl::Seconds(3)), "");
  w1.set_state(v1::LOST);
  EXPECT_THAT(a.FindLostWorker(tasks, absl::Seconds(3)),
              HasSubstr("worker/1 (rank 1) was lost: no heartbeat for 3s; check that lockstepd "
                        "at 10.0.0.1:2222 is running"));
  w1.set_state(v1::ALIVE);
  w1.set_incarnation(99);
  EXPECT_THAT(a.FindLostWorker(tasks, absl::Seconds(3)), HasSubstr("worker/1 (rank 1) restarted"));
  tasks.erase(kW1);
  EXPECT_THAT(a.FindLostWorker(tasks, absl::Seconds(3)), HasSubstr("is no longer registered"));
  // A worker that ended the attempt is not looked for.
  a.OnReport(kW1, Report(v1::JobReport::ABORTED), kNow, kGrace);
  EXPECT_EQ(a.FindLostWorker(tasks, absl::Seconds(3)), "");
}

TEST(JobAttemptTest, AnEndedAttemptHoldsItsWorkersUntilTheyLeft) {
  JobAttempt a = TwoWorkers();
  a.OnReport(kW0, Report(v1::JobReport::FAILED), kNow, kGrace);
  a.End(kNow, kGrace);
  EXPECT_EQ(a.state(), JobAttempt::State::kEnded);
  EXPECT_FALSE(a.Holds(kW0));  // it had ended the attempt
  EXPECT_TRUE(a.Holds(kW1));
  EXPECT_FALSE(a.AllLeft());
  v1::TaskStatus w1 = Status(kW1, 11, v1::ALIVE);
  std::map<TaskRef, const v1::TaskStatus*> tasks = {{kW1, &w1}};
  // Still reporting the attempt as running: busy for another grace.
  a.OnLeavingReport(kW1, Report(v1::JobReport::TRAINING), kNow + kGrace, kGrace);
  a.ReleaseLeft(tasks, kNow + kGrace + absl::Seconds(1));
  EXPECT_TRUE(a.Holds(kW1));
  // Silent past its grace: let go.
  a.ReleaseLeft(tasks, kNow + 2 * kGrace);
  EXPECT_FALSE(a.Holds(kW1));
  EXPECT_TRUE(a.AllLeft());
}

TEST(JobAttemptTest, ALeavingWorkerThatReportsItsEndOrRestartsIsLetGo) {
  JobAttempt a = TwoWorkers();
  a.End(kNow, kGrace);
  a.OnLeavingReport(kW0, Report(v1::JobReport::ABORTED), kNow, kGrace);
  EXPECT_FALSE(a.Holds(kW0));
  v1::TaskStatus w1 = Status(kW1, 12, v1::ALIVE);  // a new process
  a.ReleaseLeft({{kW1, &w1}}, kNow);
  EXPECT_FALSE(a.Holds(kW1));
  // Reports of tasks outside the attempt are ignored.
  EXPECT_FALSE(a.OnReport(TaskRef{"worker", 7}, Report(v1::JobReport::FAILED), kNow, kGrace));
  EXPECT_EQ(a.RankOf(TaskRef{"worker", 7}), -1);
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep
