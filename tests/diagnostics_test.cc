// Seeing a stuck or slow job, end to end: a real coordinator and three lockstepd on
// loopback training the digits MLP, one of them stalled in its input or its compute by a
// test hook (LOCKSTEP_TEST_HOOKS, worker/test_hooks.h), SIGSTOPped, or slowed down. The hang
// verdict in `describe` (and `status`, `dump`) names the stalled worker, the straggler is
// named, and `lockstep logs` shows every worker's lines (--follow ends with the job).
// Every wait has a deadline; every child is reaped by LocalCluster (a stopped worker is sent
// SIGCONT first).
#include <signal.h>

#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/job_format.h"
#include "client/job_service_client.h"
#include "client/local_cluster.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "lockstep/v1/diagnostics.pb.h"
#include "tests/test_util.h"

namespace lockstep {
namespace {

using testing::DigitsJob;
using testing::EndlessJob;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ReadFile;
using testing::Result;

constexpr absl::Duration kInterval = absl::Seconds(1);  // the default heartbeat interval
constexpr absl::Duration kTimeout = absl::Seconds(6);
// A stopped worker is named once its last heartbeat is older than the verdict's stale_after
// (1.5 intervals, diagnostics_service.cc) and a live worker has reported waiting longer than
// min_wait (half an interval) -- both within 1.5 intervals of the stop. The operations target
// is two intervals; the test allows one interval more for a heartbeat a loaded machine
// delays, which keeps it well below the heartbeat timeout (kTimeout), where the worker would
// be LOST rather than named.
constexpr absl::Duration kVerdictBound = absl::Milliseconds(2500);  // 2.5 x kInterval

class DiagnosticsTest : public ::testing::Test {
 protected:
  // Three workers (lockstepd i is worker/i); `hooks` for worker/2 ("": none).
  void StartCluster(const std::string& hooks) {
    client::LocalClusterOptions o = testing::TestClusterOptions(3, kInterval, kTimeout);
    if (!hooks.empty()) o.worker_env[2] = {{"LOCKSTEP_TEST_HOOKS", hooks}};
    auto cluster = client::LocalCluster::StartCoordinator(o);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
    ASSERT_TRUE(cluster_->StartWorkers().ok());
    ASSERT_TRUE(cluster_->WaitForAlive(3, absl::Now() + absl::Seconds(20)).ok());
    auto jobs = client::JobServiceClient::Create(cluster_->coordinator_address(),
                                                 cluster_->client_tls(), absl::Seconds(10));
    ASSERT_TRUE(jobs.ok());
    jobs_ = std::move(*jobs);
  }
  const std::string& dir() { return cluster_->options().work_dir; }

  Result Cli(std::vector<std::string> args, absl::Duration limit = absl::Seconds(30)) {
    return testing::RunCli(*cluster_, std::move(args), limit);
  }

  // Polls GetJob (what `describe` shows) until `done` holds for its diagnosis; the last
  // answer, or a failure naming the last verdict at the deadline.
  v1::GetJobResponse WaitForDiagnosis(const std::string& id,
                                      const std::function<bool(const v1::JobDiagnosis&)>& done,
                                      absl::Time deadline) {
    v1::GetJobResponse last;
    while (absl::Now() < deadline) {
      absl::StatusOr<v1::GetJobResponse> job = jobs_->GetJob(id);
      if (!job.ok()) {
        ADD_FAILURE() << job.status();
        return last;
      }
      last = *job;
      if (done(last.diagnosis())) return last;
      absl::SleepFor(absl::Milliseconds(10));
    }
    ADD_FAILURE() << "no such diagnosis by the deadline; the last describe:\n"
                  << client::FormatJobDescription(last) << "\ncoordinator log:\n"
                  << ReadFile(dir() + "/coordinator.log").substr(0, 4000);
    return last;
  }

  // Waits until the job is past `step` with reports from every worker.
  void WaitForStep(const std::string& id, int64_t step) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      auto job = jobs_->GetJob(id);
      ASSERT_TRUE(job.ok()) << job.status();
      ASSERT_EQ(job->job().state(), v1::RUNNING) << job->job().reason();
      if (job->job().progress().step() >= step && job->workers_size() >= 3) return;
      absl::SleepFor(absl::Milliseconds(20));
    }
    FAIL() << "job " << id << " did not reach step " << step;
  }

  // A stalled worker/2: the verdict names it in `describe`, `status` and `dump`.
  void ExpectStallNamed(const std::string& phase) {
    auto id = jobs_->SubmitJob(EndlessJob(dir()));
    ASSERT_TRUE(id.ok()) << id.status();
    const std::string named = absl::StrCat("worker/2 never entered it: in ", phase, " at step 30");
    // Once every worker has reported since the stall (a fast job reaches step 30 before its
    // workers' first heartbeats), the other two wait in the collective worker/2 never entered.
    const v1::GetJobResponse job = WaitForDiagnosis(
        *id,
        [&](const v1::JobDiagnosis& d) {
          return absl::StrContains(d.hang_verdict(), named) &&
                 absl::StrContains(d.hang_verdict(), "worker/0, worker/1 waiting");
        },
        absl::Now() + absl::Seconds(60));
    std::cerr << "verdict: " << job.diagnosis().hang_verdict() << "\n";

    Result r = Cli({"describe", *id});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("HANG:"));
    EXPECT_THAT(r.output, HasSubstr(named));
    r = Cli({"status"});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr(absl::StrCat(*id, " HANG:")));
    EXPECT_THAT(r.output, HasSubstr(named));

    r = Cli({"dump", *id});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    v1::DumpJobResponse dump;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.output, &dump).ok()) << r.output;
    ASSERT_EQ(dump.diagnosis().ranks_size(), 3);
    for (const v1::RankDiagnosis& rank : dump.diagnosis().ranks()) {
      ASSERT_TRUE(rank.has_record()) << r.output;
      EXPECT_GT(rank.record().collectives_size(), 0);
      if (rank.task().index() == 2) {
        EXPECT_EQ(PhaseName(rank.record().phase()), phase);
        EXPECT_EQ(rank.record().step(), 30);
      } else {
        EXPECT_EQ(rank.record().last_seq_entered(),
                  dump.diagnosis().ranks(2).record().last_seq_entered() + 1);
      }
    }
    ASSERT_TRUE(jobs_->CancelJob(*id, "test over").ok());
  }

  static std::string PhaseName(v1::TrainPhase p) {
    return p == v1::PHASE_INPUT ? "input" : p == v1::PHASE_COMPUTE ? "compute" : "other";
  }

  std::unique_ptr<client::LocalCluster> cluster_;
  std::unique_ptr<client::JobServiceClient> jobs_;
};

TEST_F(DiagnosticsTest, AWorkerStalledInItsInputIsNamed) {
  StartCluster("stall=input@30");
  ExpectStallNamed("input");
}

TEST_F(DiagnosticsTest, AWorkerStalledInItsComputeIsNamed) {
  StartCluster("stall=compute@30");
  ExpectStallNamed("compute");
}

// SIGSTOP: the stopped worker sends nothing more; the verdict comes from the others'
// records (they wait in a collective it is not in, or it is silent) within two heartbeats.
TEST_F(DiagnosticsTest, AStoppedWorkerIsNamedWithinTwoHeartbeats) {
  StartCluster("");
  auto id = jobs_->SubmitJob(EndlessJob(dir()));
  ASSERT_TRUE(id.ok()) << id.status();
  WaitForStep(*id, 20);
  Subprocess* hung = cluster_->worker(1);
  struct Resume {
    Subprocess* p;
    ~Resume() { p->Signal(SIGCONT); }
  } resume{hung};
  hung->Signal(SIGSTOP);
  const absl::Time stopped = absl::Now();
  // worker/1 singled out: it never entered the collective or is silent, and neither other
  // worker is blamed (they wait in it, or one finished it and waits in the next).
  auto names_it = [](const v1::JobDiagnosis& d) {
    const std::string& v = d.hang_verdict();
    for (const char* other : {"worker/0", "worker/2"}) {
      for (const char* blame : {" never entered", " sent no heartbeat", " not heard from"}) {
        if (absl::StrContains(v, absl::StrCat(other, blame))) return false;
      }
    }
    return absl::StrContains(v, "worker/1 never entered it") ||
           absl::StrContains(v, "worker/1 sent no heartbeat");
  };
  const v1::GetJobResponse job = WaitForDiagnosis(*id, names_it, stopped + kTimeout);
  const absl::Duration took = absl::Now() - stopped;
  std::cerr << "worker/1 SIGSTOPped: the verdict named it after " << took << " (heartbeat every "
            << kInterval << "): " << job.diagnosis().hang_verdict() << "\n";
  EXPECT_TRUE(names_it(job.diagnosis()));
  EXPECT_THAT(job.diagnosis().hang_verdict(), Not(HasSubstr("worker/1 waiting")));
  EXPECT_LE(took, kVerdictBound);
}

TEST_F(DiagnosticsTest, ASlowWorkerIsNamedAStraggler) {
  StartCluster("slow_compute_ms=20");
  auto id = jobs_->SubmitJob(EndlessJob(dir()));
  ASSERT_TRUE(id.ok()) << id.status();
  const v1::GetJobResponse job = WaitForDiagnosis(
      *id, [](const v1::JobDiagnosis& d) { return d.stragglers_size() > 0; },
      absl::Now() + absl::Seconds(60));
  ASSERT_EQ(job.diagnosis().stragglers_size(), 1) << client::FormatJobDescription(job);
  EXPECT_THAT(job.diagnosis().stragglers(0), HasSubstr("worker/2: compute "));
  EXPECT_EQ(job.diagnosis().hang_verdict(), "");
  std::cerr << "straggler: " << job.diagnosis().stragglers(0) << "\n";
  Result r = Cli({"describe", *id});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("STRAGGLER: worker/2: compute "));
  ASSERT_TRUE(jobs_->CancelJob(*id, "test over").ok());
}

TEST_F(DiagnosticsTest, LogsShowEveryWorkerAndFollowEndsWithTheJob) {
  StartCluster("");
  v1::JobSpec spec = DigitsJob(dir());
  spec.set_epochs(0);
  spec.set_steps(300);
  auto id = jobs_->SubmitJob(spec);
  ASSERT_TRUE(id.ok()) << id.status();
  Result r = Cli({"logs", *id, "--follow"}, absl::Seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto job = jobs_->GetJob(*id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->job().state(), v1::SUCCEEDED) << "--follow ended before the job did";
  for (int w = 0; w < 3; ++w) {
    EXPECT_THAT(r.output, HasSubstr(absl::StrCat("[worker/", w, "] "))) << r.output;
  }
  EXPECT_THAT(r.output, HasSubstr("step 300/300 loss"));
  EXPECT_THAT(r.output, HasSubstr("TRAINING -> DONE"));

  r = Cli({"logs", *id, "--worker", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[worker/1] "));
  EXPECT_THAT(r.output, Not(HasSubstr("[worker/0] ")));
  EXPECT_THAT(r.output, Not(HasSubstr("[worker/2] ")));

  r = Cli({"logs", "job-999999"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("job-999999"));
}

}  // namespace
}  // namespace lockstep
