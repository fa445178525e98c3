#include "coordinator/job_service.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <optional>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cluster_proto.h"
#include "coordinator/job_store/job_store_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep {
namespace coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A digits-sized MLP spec on synthetic data: valid, needs no files.
v1::JobSpec SmallJob(int64_t batch = 64) {
  v1::JobSpec spec;
  spec.set_name("small");
  spec.mutable_model()->add_input_shape(8);
  spec.mutable_model()->add_layers()->mutable_dense()->set_units(4);
  spec.mutable_model()->set_loss(v1::SPARSE_CATEGORICAL_CROSSENTROPY);
  spec.mutable_optimizer()->mutable_sgd();
  spec.mutable_optimizer()->mutable_learning_rate()->mutable_constant()->set_value(0.1);
  spec.mutable_data()->mutable_train()->set_format(v1::DataSource::SYNTHETIC);
  spec.mutable_data()->mutable_train()->set_synthetic_examples(256);
  spec.set_global_batch_size(batch);
  spec.set_steps(10);
  return spec;
}

// SmallJob(batch) on `workers` workers, restartable: checkpoints every 5 steps, at most
// `max_restarts` restarts.
v1::JobSpec RestartableJob(int workers, int max_restarts, int64_t batch = 64) {
  v1::JobSpec spec = SmallJob(batch);
  spec.set_num_workers(workers);
  spec.mutable_checkpoint()->set_every_steps(5);
  spec.mutable_restart_policy()->set_max_restarts(max_restarts);
  return spec;
}

// SmallJob() on two workers with an evaluator side-car (JobSpec.evaluator).
v1::JobSpec EvaluatedJob() {
  v1::JobSpec spec = SmallJob();
  spec.set_num_workers(2);
  spec.mutable_data()->set_eval_fraction(0.2);
  spec.mutable_evaluator()->set_enabled(true);
  return spec;
}

// An evaluator's TRAINING report on attempt 1 of `id`: at `step`, `checkpoints` evaluated.
v1::JobReport EvaluatorReport(const std::string& id, int64_t step, int checkpoints) {
  v1::JobReport r;
  r.set_job_id(id);
  r.set_attempt(1);
  r.set_phase(v1::JobReport::TRAINING);
  r.set_step(step);
  r.set_checkpoints_evaluated(checkpoints);
  return r;
}

class JobServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    membership_ = std::make_unique<Membership>(membership_options_, &clock_);
    OpenStore();
  }
  void OpenStore() {
    jobs_.reset();
    store_.reset();
    auto store = JobStore::Open({dir_, &clock_, [this](absl::string_view) {
                                   return fail_store_writes_
                                              ? absl::ResourceExhaustedError("disk full (injected)")
                                              : absl::OkStatus();
                                 }});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    jobs_ = std::make_unique<JobService>(store_.get(), membership_.get(), &clock_, job_options_);
    ASSERT_TRUE(jobs_->Recover().ok());
  }
  // The coordinator stops, its job-000001 row is replaced by the bytes `hex` (a row as
  // another version wrote it), and this version opens the state_dir.
  void ReopenOnStoredRecord(const std::string& hex) {
    jobs_.reset();
    store_.reset();
    ASSERT_TRUE(ReplaceStoredRecord(dir_, "job-000001", absl::HexStringToBytes(hex)).ok());
    OpenStore();
  }
  TaskRef AddWorker(int devices = 1, const std::string& identity = "",
                    std::optional<TaskRef> task = std::nullopt) {
    RegisterRequest r;
    r.task = task;
    r.identity = identity;
    r.address = absl::StrCat("127.0.0.1:", 5000 + next_);
    r.incarnation = 100 + next_++;
    for (int i = 0; i < devices; ++i) r.devices.emplace_back().set_index(i);
    auto reg = membership_->Register(r);
    EXPECT_TRUE(reg.ok()) << reg.status();
    incarnations_[reg->task] = r.incarnation;
    return reg->task;
  }
  v1::Assignment Next(const TaskRef& t) {
    auto a = jobs_->NextAssignment(t, incarnations_[t], clock_.Now());
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? *a : v1::Assignment();
  }
  void Report(const TaskRef& t, const std::string& id, int attempt, v1::JobReport::Phase phase,
              int64_t step = 0, const std::string& error = "") {
    v1::JobReport r;
    r.set_job_id(id);
    r.set_attempt(attempt);
    r.set_phase(phase);
    r.set_step(step);
    r.set_total_steps(10);
    r.set_loss(0.5);
    r.set_error(error);
    jobs_->OnReports(t, {r});
  }
  void Beat(const TaskRef& t) { ASSERT_TRUE(membership_->Heartbeat(t, incarnations_[t]).ok()); }
  // `seconds` pass one by one; each, the `alive` workers beat and the service ticks.
  void Elapse(int seconds, const std::vector<TaskRef>& alive) {
    for (int s = 0; s < seconds; ++s) {
      clock_.Advance(absl::Seconds(1));
      for (const TaskRef& t : alive) Beat(t);
      jobs_->Tick();
    }
  }
  v1::JobState State(const std::string& id) { return jobs_->Get(id)->job().state(); }
  // Two one-device workers, and SmallJob() running on them (each took its partition).
  struct Started {
    TaskRef w0, w1;
    std::string id;
  };
  Started StartOnTwoWorkers() {
    Started s{AddWorker(), AddWorker(), ""};
    auto id = jobs_->Submit(SmallJob());
    EXPECT_TRUE(id.ok()) << id.status();
    s.id = id.value_or("");
    EXPECT_TRUE(Next(s.w0).has_run());
    EXPECT_TRUE(Next(s.w1).has_run());
    return s;
  }

  FakeClock clock_;
  // Subclasses may set these in their constructor.
  MembershipOptions membership_options_;
  JobServiceOptions job_options_;
  std::unique_ptr<Membership> membership_;
  std::string dir_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<JobService> jobs_;
  std::map<TaskRef, uint64_t> incarnations_;
  int next_ = 0;
  // While true, every write to the job store fails (a full disk).
  bool fail_store_writes_ = false;
};

TEST_F(JobServiceTest, PartitionsRunsAndSucceeds) {
  const TaskRef w0 = AddWorker(2), w1 = AddWorker(1);
  auto id = jobs_->Submit(SmallJob(63));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(State(*id), v1::RUNNING);
  const v1::Partition p0 = Next(w0).run(), p1 = Next(w1).run();
  EXPECT_EQ(p0.job_id(), *id);
  EXPECT_EQ(p0.attempt(), 1);
  EXPECT_EQ(FromProto(p0.task()), (TaskRef{"worker", 0}));  // rank 0: the chief
  EXPECT_EQ(FromProto(p1.task()), (TaskRef{"worker", 1}));
  EXPECT_THAT(p0.replica_ids(), ::testing::ElementsAre(0, 1));
  EXPECT_THAT(p1.replica_ids(), ::testing::ElementsAre(2));
  EXPECT_EQ(p1.num_replicas_in_sync(), 3);
  EXPECT_EQ(p1.shard_index(), 1);
  EXPECT_EQ(p1.num_shards(), 2);
  EXPECT_EQ(p0.rendezvous_prefix(), absl::StrCat("jobs/", *id, "/1"));
  EXPECT_EQ(p0.secret(), p1.secret());
  EXPECT_EQ(p0.secret().size(), 64u);
  // The group travels typed: the workers' registered addresses in rank order.
  EXPECT_EQ(FromProto(p1.cluster()), FromProto(p0.cluster()));
  EXPECT_EQ(FromProto(p1.cluster()),
            (ClusterMap{{"worker", {"127.0.0.1:5000", "127.0.0.1:5001"}}}));

  int64_t seen = 0;
  ASSERT_TRUE(jobs_->NextEvent(*id, &seen, clock_.Now()).ok());
  Report(w0, *id, 1, v1::JobReport::TRAINING, 4);
  EXPECT_EQ(jobs_->RunningTasks()[w0], std::make_pair(*id, int64_t{4}));
  EXPECT_EQ(jobs_->RunningTasks()[w1].first, *id);
  auto ev = jobs_->NextEvent(*id, &seen, clock_.Now());
  ASSERT_TRUE(ev.ok()) << ev.status();
  EXPECT_EQ(ev->job().progress().step(), 4);
  Report(w0, *id, 1, v1::JobReport::DONE, 10);
  EXPECT_EQ(State(*id), v1::RUNNING);  // worker 1 still running
  Report(w1, *id, 1, v1::JobReport::DONE, 10);
  EXPECT_EQ(State(*id), v1::SUCCEEDED);
  EXPECT_EQ(jobs_->Get(*id)->workers_size(), 2);
  EXPECT_EQ(jobs_->NextEvent(*id, &seen, clock_.Now())->job().state(), v1::SUCCEEDED);
  // Nothing more for the workers: they are idle again and a new job can start.
  EXPECT_EQ(jobs_->NextAssignment(w0, incarnations_[w0], clock_.Now()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  auto second = jobs_->Submit(SmallJob(63));
  EXPECT_EQ(State(*second), v1::RUNNING);
}

// A GPU job's device memory: every worker's in Get (describe's table), the chief's in the
// job's progress (kept in the store).
TEST_F(JobServiceTest, DeviceMemoryReachesGetAndTheChiefsProgress) {
  const TaskRef w0 = AddWorker(), w1 = AddWorker();
  auto id = jobs_->Submit(SmallJob(64));
  ASSERT_TRUE(id.ok()) << id.status();
  Next(w0);
  Next(w1);
  auto report = [&](const TaskRef& t, uint64_t peak) {
    v1::JobReport r;
    r.set_job_id(*id);
    r.set_attempt(1);
    r.set_phase(v1::JobReport::TRAINING);
    r.set_step(3);
    r.set_total_steps(10);
    v1::DeviceMemory* m = r.add_device_memory();
    m->set_device("/gpu:0");
    m->set_peak_bytes(peak);
    m->set_reserved_bytes(peak * 2);
    jobs_->OnReports(t, {r});
  };
  report(w0, 1000);
  report(w1, 3000);
  auto job = jobs_->Get(*id);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->workers_size(), 2);
  EXPECT_EQ(job->workers(0).device_memory(0).peak_bytes(), 1000u);
  EXPECT_EQ(job->workers(1).device_memory(0).peak_bytes(), 3000u);
  ASSERT_EQ(job->job().progress().device_memory_size(), 1);
  EXPECT_EQ(job->job().progress().device_memory(0).device(), "/gpu:0");
  EXPECT_EQ(job->job().progress().device_memory(0).reserved_bytes(), 2000u);
}

// JobSpec.evaluator: the job waits for an evaluator task, which gets the chief's partition
// as task evaluator/0 (every partition's group lists the evaluator); its reports show in Get
// but never decide the job; a job that fails aborts it, one that succeeds lets it finish;
// it is busy until then, and a lost evaluator costs the job nothing.
TEST_F(JobServiceTest, AnEvaluatorSideCarIsScheduledShownAndNeverDecidesTheJob) {
  const TaskRef w0 = AddWorker(), w1 = AddWorker();
  const v1::JobSpec spec = EvaluatedJob();
  auto id = jobs_->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(State(*id), v1::PENDING);  // no evaluator task yet
  const TaskRef eval = AddWorker(1, "", TaskRef{"evaluator", 0});
  jobs_->Tick();
  ASSERT_EQ(State(*id), v1::RUNNING);
  const v1::Partition p0 = Next(w0).run(), p1 = Next(w1).run(), pe = Next(eval).run();
  EXPECT_EQ(FromProto(pe.task()), (TaskRef{"evaluator", 0}));
  for (const v1::Partition* p : {&p0, &p1, &pe}) {
    EXPECT_EQ(FromProto(p->cluster()).at("evaluator").size(), 1u);
    EXPECT_EQ(FromProto(p->cluster()).at("worker").size(), 2u);
  }
  EXPECT_EQ(pe.rendezvous_prefix(), p0.rendezvous_prefix());
  EXPECT_EQ(pe.secret(), p0.secret());
  EXPECT_EQ(pe.job_uid(), p0.job_uid());
  EXPECT_EQ(pe.replica_ids_size(), 0);
  EXPECT_EQ(jobs_->RunningTasks()[eval].first, *id);

  v1::JobReport r = EvaluatorReport(*id, 5, 1);
  r.set_eval_accuracy(0.75);
  jobs_->OnReports(eval, {r});
  auto job = jobs_->Get(*id);
  EXPECT_EQ(job->workers_size(), 0);  // the evaluator is not a worker of the attempt
  EXPECT_EQ(job->evaluator_task().type(), "evaluator");
  EXPECT_EQ(job->evaluator().checkpoints_evaluated(), 1);
  EXPECT_EQ(job->job().progress().step(), 0);  // the chief's figures are the job's

  Report(w0, *id, 1, v1::JobReport::DONE, 10);
  Report(w1, *id, 1, v1::JobReport::DONE, 10);
  EXPECT_EQ(State(*id), v1::SUCCEEDED);
  // Still evaluating the final checkpoint: not aborted, still busy.
  EXPECT_EQ(jobs_->NextAssignment(eval, incarnations_[eval], clock_.Now()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  auto second = jobs_->Submit(spec);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(State(*second), v1::PENDING);
  r.set_phase(v1::JobReport::DONE);
  r.set_step(10);
  r.set_checkpoints_evaluated(2);
  jobs_->OnReports(eval, {r});
  EXPECT_EQ(jobs_->Get(*id)->evaluator().phase(), v1::JobReport::DONE);
  EXPECT_EQ(State(*second), v1::RUNNING);  // the evaluator is free again

  // The second job fails: its evaluator is aborted with it.
  ASSERT_TRUE(Next(w0).has_run() && Next(w1).has_run() && Next(eval).has_run());
  Report(w0, *second, 1, v1::JobReport::FAILED, 3, "loss is NaN");
  EXPECT_TRUE(Next(w1).has_abort());
  Report(w1, *second, 1, v1::JobReport::ABORTED, 3);
  ASSERT_EQ(State(*second), v1::FAILED);
  const v1::Assignment abort = Next(eval);
  ASSERT_TRUE(abort.has_abort()) << abort.DebugString();
  EXPECT_EQ(abort.abort().job_id(), *second);

  // A third job loses its evaluator: the job goes on; the evaluator's report says so.
  auto third = jobs_->Submit(spec);
  ASSERT_TRUE(third.ok()) << third.status();
  r.set_job_id(*second);
  r.set_phase(v1::JobReport::ABORTED);
  jobs_->OnReports(eval, {r});
  ASSERT_EQ(State(*third), v1::RUNNING);
  ASSERT_TRUE(Next(w0).has_run() && Next(w1).has_run() && Next(eval).has_run());
  for (int i = 0; i < 2; ++i) {  // evaluator silent for 4 s > 3 s
    clock_.Advance(absl::Seconds(2));
    Beat(w0);
    Beat(w1);
  }
  jobs_->Tick();
  EXPECT_EQ(State(*third), v1::RUNNING);
  EXPECT_EQ(jobs_->Get(*third)->evaluator().phase(), v1::JobReport::FAILED);
  EXPECT_THAT(jobs_->Get(*third)->evaluator().error(), HasSubstr("evaluator/0 was lost"));
}

// A restarted coordinator re-adopts a running attempt's evaluator with its workers: the
// evaluator stays busy (a second job that wants one waits although workers are free), its
// reports show in Get and its key-value access holds; silent past the grace, it is reported
// lost while the job goes on.
TEST_F(JobServiceTest, ARestartedCoordinatorReadoptsTheEvaluatorWithTheWorkers) {
  const TaskRef w0 = AddWorker(), w1 = AddWorker(), w2 = AddWorker(), w3 = AddWorker();
  const TaskRef eval = AddWorker(1, "host-eval", TaskRef{"evaluator", 0});
  const v1::JobSpec spec = EvaluatedJob();
  auto id = jobs_->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(State(*id), v1::RUNNING);
  ASSERT_TRUE(Next(w0).has_run() && Next(w1).has_run() && Next(eval).has_run());

  OpenStore();  // a new coordinator on the same state_dir
  auto job = jobs_->Get(*id);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->job().state(), v1::RUNNING);
  EXPECT_EQ(job->evaluator_task().type(), "evaluator");
  EXPECT_EQ(jobs_->RunningTasks()[eval].first, *id);
  EXPECT_TRUE(jobs_->CheckKeyAccess("host-eval", absl::StrCat("jobs/", *id, "/1/eval/0")).ok());
  auto second = jobs_->Submit(spec);
  ASSERT_TRUE(second.ok()) << second.status();
  jobs_->Tick();
  EXPECT_EQ(State(*second), v1::PENDING);  // worker/2 and worker/3 are idle, the evaluator not

  const v1::JobReport r = EvaluatorReport(*id, 5, 1);
  jobs_->OnReports(eval, {r});
  EXPECT_EQ(jobs_->Get(*id)->evaluator().checkpoints_evaluated(), 1);

  for (int s = 0; s < 4; ++s) {  // the evaluator silent: not ALIVE after 3 s, grace 5 s
    clock_.Advance(absl::Seconds(1));
    for (const TaskRef& w : {w0, w1, w2, w3}) Beat(w);
    jobs_->Tick();
    ASSERT_NE(jobs_->Get(*id)->evaluator().phase(), v1::JobReport::FAILED)
        << "after " << s + 1 << " s";
  }
  clock_.Advance(absl::Seconds(1));  // 5 s: the grace is over
  for (const TaskRef& w : {w0, w1, w2, w3}) Beat(w);
  jobs_->Tick();
  EXPECT_EQ(State(*id), v1::RUNNING);
  EXPECT_EQ(jobs_->Get(*id)->evaluator().phase(), v1::JobReport::FAILED);
  EXPECT_THAT(jobs_->Get(*id)->evaluator().error(), HasSubstr("evaluator/0 was lost"));
}

TEST_F(JobServiceTest, RefusesBadSpecsNamingTheField) {
  const TaskRef w0 = AddWorker(), w1 = AddWorker();
  (void)w0, (void)w1;
  v1::JobSpec bad = SmallJob(63);  // two replicas
  EXPECT_THAT(jobs_->Submit(bad).status().message(), HasSubstr("global_batch_size"));
  bad = SmallJob();
  bad.mutable_model()->mutable_layers(0)->clear_kind();
  EXPECT_THAT(jobs_->Submit(bad).status().message(), HasSubstr("model.layers[0]"));
  bad = SmallJob();
  bad.mutable_optimizer()->mutable_adam()->set_beta1(2);
  EXPECT_THAT(jobs_->Submit(bad).status().message(), HasSubstr("optimizer.adam.beta1"));
  bad = SmallJob();
  bad.set_epochs(2);
  EXPECT_THAT(jobs_->Submit(bad).status().message(), HasSubstr("steps, epochs"));
  bad = SmallJob();
  bad.mutable_checkpoint()->set_dir("/var/lib/../../etc/ckpt");
  absl::Status s = jobs_->Submit(bad).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("checkpoint.dir"));
  bad = SmallJob();  // the workers offer CPUs only
  bad.mutable_communication()->set_implementation(v1::CommunicationSpec::NCCL);
  EXPECT_THAT(jobs_->Submit(bad).status().message(),
              HasSubstr("communication.implementation: NCCL needs GPU replicas"));
  EXPECT_TRUE(jobs_->List(0)->empty());  // nothing refused was stored
}

// An absolute output directory names a path on the workers that write it: Submit neither
// creates nor probes it on the coordinator's host, so its answer says nothing about what
// exists there (a missing, unwritable or non-directory path is accepted alike; the chief
// reports the error when the job starts).
TEST_F(JobServiceTest, SubmitLeavesAbsoluteDirectoriesToTheWorkers) {
  const TaskRef w0 = AddWorker(), w1 = AddWorker();
  (void)w0, (void)w1;
  auto exists = [](const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
  };
  v1::JobSpec refused = SmallJob(63);  // two replicas: refused for its batch alone
  refused.mutable_checkpoint()->set_dir(dir_ + "/out/ckpt");
  refused.mutable_summaries()->set_dir(dir_ + "/out/tb");
  EXPECT_THAT(jobs_->Submit(refused).status().message(), HasSubstr("global_batch_size"));
  EXPECT_FALSE(exists(dir_ + "/out"));
  v1::JobSpec accepted = refused;
  accepted.set_global_batch_size(64);
  ASSERT_TRUE(jobs_->Submit(accepted).ok());
  EXPECT_FALSE(exists(dir_ + "/out"));
  // What the coordinator's own file system holds makes no difference to the answer.
  ASSERT_TRUE(static_cast<bool>(std::ofstream(dir_ + "/file") << "x"));
  ASSERT_EQ(::mkdir((dir_ + "/ro").c_str(), 0555), 0);
  for (const std::string& dir : {dir_ + "/file/tb", dir_ + "/ro/ckpt", std::string("/proc/x/ckpt"),
                                 std::string("/dev/null/tb")}) {
    v1::JobSpec spec = accepted;
    spec.mutable_checkpoint()->set_dir(dir);
    spec.mutable_summaries()->set_dir(dir + "-tb");
    absl::StatusOr<std::string> id = jobs_->Submit(spec);
    EXPECT_TRUE(id.ok()) << dir << ": " << id.status();
  }
  EXPECT_FALSE(exists(dir_ + "/ro/ckpt"));
}

TEST_F(JobServiceTest, PendingUntilWorkersThenFifo) {
  v1::JobSpec two = SmallJob();
  two.set_num_workers(2);
  auto id = jobs_->Submit(two);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(State(*id), v1::PENDING);
  const TaskRef w0 = AddWorker();
  jobs_->Tick();
  EXPECT_EQ(State(*id), v1::PENDING);
  AddWorker();
  jobs_->Tick();
  EXPECT_EQ(State(*id), v1::RUNNING);
  EXPECT_TRUE(Next(w0).has_run());
}

TEST_F(JobServiceTest, FailureAbortsOthersAndNamesTheLostTask) {
  const auto [w0, w1, id] = StartOnTwoWorkers();
  Report(w0, id, 1, v1::JobReport::TRAINING, 3);
  Report(w1, id, 1, v1::JobReport::TRAINING, 3);
  // worker/1 is SIGKILLed: worker/0's collective fails first.
  Report(w0, id, 1, v1::JobReport::FAILED, 3, "all-reduce: peer rank 1 closed the connection");
  EXPECT_EQ(State(id), v1::RUNNING);  // waits to learn whether a peer was lost
  EXPECT_TRUE(Next(w1).has_abort());
  clock_.Advance(absl::Seconds(2));
  Beat(w0);
  clock_.Advance(absl::Seconds(2));  // worker/1 silent for 4 s > 3 s
  jobs_->Tick();
  auto job = jobs_->Get(id);
  EXPECT_EQ(job->job().state(), v1::FAILED);
  EXPECT_THAT(job->job().reason(), HasSubstr("worker/1 (rank 1) was lost"));
  EXPECT_THAT(job->job().reason(), HasSubstr("peer rank 1"));
}

TEST(FailureGraceTest, OutlastsFailureDetection) {
  MembershipOptions m;
  const JobServiceOptions defaults;
  EXPECT_EQ(EffectiveFailureGrace(defaults, m), absl::Seconds(5));  // 3 s + 1 s: the 5 s floor
  m.heartbeat_timeout = absl::Seconds(10);
  m.heartbeat_interval = absl::Seconds(2);
  EXPECT_EQ(EffectiveFailureGrace(defaults, m), absl::Seconds(12));
}

// --heartbeat_timeout=10s: a job whose worker was SIGKILLed still fails naming it, although
// the survivor's error came 10 s before the worker was found LOST (a fixed 5 s grace
// failed it with the survivor's error first).
class SlowHeartbeatTest : public JobServiceTest {
 protected:
  SlowHeartbeatTest() {
    membership_options_.heartbeat_timeout = absl::Seconds(10);
    job_options_.failure_grace = absl::Seconds(5);  // raised to 11 s by the JobService
  }
};

TEST_F(SlowHeartbeatTest, FailureWaitsForTheLostWorker) {
  EXPECT_EQ(jobs_->failure_grace(), absl::Seconds(11));
  const auto [w0, w1, id] = StartOnTwoWorkers();
  Report(w0, id, 1, v1::JobReport::TRAINING, 3);
  // worker/1 is SIGKILLed now; worker/0's all-reduce fails at once.
  Report(w0, id, 1, v1::JobReport::FAILED, 3, "all-reduce: peer rank 1 closed the connection");
  for (int s = 0; s < 10; ++s) {  // worker/0 beats on; worker/1 is silent
    clock_.Advance(absl::Seconds(1));
    Beat(w0);
    jobs_->Tick();
    ASSERT_EQ(State(id), v1::RUNNING) << "after " << s + 1 << " s";
  }
  clock_.Advance(absl::Milliseconds(500));  // 10.5 s: worker/1 is LOST
  jobs_->Tick();
  auto job = jobs_->Get(id);
  EXPECT_EQ(job->job().state(), v1::FAILED);
  EXPECT_THAT(job->job().reason(), HasSubstr("worker/1 (rank 1) was lost: no heartbeat for 10s"));
}

TEST_F(SlowHeartbeatTest, FailureGraceRunsOutWhenNoWorkerIsLost) {
  const auto [w0, w1, id] = StartOnTwoWorkers();
  Report(w0, id, 1, v1::JobReport::FAILED, 3, "loss is NaN");
  for (int s = 0; s < 10; ++s) {  // worker/1 is alive but never leaves the attempt
    clock_.Advance(absl::Seconds(1));
    Beat(w0);
    Beat(w1);
    jobs_->Tick();
  }
  EXPECT_EQ(State(id), v1::RUNNING);
  clock_.Advance(absl::Seconds(1));  // 11 s
  jobs_->Tick();
  EXPECT_EQ(State(id), v1::FAILED);
  EXPECT_THAT(jobs_->Get(id)->job().reason(), HasSubstr("worker/0 (rank 0) failed: loss is NaN"));
}

// No survivor has noticed yet (its collectives wait on the lost peer): the coordinator's
// failure detection alone ends the job and aborts the others, so nothing hangs.
TEST_F(JobServiceTest, TickFindsALostWorkerAbortsTheOthersAndFailsNamingIt) {
  const TaskRef w0 = AddWorker(), w1 = AddWorker(), w2 = AddWorker();
  auto id = jobs_->Submit(SmallJob(63));
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(Next(w0).has_run() && Next(w1).has_run() && Next(w2).has_run());
  Report(w0, *id, 1, v1::JobReport::TRAINING, 3);
  Report(w1, *id, 1, v1::JobReport::TRAINING, 3);
  Report(w2, *id, 1, v1::JobReport::TRAINING, 3);
  // worker/1 stops beating; the others go on.
  clock_.Advance(absl::Seconds(2));
  Beat(w0);
  Beat(w2);
  jobs_->Tick();
  EXPECT_EQ(State(*id), v1::RUNNING);  // 2 s of silence: not LOST yet
  EXPECT_EQ(jobs_->NextAssignment(w0, incarnations_[w0], clock_.Now()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  clock_.Advance(absl::Seconds(2));  // 4 s > heartbeat_timeout (3 s)
  Beat(w0);
  Beat(w2);
  jobs_->Tick();
  auto job = jobs_->Get(*id);
  EXPECT_EQ(job->job().state(), v1::FAILED);
  EXPECT_THAT(job->job().reason(),
              HasSubstr("worker/1 (rank 1) was lost: no heartbeat for 3s; check that lockstepd "
                        "at 127.0.0.1:5001 is running"));
  for (const TaskRef& survivor : {w0, w2}) {
    const v1::Assignment a = Next(survivor);
    ASSERT_TRUE(a.has_abort()) << survivor.ToString() << ": " << a.DebugString();
    EXPECT_EQ(a.abort().job_id(), *id);
    EXPECT_EQ(a.abort().attempt(), 1);
    EXPECT_THAT(a.abort().reason(), HasSubstr("worker/1 (rank 1) was lost"));
    // The lost rank travels typed, for the survivors' NCCL communicators to name it.
    ASSERT_TRUE(a.abort().has_lost());
    EXPECT_EQ(a.abort().lost().worker_rank(), 1);
  }
  // Once the survivors have left, they run the next job.
  v1::JobSpec two = SmallJob();
  two.set_num_workers(2);
  auto next = jobs_->Submit(two);
  EXPECT_EQ(State(*next), v1::PENDING);
  Report(w0, *id, 1, v1::JobReport::ABORTED, 3);
  Report(w2, *id, 1, v1::JobReport::ABORTED, 3);
  EXPECT_EQ(State(*next), v1::RUNNING);
}

TEST_F(JobServiceTest, WorkerErrorFailsTheJobOnceOthersStopped) {
  const auto [w0, w1, id] = StartOnTwoWorkers();
  Report(w1, id, 1, v1::JobReport::FAILED, 0, "data.train.files[0]: no such file");
  EXPECT_TRUE(Next(w0).has_abort());
  Report(w0, id, 1, v1::JobReport::ABORTED);
  auto job = jobs_->Get(id);
  EXPECT_EQ(job->job().state(), v1::FAILED);
  EXPECT_THAT(job->job().reason(), HasSubstr("worker/1 (rank 1) failed: data.train.files[0]"));
}

TEST_F(JobServiceTest, CancelAbortsEveryWorker) {
  const auto [w0, w1, id] = StartOnTwoWorkers();
  auto cancelled = jobs_->Cancel(id, "");
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), v1::CANCELLED);
  EXPECT_EQ(Next(w0).abort().job_id(), id);
  EXPECT_EQ(Next(w1).abort().attempt(), 1);
  EXPECT_EQ(jobs_->Cancel(id, "").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(jobs_->Cancel("job-999999", "").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobServiceTest, NextJobWaitsUntilTheCancelledJobsWorkersLeft) {
  const auto [w0, w1, a] = StartOnTwoWorkers();
  Report(w0, a, 1, v1::JobReport::TRAINING, 2);
  ASSERT_TRUE(jobs_->Cancel(a, "").ok());
  auto b = jobs_->Submit(SmallJob());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(State(*b), v1::PENDING);  // both workers are still shutting job A down
  EXPECT_TRUE(Next(w0).has_abort());
  EXPECT_TRUE(Next(w1).has_abort());
  Report(w0, a, 1, v1::JobReport::TRAINING, 3);  // its heartbeat still shows A running
  EXPECT_TRUE(Next(w0).has_abort());             // answered with another abort
  jobs_->Tick();
  EXPECT_EQ(State(*b), v1::PENDING);
  Report(w0, a, 1, v1::JobReport::ABORTED, 3);
  EXPECT_EQ(State(*b), v1::PENDING);  // worker/1 has not left yet
  Report(w1, a, 1, v1::JobReport::ABORTED, 2);
  EXPECT_EQ(State(*b), v1::RUNNING);
  const v1::Assignment next = Next(w0);
  ASSERT_TRUE(next.has_run()) << next.DebugString();
  EXPECT_EQ(next.run().job_id(), *b);
}

TEST_F(JobServiceTest, ARestartedWorkerLeavesTheEndedJobAtOnce) {
  const auto [w0, w1, a] = StartOnTwoWorkers();
  ASSERT_TRUE(jobs_->Cancel(a, "").ok());
  EXPECT_TRUE(Next(w0).has_abort());
  Report(w0, a, 1, v1::JobReport::ABORTED);
  clock_.Advance(absl::Seconds(2));
  Beat(w0);
  clock_.Advance(absl::Seconds(2));  // worker/1 silent for 4 s: LOST, then restarted
  RegisterRequest r;
  r.task = w1;
  r.address = "127.0.0.1:5001";
  r.incarnation = 999;
  r.devices.emplace_back().set_index(0);
  ASSERT_TRUE(membership_->Register(r).ok());
  incarnations_[w1] = r.incarnation;
  auto b = jobs_->Submit(SmallJob());
  EXPECT_EQ(State(*b), v1::RUNNING);  // the grace (5 s) has not passed: released as restarted
  EXPECT_EQ(Next(w1).run().job_id(), *b);
}

TEST_F(JobServiceTest, AWorkerSilentAboutTheEndedJobIsReleasedAfterTheGrace) {
  const auto [w0, w1, a] = StartOnTwoWorkers();
  ASSERT_TRUE(jobs_->Cancel(a, "").ok());
  Report(w1, a, 1, v1::JobReport::ABORTED);
  auto b = jobs_->Submit(SmallJob());
  // worker/0 heartbeats but never mentions job A (its final reports were lost): it does
  // not hold A, and is released once the grace (5 s) passed.
  for (int s = 0; s < 4; ++s) {
    clock_.Advance(absl::Seconds(1));
    Beat(w0);
    Beat(w1);
    jobs_->Tick();
    ASSERT_EQ(State(*b), v1::PENDING) << "after " << s + 1 << " s";
  }
  clock_.Advance(absl::Seconds(1));
  Beat(w0);
  Beat(w1);
  jobs_->Tick();
  EXPECT_EQ(State(*b), v1::RUNNING);
}

TEST_F(JobServiceTest, AWorkerStillRunningTheEndedJobStaysBusy) {
  const auto [w0, w1, a] = StartOnTwoWorkers();
  ASSERT_TRUE(jobs_->Cancel(a, "").ok());
  Report(w1, a, 1, v1::JobReport::ABORTED);
  EXPECT_TRUE(Next(w0).has_abort());
  auto b = jobs_->Submit(SmallJob());
  for (int s = 0; s < 20; ++s) {  // worker/0 is stuck in job A and says so
    clock_.Advance(absl::Seconds(1));
    Beat(w0);
    Beat(w1);
    Report(w0, a, 1, v1::JobReport::TRAINING, 3);
    EXPECT_TRUE(Next(w0).has_abort());  // every report is answered with an abort
    jobs_->Tick();
  }
  EXPECT_EQ(State(*b), v1::PENDING);
  Report(w0, a, 1, v1::JobReport::ABORTED, 3);
  EXPECT_EQ(State(*b), v1::RUNNING);
}

// A new coordinator on the same state_dir re-adopts the running attempt from its stored
// workers: the job stays RUNNING (attempt 1, no restart), its worker's reports carry it to
// SUCCEEDED, and the pending job behind it starts then.
TEST_F(JobServiceTest, ACoordinatorRestartReadoptsRunningJobsAndKeepsEveryJob) {
  const TaskRef w0 = AddWorker();
  v1::JobSpec one = SmallJob();
  one.set_num_workers(1);
  auto running = jobs_->Submit(one);
  auto pending = jobs_->Submit(one);
  ASSERT_TRUE(running.ok() && pending.ok());
  ASSERT_TRUE(Next(w0).has_run());
  EXPECT_EQ(State(*pending), v1::PENDING);
  OpenStore();  // a new coordinator on the same state_dir
  ASSERT_EQ(jobs_->List(0)->size(), 2u);
  v1::JobRecord job = jobs_->Get(*running)->job();
  EXPECT_EQ(job.state(), v1::RUNNING);
  EXPECT_EQ(job.attempt(), 1);
  ASSERT_EQ(job.attempt_workers_size(), 1);
  EXPECT_EQ(job.attempt_workers(0).task_index(), 0);
  jobs_->Tick();
  EXPECT_EQ(State(*pending), v1::PENDING);  // worker/0 still runs the adopted attempt
  Report(w0, *running, 1, v1::JobReport::TRAINING, 5);
  EXPECT_EQ(jobs_->Get(*running)->job().progress().step(), 5);
  Report(w0, *running, 1, v1::JobReport::DONE, 10);
  EXPECT_EQ(State(*running), v1::SUCCEEDED);
  EXPECT_EQ(State(*pending), v1::RUNNING);
}

// A RUNNING job as the coordinator before the typed group (Partition.cluster) stored it:
// JobRecord bytes made from that version's job.proto and job_spec.proto by
//   protoc --encode=lockstep.v1.JobRecord lockstep/v1/job.proto < record.txtpb
// job-000001 "small", RestartableJob(2, 1) as its spec bytes, RUNNING in attempt 1 since
// t=1 s, then the attempt's workers: worker/0 and worker/1, incarnations 100 and 101 (the
// last two fields; a coordinator older still wrote none). An attempt's group never was in
// the store, only in the Partitions pushed to its workers.
constexpr char kStoredBeforeTheTypedGroup[] =
    "0a0a6a6f622d3030303030311205736d616c6c1a3c0a05736d616c6c1a0b0a01081204120208041801220f0a"
    "00220b0a09099a9999999999b93f2a070a0510033080023040380a5202100572020801780220022a2952554e"
    "4e494e47206f6e20776f726b65722f302c20776f726b65722f312028617474656d70742031293211080110c0"
    "843d1a097375626d69747465643233080210c0843d1a2952554e4e494e47206f6e20776f726b65722f302c20"
    "776f726b65722f312028617474656d70742031292001380140c0843d48c0843d";
constexpr char kStoredAttemptWorkers[] =
    "62110a06776f726b657219640000000000000062130a06776f726b65721001196500000000000000";

// Such a job is re-adopted by this version: the workers, which keep running the Partitions
// they were given, report it on; the attempt after a failure gets the typed group.
TEST_F(JobServiceTest, AJobStoredBeforeTheTypedGroupIsReadoptedAndRestartsTyped) {
  const TaskRef w0 = AddWorker(), w1 = AddWorker();
  ASSERT_EQ(incarnations_[w0], 100u);
  ASSERT_EQ(incarnations_[w1], 101u);
  auto id = jobs_->Submit(RestartableJob(2, 1));  // the row the old bytes replace
  ASSERT_EQ(id.value_or(""), "job-000001");
  ReopenOnStoredRecord(absl::StrCat(kStoredBeforeTheTypedGroup, kStoredAttemptWorkers));
  v1::JobRecord job = jobs_->Get(*id)->job();
  ASSERT_EQ(job.state(), v1::RUNNING) << job.reason();
  EXPECT_EQ(job.attempt(), 1);
  EXPECT_EQ(job.restarts(), 0);
  Report(w0, *id, 1, v1::JobReport::TRAINING, 5);
  EXPECT_EQ(jobs_->Get(*id)->job().progress().step(), 5);
  jobs_->Tick();
  EXPECT_EQ(State(*id), v1::RUNNING);
  // worker/1's process dies; the restart pushes the group typed.
  Report(w0, *id, 1, v1::JobReport::FAILED, 7, "all-reduce: peer rank 1 closed the connection");
  Report(w1, *id, 1, v1::JobReport::FAILED, 7, "killed");
  ASSERT_EQ(State(*id), v1::RESTARTING) << jobs_->Get(*id)->job().reason();
  clock_.Advance(absl::Seconds(1));  // past the restart's back-off
  Beat(w0);
  Beat(w1);
  jobs_->Tick();
  ASSERT_EQ(State(*id), v1::RUNNING) << jobs_->Get(*id)->job().reason();
  v1::Assignment a1 = Next(w1);
  if (a1.has_abort()) a1 = Next(w1);  // attempt 1's, then attempt 2's partition
  const v1::Partition p0 = Next(w0).run(), p1 = a1.run();
  EXPECT_EQ(p0.attempt(), 2);
  EXPECT_EQ(p1.attempt(), 2);
  EXPECT_EQ(FromProto(p1.cluster()),
            (ClusterMap{{"worker", {"127.0.0.1:5000", "127.0.0.1:5001"}}}));
  EXPECT_EQ(FromProto(p0.task()), (TaskRef{"worker", 0}));
  EXPECT_EQ(FromProto(p1.task()), (TaskRef{"worker", 1}));
}

// A RUNNING job from a coordinator older still (no attempt workers stored) cannot be
// re-adopted: the restart policy decides, with a reason naming why.
TEST_F(JobServiceTest, AJobStoredWithoutItsAttemptRestartsNamingWhy) {
  const TaskRef w0 = AddWorker(), w1 = AddWorker();
  auto id = jobs_->Submit(RestartableJob(2, 1));
  ASSERT_EQ(id.value_or(""), "job-000001");
  ReopenOnStoredRecord(kStoredBeforeTheTypedGroup);
  v1::JobRecord job = jobs_->Get(*id)->job();
  EXPECT_EQ(job.state(), v1::RESTARTING);
  EXPECT_THAT(job.reason(),
              HasSubstr("coordinator restarted while the job was running (attempt 1)"));
  clock_.Advance(absl::Seconds(1));
  Beat(w0);
  Beat(w1);
  jobs_->Tick();
  ASSERT_EQ(State(*id), v1::RUNNING) << jobs_->Get(*id)->job().reason();
  const v1::Partition p1 = Next(w1).run();
  EXPECT_EQ(p1.attempt(), 2);
  EXPECT_EQ(FromProto(p1.task()), (TaskRef{"worker", 1}));
  EXPECT_EQ(FromProto(p1.cluster()).at("worker").size(), 2u);
}

// A worker of a re-adopted attempt that does not come back is lost once the failure grace
// has passed since the coordinator started, not before (the others need time to register).
TEST_F(JobServiceTest, AReadoptedAttemptWhoseWorkerNeverReturnsFailsAfterTheGrace) {
  const auto [w0, w1, id] = StartOnTwoWorkers();
  OpenStore();
  for (int s = 0; s < 4; ++s) {  // worker/1 silent, LOST after 3 s
    clock_.Advance(absl::Seconds(1));
    Beat(w0);
    jobs_->Tick();
    ASSERT_EQ(State(id), v1::RUNNING) << "after " << s + 1 << " s";
  }
  clock_.Advance(absl::Seconds(1));  // 5 s: the grace is over
  Beat(w0);
  jobs_->Tick();
  EXPECT_EQ(State(id), v1::FAILED);
  EXPECT_THAT(jobs_->Get(id)->job().reason(), HasSubstr("worker/1 (rank 1) was lost"));
}

TEST_F(JobServiceTest, ALostWorkerRestartsTheJobUntilItsRestartsRunOut) {
  const TaskRef w0 = AddWorker(), w1 = AddWorker();
  v1::JobSpec spec = RestartableJob(2, 1);
  auto id = jobs_->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  const v1::Partition first = Next(w0).run();
  ASSERT_TRUE(Next(w1).has_run());
  EXPECT_EQ(first.attempt(), 1);
  EXPECT_THAT(first.job_uid(), ::testing::StartsWith(*id + "@"));
  // worker/1 is SIGKILLed: worker/0's collective fails; worker/1 goes silent.
  Report(w0, *id, 1, v1::JobReport::FAILED, 7, "all-reduce: peer rank 1 closed the connection");
  clock_.Advance(absl::Seconds(2));
  Beat(w0);
  clock_.Advance(absl::Seconds(2));
  jobs_->Tick();
  v1::JobRecord job = jobs_->Get(*id)->job();
  EXPECT_EQ(job.state(), v1::RESTARTING);
  EXPECT_EQ(job.restarts(), 1);
  EXPECT_THAT(job.reason(), HasSubstr("worker/1 (rank 1) was lost"));
  EXPECT_THAT(job.reason(), HasSubstr("restart 1 of 1"));
  // The attempt failed 4 s after it started: the restart backs off 0.5 s.
  EXPECT_THAT(job.reason(), HasSubstr("backing off 500ms: the attempt failed within 10s"));
  // One ALIVE worker is not enough: the restart waits for the attempt's two.
  jobs_->Tick();
  EXPECT_EQ(State(*id), v1::RESTARTING);
  const TaskRef w2 = AddWorker();  // the replacement
  jobs_->Tick();
  EXPECT_EQ(State(*id), v1::RESTARTING);  // still backing off
  clock_.Advance(absl::Milliseconds(500));
  Beat(w0);
  jobs_->Tick();
  ASSERT_EQ(State(*id), v1::RUNNING);
  const v1::Partition second = Next(w0).run();
  EXPECT_EQ(second.attempt(), 2);
  EXPECT_EQ(second.job_uid(), first.job_uid());
  EXPECT_NE(second.rendezvous_prefix(), first.rendezvous_prefix());
  EXPECT_NE(second.secret(), first.secret());
  ASSERT_TRUE(Next(w2).has_run());
  // A second failure: no restart left.
  Report(w0, *id, 2, v1::JobReport::FAILED, 9, "loss is NaN");
  Report(w2, *id, 2, v1::JobReport::ABORTED, 9);
  job = jobs_->Get(*id)->job();
  EXPECT_EQ(job.state(), v1::FAILED);
  EXPECT_THAT(job.reason(), HasSubstr("loss is NaN"));
  EXPECT_THAT(job.reason(), HasSubstr("no restart left: 1 of restart_policy.max_restarts 1"));
  std::vector<v1::JobState> states;
  for (const v1::JobTransition& t : job.transitions()) states.push_back(t.state());
  EXPECT_THAT(states, ::testing::ElementsAre(v1::PENDING, v1::RUNNING, v1::RESTARTING, v1::RUNNING,
                                             v1::FAILED));
  EXPECT_THAT(job.transitions(2).reason(), HasSubstr("worker/1 (rank 1) was lost"));
}

// A preemption (worker/1's lockstepd got SIGTERM; the group stopped after step 42 with a
// checkpoint) restarts the job without counting a restart, even with max_restarts 0.
TEST_F(JobServiceTest, APreemptionRestartsTheJobWithoutCountingARestart) {
  const TaskRef w0 = AddWorker(), w1 = AddWorker();
  v1::JobSpec spec = SmallJob();
  spec.set_num_workers(2);
  auto id = jobs_->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(Next(w0).has_run());
  ASSERT_TRUE(Next(w1).has_run());
  v1::JobReport r;
  r.set_job_id(*id);
  r.set_attempt(1);
  r.set_phase(v1::JobReport::PREEMPTED);
  r.set_step(42);
  r.set_preemption("lockstepd received SIGTERM");
  jobs_->OnReports(w1, {r});
  EXPECT_EQ(State(*id), v1::RUNNING);  // worker/0 has not stopped yet
  r.clear_preemption();
  jobs_->OnReports(w0, {r});
  // Both stopped: the job restarts at once on the same two (idle) workers.
  v1::JobRecord job = jobs_->Get(*id)->job();
  EXPECT_EQ(job.state(), v1::RUNNING);
  EXPECT_EQ(job.attempt(), 2);
  EXPECT_EQ(job.restarts(), 0);
  ASSERT_GE(job.transitions_size(), 3);
  const v1::JobTransition& restarting = job.transitions(job.transitions_size() - 2);
  EXPECT_EQ(restarting.state(), v1::RESTARTING);
  EXPECT_THAT(restarting.reason(),
              HasSubstr("worker/1 (rank 1) was preempted (lockstepd received SIGTERM); the job "
                        "stopped after step 42"));
  EXPECT_THAT(restarting.reason(), HasSubstr("not counted"));
  EXPECT_EQ(Next(w0).run().attempt(), 2);
}

// `lockstep drain worker/1`: the task is marked draining, its job attempt is asked to stop
// after the next step (a PreemptJob), the restart does not use it, and --undo lets it back.
TEST_F(JobServiceTest, DrainPreemptsTheWorkersJobAndKeepsItOutOfSchedulingUntilUndone) {
  const TaskRef w0 = AddWorker(), w1 = AddWorker();
  v1::JobSpec spec = SmallJob();
  spec.set_num_workers(2);
  auto id = jobs_->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(Next(w0).has_run());
  ASSERT_TRUE(Next(w1).has_run());
  absl::StatusOr<v1::DrainWorkerResponse> drained = jobs_->Drain(w1, /*undo=*/false);
  ASSERT_TRUE(drained.ok()) << drained.status();
  EXPECT_TRUE(drained->task().draining());
  EXPECT_EQ(drained->job_id(), *id);
  const v1::Assignment preempt = Next(w1);
  ASSERT_TRUE(preempt.has_preempt());
  EXPECT_EQ(preempt.preempt().job_id(), *id);
  EXPECT_EQ(preempt.preempt().attempt(), 1);
  EXPECT_THAT(preempt.preempt().reason(), HasSubstr("worker/1 was drained"));
  // The group stops after step 12; the restart waits for a worker that is not drained.
  v1::JobReport r;
  r.set_job_id(*id);
  r.set_attempt(1);
  r.set_phase(v1::JobReport::PREEMPTED);
  r.set_step(12);
  jobs_->OnReports(w0, {r});
  r.set_preemption(preempt.preempt().reason());
  jobs_->OnReports(w1, {r});
  EXPECT_EQ(State(*id), v1::RESTARTING);
  EXPECT_EQ(jobs_->Get(*id)->job().restarts(), 0);
  jobs_->Tick();
  EXPECT_EQ(State(*id), v1::RESTARTING);
  // Undone: worker/1 is schedulable again and the job starts on both.
  ASSERT_TRUE(jobs_->Drain(w1, /*undo=*/true).ok());
  EXPECT_EQ(State(*id), v1::RUNNING);
  EXPECT_EQ(Next(w1).run().attempt(), 2);
  // Errors name the task.
  EXPECT_EQ(jobs_->Drain(TaskRef{"worker", 9}, false).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(jobs_->Drain(TaskRef{"evaluator", 0}, false).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Elastic (restart_policy.min_workers): worker/2 is lost and no replacement comes within the
// replacement timeout, so attempt 2 runs on the two survivors; when a worker is idle again
// the job stops after a step (a PreemptJob to its chief) and attempt 3 runs on three, the
// growth not counted as a restart.
TEST_F(JobServiceTest, AnElasticJobShrinksAfterTheReplacementTimeoutAndGrowsBack) {
  const TaskRef w0 = AddWorker(), w1 = AddWorker(), w2 = AddWorker();
  v1::JobSpec spec = RestartableJob(3, 2, 48);
  spec.mutable_restart_policy()->set_min_workers(2);
  spec.mutable_restart_policy()->set_replacement_timeout_ms(4000);
  auto id = jobs_->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  for (const TaskRef& w : {w0, w1, w2}) ASSERT_TRUE(Next(w).has_run());
  // worker/2 is lost.
  clock_.Advance(absl::Seconds(2));
  Beat(w0);
  Beat(w1);
  clock_.Advance(absl::Seconds(2));
  jobs_->Tick();
  ASSERT_EQ(State(*id), v1::RESTARTING);
  EXPECT_TRUE(Next(w0).has_abort());
  EXPECT_TRUE(Next(w1).has_abort());
  Report(w0, *id, 1, v1::JobReport::ABORTED, 7);
  Report(w1, *id, 1, v1::JobReport::ABORTED, 7);
  jobs_->Tick();
  EXPECT_EQ(State(*id), v1::RESTARTING);  // waits for a replacement...
  for (int s = 0; s < 4; ++s) {           // ...for the replacement timeout
    clock_.Advance(absl::Seconds(1));
    Beat(w0);
    Beat(w1);
  }
  jobs_->Tick();
  v1::JobRecord job = jobs_->Get(*id)->job();
  ASSERT_EQ(job.state(), v1::RUNNING) << job.reason();
  EXPECT_THAT(job.reason(), HasSubstr("2 of 3 workers: no replacement came within"));
  const v1::Partition shrunk = Next(w0).run();
  EXPECT_EQ(shrunk.attempt(), 2);
  EXPECT_EQ(FromProto(shrunk.cluster()).at("worker").size(), 2u);
  EXPECT_EQ(shrunk.num_replicas_in_sync(), 2);
  ASSERT_TRUE(Next(w1).has_run());
  // A worker is idle again: the job stops to grow, through its chief.
  const TaskRef w3 = AddWorker();
  jobs_->Tick();
  const v1::Assignment grow = Next(w0);
  ASSERT_TRUE(grow.has_preempt());
  EXPECT_THAT(grow.preempt().reason(), HasSubstr("growing from 2 to 3 workers"));
  jobs_->Tick();  // asked once
  v1::JobReport r;
  r.set_job_id(*id);
  r.set_attempt(2);
  r.set_phase(v1::JobReport::PREEMPTED);
  r.set_step(20);
  r.set_preemption(grow.preempt().reason());
  jobs_->OnReports(w0, {r});
  r.clear_preemption();
  jobs_->OnReports(w1, {r});
  job = jobs_->Get(*id)->job();
  ASSERT_EQ(job.state(), v1::RUNNING) << job.reason();
  EXPECT_EQ(job.attempt(), 3);
  EXPECT_EQ(job.restarts(), 1);  // the loss; not the growth
  EXPECT_EQ(FromProto(Next(w0).run().cluster()).at("worker").size(), 3u);
  (void)w3;
}

TEST_F(JobServiceTest, RefusesAnElasticPolicyTheClusterCannotHonourNamingTheField) {
  AddWorker();
  AddWorker();
  v1::JobSpec spec = RestartableJob(2, 2, 48);
  spec.mutable_restart_policy()->set_min_workers(1);
  spec.mutable_restart_policy()->set_replacement_timeout_ms(1000);  // below the 3 s heartbeat
  absl::StatusOr<std::string> id = jobs_->Submit(spec);
  EXPECT_THAT(id.status().message(),
              HasSubstr("restart_policy.replacement_timeout_ms: 1000 is shorter than the "
                        "coordinator's heartbeat timeout (3s)"));
  spec.mutable_restart_policy()->set_replacement_timeout_ms(5000);
  spec.set_global_batch_size(7);  // split by no count from 2 to 3 workers
  spec.set_num_workers(3);
  spec.mutable_restart_policy()->set_min_workers(2);
  id = jobs_->Submit(spec);
  EXPECT_THAT(id.status().message(),
              HasSubstr("restart_policy.min_workers: no worker count from 2 to 3 splits "
                        "global_batch_size 7 over its replicas (1 per worker); counts that "
                        "would: 1"));
}

TEST_F(JobServiceTest, ARestartingJobCanBeCancelledAndStartsNoAttempt) {
  const TaskRef w0 = AddWorker(), w1 = AddWorker();
  v1::JobSpec spec = RestartableJob(2, 3);
  auto id = jobs_->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(Next(w0).has_run());
  ASSERT_TRUE(Next(w1).has_run());
  // worker/1 is lost: the restart waits for a second worker.
  Report(w0, *id, 1, v1::JobReport::FAILED, 3, "all-reduce: peer rank 1 closed the connection");
  clock_.Advance(absl::Seconds(2));
  Beat(w0);
  clock_.Advance(absl::Seconds(2));
  jobs_->Tick();
  EXPECT_EQ(State(*id), v1::RESTARTING);
  ASSERT_TRUE(jobs_->Cancel(*id, "").ok());
  EXPECT_EQ(State(*id), v1::CANCELLED);
  jobs_->Tick();
  EXPECT_EQ(State(*id), v1::CANCELLED);
  EXPECT_EQ(jobs_->NextAssignment(w0, incarnations_[w0], clock_.Now()).status().code(),
            absl::StatusCode::kDeadlineExceeded);  // nothing new was pushed
}

// A job attempt's rendezvous keys are its workers' only, while it runs; when it ends, the
// server is told to delete them (and its barriers).
TEST_F(JobServiceTest, AnAttemptsKeysAreItsWorkersOnlyAndDieWithIt) {
  std::vector<std::string> ended;
  job_options_.on_attempt_ended = [&](const std::string& prefix) { ended.push_back(prefix); };
  OpenStore();
  const TaskRef w0 = AddWorker(1, "host-a"), w1 = AddWorker(1, "host-b");
  v1::JobSpec spec = SmallJob();
  spec.set_num_workers(1);
  auto id = jobs_->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(Next(w0).has_run());
  const std::string key = absl::StrCat("jobs/", *id, "/1/ready/0");
  EXPECT_TRUE(jobs_->CheckKeyAccess("host-a", key).ok());
  absl::Status other = jobs_->CheckKeyAccess("host-b", key);
  EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(other.message(), HasSubstr("host-b is not a worker of job " + *id + " attempt 1"));
  absl::Status later = jobs_->CheckKeyAccess("host-a", absl::StrCat("jobs/", *id, "/2/ready/0"));
  EXPECT_THAT(later.message(), HasSubstr("attempt 2 is not running"));
  // A job not yet submitted: its keys cannot be claimed.
  EXPECT_EQ(jobs_->CheckKeyAccess("host-a", "jobs/job-000099/1/x").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(jobs_->CheckKeyAccess("host-a", "jobs/nonsense").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(jobs_->CheckKeyAccess("host-b", "scratch/x").ok());  // the common area
  EXPECT_TRUE(jobs_->CheckKeyAccess("", key).ok());                // --insecure
  EXPECT_TRUE(ended.empty());
  Report(w0, *id, 1, v1::JobReport::DONE, 10);
  ASSERT_EQ(State(*id), v1::SUCCEEDED);
  EXPECT_THAT(ended, ::testing::ElementsAre(absl::StrCat("jobs/", *id, "/1/")));
  EXPECT_EQ(jobs_->CheckKeyAccess("host-a", key).code(), absl::StatusCode::kPermissionDenied);
  (void)w1;
}

TEST_F(JobServiceTest, StaleIncarnationIsAborted) {
  const TaskRef w0 = AddWorker();
  EXPECT_EQ(jobs_->NextAssignment(w0, 12345, clock_.Now()).status().code(),
            absl::StatusCode::kAborted);
  EXPECT_EQ(jobs_->NextAssignment(TaskRef{"worker", 9}, 1, clock_.Now()).status().code(),
            absl::StatusCode::kNotFound);
}

class JobServiceLimitsTest : public JobServiceTest {
 protected:
  JobServiceLimitsTest() {
    job_options_.max_pending_jobs = 2;
    job_options_.retained_jobs = 2;
    job_options_.limits.max_model_parameters = 100;
  }
};

TEST_F(JobServiceLimitsTest, QueuedJobsModelsAndBatchesAreLimited) {
  // No worker: every job waits in the queue.
  ASSERT_TRUE(jobs_->Submit(SmallJob()).ok());
  ASSERT_TRUE(jobs_->Submit(SmallJob()).ok());
  absl::StatusOr<std::string> third = jobs_->Submit(SmallJob());
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted) << third.status();
  EXPECT_THAT(third.status().message(), HasSubstr("2 jobs are already queued"));
  EXPECT_THAT(third.status().message(), HasSubstr("--max_pending_jobs"));
  // A cancelled job gives its place back.
  ASSERT_TRUE(jobs_->Cancel("job-000001", "").ok());
  EXPECT_TRUE(jobs_->Submit(SmallJob()).ok());

  v1::JobSpec big = SmallJob();
  big.mutable_model()->mutable_layers(0)->mutable_dense()->set_units(64);  // 8*64+64
  absl::StatusOr<std::string> refused = jobs_->Submit(big);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("--max_model_parameters"));
}

TEST_F(JobServiceLimitsTest, OnlyTheNewestEndedJobsAreKept) {
  const TaskRef w = AddWorker();
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    auto id = jobs_->Submit(SmallJob());
    ASSERT_TRUE(id.ok()) << id.status();
    ids.push_back(*id);
    ASSERT_TRUE(Next(w).has_run());
    Report(w, *id, 1, v1::JobReport::DONE, 10);
    ASSERT_EQ(State(*id), v1::SUCCEEDED);
    Beat(w);
    jobs_->Tick();
  }
  // The newest two ended jobs are kept; the older ones are gone from the store and memory.
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(absl::IsNotFound(jobs_->Get(ids[i]).status())) << ids[i];
    int64_t seen = 0;
    EXPECT_TRUE(absl::IsNotFound(jobs_->NextEvent(ids[i], &seen, clock_.Now()).status()));
  }
  for (int i = 3; i < 5; ++i) EXPECT_EQ(State(ids[i]), v1::SUCCEEDED);
  EXPECT_EQ(jobs_->List(0)->size(), 2u);
}

TEST_F(JobServiceLimitsTest, AJobIsKeptUntilItsWorkersLeftIt) {
  const Started s = StartOnTwoWorkers();
  Report(s.w0, s.id, 1, v1::JobReport::DONE, 10);
  Report(s.w1, s.id, 1, v1::JobReport::TRAINING, 9);
  ASSERT_TRUE(jobs_->Cancel(s.id, "").ok());
  // Two more jobs end on other workers: s.id is beyond the retention, but w1 still runs it.
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(jobs_->Submit(SmallJob()).ok());
    ASSERT_TRUE(jobs_->Cancel(absl::StrFormat("job-%06d", i + 2), "").ok());
  }
  jobs_->Tick();
  EXPECT_EQ(State(s.id), v1::CANCELLED);
  Report(s.w1, s.id, 1, v1::JobReport::ABORTED, 9);
  jobs_->Tick();
  EXPECT_TRUE(absl::IsNotFound(jobs_->Get(s.id).status()));
}

TEST_F(JobServiceLimitsTest, ReportsOfMadeUpAttemptsCannotGrowAWorkersMailbox) {
  const TaskRef w = AddWorker();
  // The worker watches once (its mailbox exists), then reports attempts that never were.
  EXPECT_TRUE(
      absl::IsDeadlineExceeded(jobs_->NextAssignment(w, incarnations_[w], clock_.Now()).status()));
  for (int i = 0; i < 1000; ++i) {
    Report(w, absl::StrCat("made-up-", i), 1, v1::JobReport::TRAINING);
  }
  int queued = 0;
  while (jobs_->NextAssignment(w, incarnations_[w], clock_.Now()).ok()) ++queued;
  EXPECT_EQ(queued, static_cast<int>(kMaxAdvisoryAborts));
}

TEST_F(JobServiceLimitsTest, ARestartedCoordinatorTrimsAStoreKeptLonger) {
  for (int i = 0; i < 4; ++i) {
    auto record = store_->Create("old", SmallJob().SerializeAsString());
    ASSERT_TRUE(record.ok());
    ASSERT_TRUE(store_->UpdateState(record->id(), v1::CANCELLED, "test").ok());
  }
  OpenStore();  // Recover(), as a coordinator started with --retained_jobs=2
  jobs_->Tick();
  EXPECT_EQ(jobs_->List(0)->size(), 2u);
  EXPECT_TRUE(absl::IsNotFound(jobs_->Get("job-000002").status()));
  EXPECT_EQ(State("job-000004"), v1::CANCELLED);
}

// A coordinator whose store holds a record that does not parse keeps serving: Recover()
// succeeds (it used to fail with DATA_LOSS, and the coordinator exited at every start), the
// job reads as FAILED naming the store, and every other job goes on.
TEST_F(JobServiceTest, CorruptStoredJobIsFailedAndTheOthersRun) {
  auto first = jobs_->Submit(SmallJob());
  auto second = jobs_->Submit(SmallJob());
  ASSERT_TRUE(first.ok() && second.ok());
  jobs_.reset();
  store_.reset();
  ASSERT_TRUE(CorruptStoredRecord(dir_, *first).ok());
  OpenStore();  // asserts that Recover() succeeds
  absl::StatusOr<v1::GetJobResponse> lost = jobs_->Get(*first);
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_EQ(lost->job().state(), v1::FAILED);
  EXPECT_THAT(lost->job().reason(), HasSubstr("job store '" + dir_ + "/jobs.sqlite3'"));
  EXPECT_THAT(lost->job().reason(), HasSubstr("unreadable record for job " + *first));
  EXPECT_EQ(jobs_->Cancel(*first, "").status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(jobs_->List(0)->size(), 2u);
  // The other job was kept and starts as soon as workers come.
  const TaskRef w0 = AddWorker(), w1 = AddWorker();
  jobs_->Tick();
  EXPECT_EQ(State(*second), v1::RUNNING);
  EXPECT_EQ(Next(w0).run().job_id(), *second);
  EXPECT_EQ(Next(w1).run().job_id(), *second);
}

// Every partition carries the plan the spec was lowered to at submit, the same one the
// store keeps beside the spec.
TEST_F(JobServiceTest, SubmitLowersOnceAndShipsThePlanInEveryPartition) {
  const TaskRef w0 = AddWorker(), w1 = AddWorker();
  v1::JobSpec spec = SmallJob();
  spec.mutable_checkpoint()->set_keep(0);  // a default the plan fills
  auto id = jobs_->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  const v1::Partition p0 = Next(w0).run(), p1 = Next(w1).run();
  EXPECT_EQ(p0.plan().version(), jobspec::kPlanVersion);
  EXPECT_EQ(p0.plan().strategy(), v1::MULTI_WORKER_MIRRORED);
  EXPECT_EQ(p0.plan().communication().backend(), v1::CommunicationPlan::LOCKSTEP);
  EXPECT_EQ(p0.plan().checkpoint().keep(), 5);
  EXPECT_EQ(p0.plan().SerializeAsString(), p1.plan().SerializeAsString());
  EXPECT_EQ(store_->Get(*id)->plan(), p0.plan().SerializeAsString());
  // GetJob answers the same plan (what `lockstep describe` shows).
  absl::StatusOr<v1::GetJobResponse> got = jobs_->Get(*id);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->plan().SerializeAsString(), p0.plan().SerializeAsString());
}

// The coordinator stops and the row of `id` is replaced by `record` (as another version of the
// coordinator wrote it: its plan as that version lowered it).
void ReplaceStoredPlan(const std::string& dir, const std::string& id, v1::JobRecord record,
                       const v1::JobPlan& plan) {
  record.set_plan(plan.SerializeAsString());
  ASSERT_TRUE(ReplaceStoredRecord(dir, id, record.SerializeAsString()).ok());
}

// A RUNNING elastic job whose plan the previous version lowered (plan version 1: no restart
// section) is re-adopted; its restart decisions are made from its spec as this version's
// lowering makes them (restart_policy.replacement_timeout_ms 0: 10 s), and GetJob shows the
// upgraded plan. What version 1 decided is kept.
TEST_F(JobServiceTest, AJobWithAVersionOnePlanIsReadoptedAndRestartsByItsUpgradedPlan) {
  const TaskRef w0 = AddWorker(), w1 = AddWorker(), w2 = AddWorker();
  v1::JobSpec spec = RestartableJob(3, 2, 48);
  spec.mutable_restart_policy()->set_min_workers(2);  // replacement timeout: the default
  auto id = jobs_->Submit(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  for (const TaskRef& w : {w0, w1, w2}) ASSERT_TRUE(Next(w).has_run());
  v1::JobPlan old;
  ASSERT_TRUE(old.ParseFromString(store_->Get(*id)->plan()));
  old.set_version(1);
  old.clear_restart();
  old.mutable_checkpoint()->set_keep(3);  // as version 1 decided it
  const v1::JobRecord stored = *store_->Get(*id);
  jobs_.reset();
  store_.reset();
  ReplaceStoredPlan(dir_, *id, stored, old);
  OpenStore();
  ASSERT_EQ(State(*id), v1::RUNNING) << jobs_->Get(*id)->job().reason();
  const v1::JobPlan shown = jobs_->Get(*id)->plan();
  EXPECT_EQ(shown.version(), jobspec::kPlanVersion);
  EXPECT_EQ(shown.checkpoint().keep(), 3);
  EXPECT_EQ(shown.restart().max_restarts(), 2);
  EXPECT_EQ(shown.restart().min_workers(), 2);
  EXPECT_EQ(shown.restart().max_workers(), 3);
  EXPECT_EQ(shown.restart().replacement_timeout_ms(), 10000);
  // The workers are back and report; then worker/2 is lost.
  for (const TaskRef& w : {w0, w1, w2}) Report(w, *id, 1, v1::JobReport::TRAINING, 3);
  Elapse(5, {w0, w1});  // to the end of the re-adoption's grace; worker/2 silent
  ASSERT_EQ(State(*id), v1::RESTARTING) << jobs_->Get(*id)->job().reason();
  EXPECT_THAT(jobs_->Get(*id)->job().reason(), HasSubstr("restart 1 of 2"));
  Report(w0, *id, 1, v1::JobReport::ABORTED, 7);
  Report(w1, *id, 1, v1::JobReport::ABORTED, 7);
  Elapse(9, {w0, w1});
  EXPECT_EQ(State(*id), v1::RESTARTING);  // no replacement: still waiting after 9 s
  Elapse(1, {w0, w1});                    // 10 s: the upgraded plan's replacement timeout
  const v1::JobRecord shrunk = jobs_->Get(*id)->job();
  ASSERT_EQ(shrunk.state(), v1::RUNNING) << shrunk.reason();
  EXPECT_THAT(shrunk.reason(), HasSubstr("of 3 workers: no replacement came within"));
}

// A plan a newer coordinator stored (a version this one does not know) is not half-read: the
// job is FAILED naming both versions, and the others run.
TEST_F(JobServiceTest, AJobWithAPlanOfANewerCoordinatorFailsNamingBothVersions) {
  auto newer = jobs_->Submit(SmallJob());
  auto other = jobs_->Submit(SmallJob());
  ASSERT_TRUE(newer.ok() && other.ok());
  v1::JobPlan plan;
  ASSERT_TRUE(plan.ParseFromString(store_->Get(*newer)->plan()));
  plan.set_version(jobspec::kPlanVersion + 1);
  const v1::JobRecord stored = *store_->Get(*newer);
  jobs_.reset();
  store_.reset();
  ReplaceStoredPlan(dir_, *newer, stored, plan);
  OpenStore();
  v1::JobRecord job = jobs_->Get(*newer)->job();
  EXPECT_EQ(job.state(), v1::FAILED);
  EXPECT_THAT(job.reason(),
              HasSubstr(absl::StrCat("plan has version ", jobspec::kPlanVersion + 1)));
  EXPECT_THAT(job.reason(), HasSubstr(absl::StrCat("knows versions 1 to ", jobspec::kPlanVersion)));
  EXPECT_THAT(job.reason(), HasSubstr("stored by a newer coordinator"));
  const TaskRef w0 = AddWorker(), w1 = AddWorker();
  jobs_->Tick();
  EXPECT_EQ(State(*other), v1::RUNNING);
  EXPECT_EQ(Next(w0).run().job_id(), *other);
  (void)w1;
}

// A record stored by a coordinator from before plans (no plan in its row) is lowered when the
// job is recovered and started: it runs as before. One whose spec no longer lowers is FAILED
// naming why, and the others run.
TEST_F(JobServiceTest, AStoredJobWithoutAPlanIsLoweredOnRecoveryOrFailsNamingWhy) {
  auto old = store_->Create("old", SmallJob().SerializeAsString());
  v1::JobSpec bad = SmallJob();
  bad.set_global_batch_size(0);  // accepted once by a coordinator with other rules
  auto refused = store_->Create("bad", bad.SerializeAsString());
  ASSERT_TRUE(old.ok() && refused.ok());
  jobs_.reset();
  store_.reset();
  OpenStore();  // asserts that Recover() succeeds
  EXPECT_EQ(State(refused->id()), v1::FAILED);
  EXPECT_THAT(jobs_->Get(refused->id())->job().reason(),
              HasSubstr("stored by a coordinator from before job plans"));
  EXPECT_THAT(jobs_->Get(refused->id())->job().reason(), HasSubstr("global_batch_size: 0"));
  const TaskRef w0 = AddWorker(), w1 = AddWorker();
  jobs_->Tick();
  EXPECT_EQ(State(old->id()), v1::RUNNING);
  const v1::Partition p0 = Next(w0).run();
  EXPECT_EQ(p0.job_id(), old->id());
  EXPECT_EQ(p0.plan().version(), jobspec::kPlanVersion);
  EXPECT_EQ(p0.plan().strategy(), v1::MULTI_WORKER_MIRRORED);
  EXPECT_TRUE(Next(w1).has_run());
}

// A row SQLite itself cannot read (a damaged page of the job's record) costs that job only:
// the coordinator starts (it used to exit: listing the jobs failed as a whole), answers the
// job FAILED naming the store and SQLite's error, and runs the others.
TEST_F(JobServiceTest, StoredJobSqliteCannotReadIsFailedAndTheOthersRun) {
  // A spec with a 20 KB unknown field (protobuf keeps it): a record over several pages.
  std::string padding(20000, '\0');
  for (size_t i = 0; i < padding.size(); ++i) {
    padding[i] = static_cast<char>((i * 2654435761u) >> 13);
  }
  std::string big_spec = SmallJob().SerializeAsString();
  big_spec += std::string("\xc2\x3e", 2);      // field 1000, length-delimited
  big_spec += std::string("\xa0\x9c\x01", 3);  // 20000, as a varint
  big_spec += padding;
  ASSERT_TRUE(v1::JobSpec().ParseFromString(big_spec));
  auto big = store_->Create("big", big_spec);
  ASSERT_TRUE(big.ok()) << big.status();
  auto other = jobs_->Submit(SmallJob());
  ASSERT_TRUE(other.ok()) << other.status();
  jobs_.reset();
  store_.reset();
  absl::Status damaged = DamageStoredRecordPage(dir_, big->id());
  ASSERT_TRUE(damaged.ok()) << damaged;
  OpenStore();  // asserts that Recover() succeeds
  absl::StatusOr<v1::GetJobResponse> lost = jobs_->Get(big->id());
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_EQ(lost->job().state(), v1::FAILED);
  EXPECT_THAT(lost->job().reason(), HasSubstr("job store '" + dir_ + "/jobs.sqlite3'"));
  EXPECT_THAT(lost->job().reason(), HasSubstr("SQLite cannot read it"));
  ASSERT_EQ(jobs_->List(0)->size(), 2u);
  const TaskRef w0 = AddWorker(), w1 = AddWorker();
  jobs_->Tick();
  EXPECT_EQ(State(*other), v1::RUNNING);
  EXPECT_EQ(Next(w0).run().job_id(), *other);
  EXPECT_EQ(Next(w1).run().job_id(), *other);
}

// The store does not take a job's start (a full disk): the job stays PENDING and queued,
// nothing is pushed to a worker, the failure is counted and told to watchers, and the start
// is tried again after a backoff (it used to be dropped from the queue, PENDING until a
// coordinator restart).
TEST_F(JobServiceTest, StartTheStoreDoesNotTakeIsRetriedWithABackoff) {
  auto id = jobs_->Submit(SmallJob());
  ASSERT_TRUE(id.ok()) << id.status();
  fail_store_writes_ = true;
  const TaskRef w0 = AddWorker(), w1 = AddWorker();
  jobs_->Tick();
  EXPECT_EQ(State(*id), v1::PENDING);
  EXPECT_EQ(jobs_->GetStoreHealth().write_failures, 1);
  int64_t seen = 0;
  absl::StatusOr<v1::JobEvent> event = jobs_->NextEvent(*id, &seen, clock_.Now());
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_THAT(event->message(), HasSubstr("the job store did not take its start"));
  EXPECT_THAT(event->message(), HasSubstr("disk full (injected)"));
  EXPECT_TRUE(absl::IsDeadlineExceeded(
      jobs_->NextAssignment(w0, incarnations_[w0], clock_.Now()).status()));
  // Within the backoff nothing is tried; after it, the next failure doubles it.
  jobs_->Tick();
  EXPECT_EQ(jobs_->GetStoreHealth().write_failures, 1);
  clock_.Advance(absl::Milliseconds(500));
  jobs_->Tick();
  EXPECT_EQ(jobs_->GetStoreHealth().write_failures, 2);
  // The disk has room again: the job starts after the backoff.
  fail_store_writes_ = false;
  clock_.Advance(absl::Milliseconds(999));
  jobs_->Tick();
  EXPECT_EQ(State(*id), v1::PENDING);
  clock_.Advance(absl::Milliseconds(1));
  jobs_->Tick();
  EXPECT_EQ(State(*id), v1::RUNNING);
  EXPECT_EQ(Next(w0).run().job_id(), *id);
  EXPECT_EQ(Next(w1).run().job_id(), *id);
  EXPECT_EQ(store_->Get(*id)->attempt_workers_size(), 2);
}

// The store does not take a job's end: the service shows the state it decided, saying it is
// not saved yet, does not start the job again, and retries the write until the store has
// it (it used to be dropped, the job RUNNING on disk and re-adopted after a restart).
TEST_F(JobServiceTest, EndTheStoreDoesNotTakeIsShownAndRetried) {
  const Started s = StartOnTwoWorkers();
  fail_store_writes_ = true;
  Report(s.w0, s.id, 1, v1::JobReport::FAILED, 3, "out of memory");
  Report(s.w1, s.id, 1, v1::JobReport::ABORTED, 3);
  absl::StatusOr<v1::GetJobResponse> got = jobs_->Get(s.id);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->job().state(), v1::FAILED);
  EXPECT_THAT(got->job().reason(), HasSubstr("out of memory"));
  EXPECT_THAT(got->job().reason(), HasSubstr("not yet saved in the job store"));
  EXPECT_THAT(got->job().reason(), HasSubstr("disk full (injected)"));
  EXPECT_EQ((*jobs_->List(0))[0].state(), v1::FAILED);
  EXPECT_EQ(store_->Get(s.id)->state(), v1::RUNNING);  // what the disk says, for now
  EXPECT_EQ(jobs_->GetStoreHealth().unsaved_jobs, 1);
  EXPECT_EQ(jobs_->Cancel(s.id, "").status().code(), absl::StatusCode::kFailedPrecondition);
  const int64_t failures = jobs_->GetStoreHealth().write_failures;
  EXPECT_GE(failures, 1);
  clock_.Advance(absl::Milliseconds(500));
  jobs_->Tick();
  EXPECT_EQ(jobs_->GetStoreHealth().write_failures, failures + 1);
  fail_store_writes_ = false;
  clock_.Advance(absl::Seconds(1));
  jobs_->Tick();
  EXPECT_EQ(jobs_->GetStoreHealth().unsaved_jobs, 0);
  absl::StatusOr<v1::JobRecord> stored = store_->Get(s.id);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->state(), v1::FAILED);
  EXPECT_THAT(stored->reason(), HasSubstr("out of memory"));
  EXPECT_THAT(stored->reason(), Not(HasSubstr("not yet saved")));
  // A restarted coordinator finds it ended: nothing is re-adopted.
  OpenStore();
  EXPECT_EQ(State(s.id), v1::FAILED);
  EXPECT_TRUE(jobs_->RunningTasks().empty());
}

// A restartable job's RESTARTING that the store does not take: the next attempt waits for
// the store to have it (RUNNING -> RUNNING is no transition), then starts.
TEST_F(JobServiceTest, RestartWaitsForTheStoreToTakeRestarting) {
  const TaskRef w0 = AddWorker(), w1 = AddWorker();
  auto id = jobs_->Submit(RestartableJob(2, 1));
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(Next(w0).has_run() && Next(w1).has_run());
  fail_store_writes_ = true;
  Report(w0, *id, 1, v1::JobReport::FAILED, 6, "bad batch");
  Report(w1, *id, 1, v1::JobReport::ABORTED, 6);
  EXPECT_EQ(State(*id), v1::RESTARTING);
  clock_.Advance(absl::Seconds(1));  // past the quick-failure backoff (0.5 s)
  Beat(w0), Beat(w1);
  jobs_->Tick();
  EXPECT_EQ(State(*id), v1::RESTARTING);  // not started again while the store lags
  EXPECT_EQ(store_->Get(*id)->attempt(), 1);
  fail_store_writes_ = false;
  clock_.Advance(absl::Seconds(1));
  Beat(w0), Beat(w1);
  jobs_->Tick();
  EXPECT_EQ(State(*id), v1::RUNNING);
  EXPECT_EQ(store_->Get(*id)->attempt(), 2);
  EXPECT_EQ(store_->Get(*id)->restarts(), 1);
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep
