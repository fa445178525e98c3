#include "coordinator/diagnostics_service.h"

#include <cstdlib>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/metrics.h"
#include "coordinator/coordinator_metrics.h"
#include "coordinator/membership.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace coordinator {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kSecond = 1'000'000;

class DiagnosticsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir =
        absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    membership_ = std::make_unique<Membership>(MembershipOptions{}, &clock_);
    auto store = JobStore::Open({dir, &clock_});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    jobs_ = std::make_unique<JobService>(store_.get(), membership_.get(), &clock_);
    ASSERT_TRUE(jobs_->Recover().ok());
    diagnostics_ = std::make_unique<DiagnosticsService>(jobs_.get(), &clock_);
    for (int i = 0; i < 2; ++i) {
      RegisterRequest r;
      r.address = absl::StrCat("127.0.0.1:", 5000 + i);
      r.incarnation = 100 + i;
      r.devices.emplace_back().set_index(0);
      auto reg = membership_->Register(r);
      ASSERT_TRUE(reg.ok()) << reg.status();
      tasks_.push_back(reg->task);
    }
    // A small valid job for both workers (it never trains here).
    v1::JobSpec spec;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                    R"({"name": "diag", "numWorkers": 2, "globalBatchSize": 64, "steps": 10,
                        "model": {"inputShape": [8], "layers": [{"dense": {"units": 4}}],
                                  "loss": "SPARSE_CATEGORICAL_CROSSENTROPY"},
                        "optimizer": {"sgd": {}, "learningRate": {"constant": {"value": 0.1}}},
                        "data": {"train": {"format": "SYNTHETIC", "syntheticExamples": 256}}})",
                    &spec)
                    .ok());
    auto id = jobs_->Submit(spec);
    ASSERT_TRUE(id.ok()) << id.status();
    id_ = *id;
    auto job = jobs_->Get(id_);
    ASSERT_TRUE(job.ok());
    ASSERT_EQ(job->job().state(), v1::RUNNING);
  }

  // Rank `rank`'s heartbeat: in collective #`open` for `wait_s` (0: none open), with `lines`.
  v1::JobDiagnostics Beat(int rank, int64_t entered, int64_t open, double wait_s,
                          std::vector<std::string> lines = {}, int64_t first_seq = 1) {
    v1::JobDiagnostics d;
    d.set_job_id(id_);
    d.set_attempt(1);
    v1::FlightRecord* r = d.mutable_record();
    r->set_job_id(id_);
    r->set_attempt(1);
    r->set_worker_rank(rank);
    const int64_t now = absl::ToUnixMicros(clock_.Now());
    r->set_recorded_unix_micros(now);
    r->set_phase(open > 0 ? v1::PHASE_ALL_REDUCE : v1::PHASE_INPUT);
    r->set_step(3);
    r->set_phase_entered_unix_micros(now - static_cast<int64_t>(wait_s * kSecond));
    r->set_last_seq_entered(entered);
    v1::CollectiveRecord* c = r->add_collectives();
    c->set_seq(entered);
    c->set_kind("all-reduce");
    c->set_bytes(1024);
    c->set_entered_unix_micros(now - static_cast<int64_t>(wait_s * kSecond));
    if (open == 0) c->set_left_unix_micros(now);
    for (const std::string& text : lines) {
      v1::LogLine* line = d.add_log_lines();
      line->set_seq(first_seq++);
      line->set_text(text);
    }
    return d;
  }

  v1::JobRecord Record() { return jobs_->Get(id_)->job(); }

  FakeClock clock_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<JobService> jobs_;
  std::unique_ptr<DiagnosticsService> diagnostics_;
  std::vector<TaskRef> tasks_;
  std::string id_;
};

TEST_F(DiagnosticsServiceTest, TheVerdictNamesTheRankThatNeverEntered) {
  const v1::JobRecord job = Record();
  const TaskRef rank0{job.attempt_workers(0).task_type(), job.attempt_workers(0).task_index()};
  const TaskRef rank1{job.attempt_workers(1).task_type(), job.attempt_workers(1).task_index()};
  diagnostics_->OnHeartbeat(rank0, {Beat(0, 7, 7, 0.2)});
  diagnostics_->OnHeartbeat(rank1, {Beat(1, 6, 0, 0.2)});
  EXPECT_EQ(diagnostics_->Diagnose(job).hang_verdict(), "");
  // 1 s later, both still there: rank 0 has waited 1.2 s in #7 (more than half a heartbeat).
  clock_.Advance(absl::Seconds(1));
  diagnostics_->OnHeartbeat(rank0, {Beat(0, 7, 7, 1.2)});
  diagnostics_->OnHeartbeat(rank1, {Beat(1, 6, 0, 1.2)});
  const v1::JobDiagnosis d = diagnostics_->Diagnose(job);
  EXPECT_EQ(d.hang_verdict(),
            absl::StrCat("all-reduce #7 (1 KiB): ", rank0.ToString(), " waiting 1.2 s; ",
                         rank1.ToString(), " never entered it: in input at step 3 for 1.2 s"));
  ASSERT_EQ(d.ranks_size(), 2);
  EXPECT_EQ(d.ranks(0).heartbeat_age_ms(), 0);
  EXPECT_EQ(d.ranks(1).record().worker_rank(), 1);

  v1::GetJobResponse response = *jobs_->Get(id_);
  diagnostics_->Annotate(&response);
  EXPECT_EQ(response.diagnosis().hang_verdict(), d.hang_verdict());
  EXPECT_EQ(response.diagnosis().ranks_size(), 0);  // `dump` shows them

  auto dump = diagnostics_->Dump(id_);
  ASSERT_TRUE(dump.ok()) << dump.status();
  EXPECT_EQ(dump->diagnosis().ranks_size(), 2);
  EXPECT_EQ(diagnostics_->Dump("job-999999").status().code(), absl::StatusCode::kNotFound);

  v1::GetClusterStatusResponse status;
  for (const TaskRef& t : {rank0, rank1}) {
    v1::TaskStatus* s = status.add_tasks();
    s->mutable_task()->set_type(t.type);
    s->mutable_task()->set_index(t.index);
    s->set_job_id(id_);
  }
  diagnostics_->Annotate(&status);
  ASSERT_EQ(status.diagnoses_size(), 1);
  EXPECT_EQ(status.diagnoses(0).job_id(), id_);
}

// A rank whose compute stays 3x the other's over the window is a straggler: named in the
// diagnosis, with its figures, and in the coordinator's metrics while it stays one.
TEST_F(DiagnosticsServiceTest, AStragglerIsNamedAndMeasuredInTheMetrics) {
  MetricsRegistry registry;
  CoordinatorMetrics metrics(&registry);
  metrics.Track(membership_.get(), jobs_.get(), diagnostics_.get());
  auto beat = [&](int rank, double compute_ms) {
    v1::JobDiagnostics d = Beat(rank, 5, 0, 0);
    d.mutable_record()->set_window_steps(60);
    d.mutable_record()->set_mean_compute_ms(compute_ms);
    diagnostics_->OnHeartbeat(tasks_[rank], {d});
  };
  beat(0, 10.0);
  beat(1, 30.0);
  v1::JobDiagnosis d = diagnostics_->Diagnose(Record());
  ASSERT_EQ(d.straggler_ranks_size(), 1) << d.DebugString();
  EXPECT_EQ(d.straggler_ranks(0).task(), "worker/1");
  EXPECT_DOUBLE_EQ(d.straggler_ranks(0).compute_ms(), 30.0);
  EXPECT_DOUBLE_EQ(d.straggler_ranks(0).median_ms(), 10.0);
  ASSERT_EQ(d.stragglers_size(), 1);
  EXPECT_THAT(d.stragglers(0), HasSubstr("worker/1: compute 30.00 ms per step over 60 steps"));
  EXPECT_THAT(registry.TextFormat(),
              HasSubstr(absl::StrCat("lockstep_coordinator_straggler_compute_ratio{job=\"", id_,
                                     "\",task=\"worker/1\"} 3")));
  EXPECT_THAT(registry.TextFormat(), HasSubstr("lockstep_coordinator_hung_jobs 0"));
  // It caught up: no straggler, and its series is gone.
  beat(1, 10.5);
  EXPECT_EQ(diagnostics_->Diagnose(Record()).straggler_ranks_size(), 0);
  EXPECT_THAT(registry.TextFormat(),
              ::testing::Not(HasSubstr("lockstep_coordinator_straggler_compute_ratio{")));
  metrics.Track(nullptr, nullptr);
}

TEST_F(DiagnosticsServiceTest, ARankThatSentNothingIsNamed) {
  const v1::JobRecord job = Record();
  const TaskRef rank0{job.attempt_workers(0).task_type(), job.attempt_workers(0).task_index()};
  diagnostics_->OnHeartbeat(rank0, {Beat(0, 7, 7, 3)});
  EXPECT_THAT(diagnostics_->Diagnose(job).hang_verdict(), HasSubstr("has sent no flight record"));
}

TEST_F(DiagnosticsServiceTest, LogsComeOncePerLineAndEndWhenTheJobEnded) {
  const v1::JobRecord job = Record();
  const TaskRef rank0{job.attempt_workers(0).task_type(), job.attempt_workers(0).task_index()};
  const TaskRef rank1{job.attempt_workers(1).task_type(), job.attempt_workers(1).task_index()};
  diagnostics_->OnHeartbeat(rank0, {Beat(0, 1, 0, 0, {"a", "b"})});
  diagnostics_->OnHeartbeat(rank0, {Beat(0, 1, 0, 0, {"b", "c"}, 2)});  // "b" again
  diagnostics_->OnHeartbeat(rank1, {Beat(1, 1, 0, 0, {"x"})});

  v1::GetJobLogsRequest request;
  request.set_job_id(id_);
  DiagnosticsService::LogCursor cursor;
  std::vector<std::string> texts;
  for (int i = 0; i < 3; ++i) {
    auto next = diagnostics_->NextLogs(request, &cursor, clock_.Now());
    ASSERT_TRUE(next.ok()) << next.status();
    if (next->end()) break;
    for (const v1::LogLine& l : next->lines()) {
      texts.push_back(absl::StrCat(TaskRef{next->task().type(), next->task().index()}.ToString(),
                                   " ", l.text()));
    }
  }
  EXPECT_THAT(texts,
              ::testing::UnorderedElementsAre(rank0.ToString() + " a", rank0.ToString() + " b",
                                              rank0.ToString() + " c", rank1.ToString() + " x"));

  // --worker: one task's lines only.
  request.mutable_task()->set_type(rank1.type);
  request.mutable_task()->set_index(rank1.index);
  DiagnosticsService::LogCursor one;
  auto next = diagnostics_->NextLogs(request, &one, clock_.Now());
  ASSERT_TRUE(next.ok());
  ASSERT_EQ(next->lines_size(), 1);
  EXPECT_EQ(next->lines(0).text(), "x");
  request.clear_task();

  // Following: nothing new while the job runs; new lines; the end once it ended and every
  // worker sent its last lines.
  request.set_follow(true);
  next = diagnostics_->NextLogs(request, &cursor, clock_.Now());
  EXPECT_EQ(next.status().code(), absl::StatusCode::kDeadlineExceeded);
  diagnostics_->OnHeartbeat(rank1, {Beat(1, 1, 0, 0, {"y"}, 2)});
  next = diagnostics_->NextLogs(request, &cursor, clock_.Now());
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->lines(0).text(), "y");
  ASSERT_TRUE(jobs_->Cancel(id_, "test").ok());
  next = diagnostics_->NextLogs(request, &cursor, clock_.Now());
  EXPECT_EQ(next.status().code(), absl::StatusCode::kDeadlineExceeded);  // not all finished
  for (const TaskRef& t : {rank0, rank1}) {
    v1::JobDiagnostics last = Beat(t == rank0 ? 0 : 1, 1, 0, 0);
    last.set_finished(true);
    diagnostics_->OnHeartbeat(t, {last});
  }
  next = diagnostics_->NextLogs(request, &cursor, clock_.Now());
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(next->end());
  EXPECT_EQ(diagnostics_
                ->NextLogs(
                    [&] {
                      v1::GetJobLogsRequest r;
                      r.set_job_id("job-999999");
                      return r;
                    }(),
                    &cursor, clock_.Now())
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

TEST_F(DiagnosticsServiceTest, FollowingEndsTwoHeartbeatsAfterTheJobEvenIfAWorkerIsSilent) {
  ASSERT_TRUE(jobs_->Cancel(id_, "test").ok());
  v1::GetJobLogsRequest request;
  request.set_job_id(id_);
  request.set_follow(true);
  const v1::JobRecord job = Record();
  diagnostics_->OnHeartbeat(
      TaskRef{job.attempt_workers(0).task_type(), job.attempt_workers(0).task_index()},
      {Beat(0, 1, 0, 0)});
  DiagnosticsService::LogCursor cursor;
  auto next = diagnostics_->NextLogs(request, &cursor, clock_.Now());
  EXPECT_EQ(next.status().code(), absl::StatusCode::kDeadlineExceeded);
  clock_.Advance(absl::Seconds(3));
  next = diagnostics_->NextLogs(request, &cursor, clock_.Now());
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(next->end());
}

// Lines a GetJobLogs without follow returns, "task text" each.
std::vector<std::string> AllLines(DiagnosticsService& diagnostics, const std::string& job_id,
                                  absl::Time now) {
  v1::GetJobLogsRequest request;
  request.set_job_id(job_id);
  DiagnosticsService::LogCursor cursor;
  std::vector<std::string> texts;
  for (int i = 0; i < 100; ++i) {
    auto next = diagnostics.NextLogs(request, &cursor, now);
    if (!next.ok() || next->end()) break;
    for (const v1::LogLine& l : next->lines()) {
      texts.push_back(absl::StrCat(TaskRef{next->task().type(), next->task().index()}.ToString(),
                                   " ", l.text()));
    }
  }
  return texts;
}

// A worker that runs nothing of the job (another identity's task, here a third worker), and a
// worker of the job speaking of an attempt it does not run, are not heard: their lines and
// records are dropped, counted by reason, and the heartbeat itself goes on.
TEST_F(DiagnosticsServiceTest, DiagnosticsForAnAttemptTheTaskDoesNotRunAreDropped) {
  MetricsRegistry registry;
  CoordinatorMetrics metrics(&registry);
  metrics.Track(membership_.get(), jobs_.get(), diagnostics_.get());
  RegisterRequest r;
  r.address = "127.0.0.1:5009";
  r.incarnation = 999;
  r.devices.emplace_back().set_index(0);
  auto intruder = membership_->Register(r);
  ASSERT_TRUE(intruder.ok()) << intruder.status();
  const v1::JobRecord job = Record();
  const TaskRef rank0{job.attempt_workers(0).task_type(), job.attempt_workers(0).task_index()};

  diagnostics_->OnHeartbeat(intruder->task, {Beat(0, 7, 7, 30, {"\x1b[2Jforged"})});
  v1::JobDiagnostics other_attempt = Beat(0, 1, 0, 0, {"from attempt 9"});
  other_attempt.set_attempt(9);
  diagnostics_->OnHeartbeat(rank0, {other_attempt, Beat(0, 1, 0, 0, {"real"})});

  EXPECT_THAT(AllLines(*diagnostics_, id_, clock_.Now()),
              ::testing::ElementsAre(rank0.ToString() + " real"));
  const v1::JobDiagnosis d = diagnostics_->Diagnose(Record());
  EXPECT_EQ(d.attempt(), 1);
  EXPECT_EQ(d.hang_verdict(), "") << "the forged record must not make a verdict";
  // Two JobDiagnostics, each a record and one line.
  EXPECT_EQ(diagnostics_->dropped(DiagnosticsDrop::kNotItsAttempt), 4);
  EXPECT_THAT(registry.TextFormat(),
              HasSubstr("lockstep_coordinator_diagnostics_dropped{reason=\"not_its_attempt\"} 4"));
  // Made-up jobs leave nothing behind either.
  for (int i = 0; i < 50; ++i) {
    v1::JobDiagnostics made_up = Beat(0, 1, 0, 0, {"x"});
    made_up.set_job_id(absl::StrCat("job-", 500000 + i));
    diagnostics_->OnHeartbeat(intruder->task, {made_up});
  }
  EXPECT_EQ(diagnostics_->Dump("job-500001").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(diagnostics_->dropped(DiagnosticsDrop::kNotItsAttempt), 104);
  metrics.Track(nullptr, nullptr);
}

TEST_F(DiagnosticsServiceTest, LinesAndRecordsAreBoundedPerTaskInCountAndSize) {
  DiagnosticsService small(jobs_.get(), &clock_,
                           DiagnosticsOptions{.limits = {.log_lines_per_task = 3,
                                                         .log_bytes_per_task = 8,
                                                         .max_line_bytes = 4,
                                                         .max_record_bytes = 4096}});
  const v1::JobRecord job = Record();
  const TaskRef rank0{job.attempt_workers(0).task_type(), job.attempt_workers(0).task_index()};
  // "toolong" is dropped; "a".."e" fit one by one, but only the newest 3 lines (and 8 bytes)
  // stay.
  small.OnHeartbeat(rank0, {Beat(0, 1, 0, 0, {"a", "toolong", "bb", "c", "d", "e"})});
  EXPECT_THAT(AllLines(small, id_, clock_.Now()),
              ::testing::ElementsAre(rank0.ToString() + " c", rank0.ToString() + " d",
                                     rank0.ToString() + " e"));
  EXPECT_EQ(small.dropped(DiagnosticsDrop::kLineTooLong), 1);
  EXPECT_EQ(small.dropped(DiagnosticsDrop::kEvicted), 2);
  // By bytes: two 4-byte lines fill the task's 8.
  small.OnHeartbeat(rank0, {Beat(0, 1, 0, 0, {"ffff", "gggg"}, 7)});
  EXPECT_THAT(AllLines(small, id_, clock_.Now()),
              ::testing::ElementsAre(rank0.ToString() + " ffff", rank0.ToString() + " gggg"));
  // A flight record over its size is dropped; the last good one stays.
  v1::JobDiagnostics big = Beat(0, 9, 9, 1);
  big.mutable_record()->mutable_collectives(0)->set_kind(std::string(5000, 'k'));
  small.OnHeartbeat(rank0, {big});
  EXPECT_EQ(small.dropped(DiagnosticsDrop::kRecordTooLarge), 1);
  const v1::JobDiagnosis d = small.Diagnose(Record());
  ASSERT_GE(d.ranks_size(), 1);
  EXPECT_EQ(d.ranks(0).record().last_seq_entered(), 1);
}

// Only the newest attempts_per_job attempts of a job are kept: a job that restarts does not
// pile up its attempts' lines.
TEST_F(DiagnosticsServiceTest, OnlyTheNewestAttemptsOfAJobAreKept) {
  DiagnosticsService one(jobs_.get(), &clock_,
                         DiagnosticsOptions{.limits = {.attempts_per_job = 1}});
  // The fixture's job ends and its workers leave it, so that a restartable job takes them.
  ASSERT_TRUE(jobs_->Cancel(id_, "test").ok());
  auto report = [&](const TaskRef& t, const std::string& id, int attempt,
                    v1::JobReport::Phase phase) {
    v1::JobReport r;
    r.set_job_id(id);
    r.set_attempt(attempt);
    r.set_phase(phase);
    jobs_->OnReports(t, {r});
  };
  for (const TaskRef& t : tasks_) report(t, id_, 1, v1::JobReport::ABORTED);
  v1::JobSpec spec;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  R"({"name": "restarts", "numWorkers": 2, "globalBatchSize": 64, "steps": 10,
                      "restartPolicy": {"maxRestarts": 3}, "checkpoint": {"everySteps": 5},
                      "model": {"inputShape": [8], "layers": [{"dense": {"units": 4}}],
                                "loss": "SPARSE_CATEGORICAL_CROSSENTROPY"},
                      "optimizer": {"sgd": {}, "learningRate": {"constant": {"value": 0.1}}},
                      "data": {"train": {"format": "SYNTHETIC", "syntheticExamples": 256}}})",
                  &spec)
                  .ok());
  auto id = jobs_->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(jobs_->Get(*id)->job().state(), v1::RUNNING);
  auto lines = [&](int attempt, const std::string& text) {
    v1::JobDiagnostics d;
    d.set_job_id(*id);
    d.set_attempt(attempt);
    v1::LogLine* line = d.add_log_lines();
    line->set_seq(1);
    line->set_text(text);
    return d;
  };
  one.OnHeartbeat(tasks_[0], {lines(1, "attempt 1")});
  EXPECT_THAT(AllLines(one, *id, clock_.Now()),
              ::testing::ElementsAre(tasks_[0].ToString() + " attempt 1"));
  // The attempt fails and the job restarts on the same workers (after its 0.5 s back-off).
  report(tasks_[0], *id, 1, v1::JobReport::FAILED);
  report(tasks_[1], *id, 1, v1::JobReport::ABORTED);
  ASSERT_EQ(jobs_->Get(*id)->job().state(), v1::RESTARTING);
  clock_.Advance(absl::Seconds(1));
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(membership_->Heartbeat(tasks_[i], 100 + i, false, nullptr).ok());
  }
  jobs_->Tick();
  ASSERT_EQ(jobs_->Get(*id)->job().state(), v1::RUNNING);
  ASSERT_EQ(jobs_->Get(*id)->job().attempt(), 2);
  one.OnHeartbeat(tasks_[0], {lines(2, "attempt 2")});
  EXPECT_THAT(AllLines(one, *id, clock_.Now()),
              ::testing::ElementsAre(tasks_[0].ToString() + " attempt 2"));
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep
