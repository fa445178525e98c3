// The agent's job duties: the assignment stream while ALIVE, reports in heartbeats, jobs
// dropped when LOST or when the coordinator restarts.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "worker/agent.h"
#include "worker/fake_worker_service_client.h"

namespace lockstep {
namespace worker {
namespace {

using State = Agent::State;

// Records what the agent hands it; reports one TRAINING job.
class RecordingHandler final : public AssignmentHandler {
 public:
  void Handle(const v1::Assignment& a) override {
    absl::MutexLock l(&mu_);
    handled_.push_back(a);
  }
  void DropAll(const std::string& reason) override {
    absl::MutexLock l(&mu_);
    drops_.push_back(reason);
  }
  std::vector<v1::JobReport> Reports() override {
    v1::JobReport r;
    r.set_job_id("job-1");
    r.set_phase(v1::JobReport::TRAINING);
    r.set_step(17);
    return {r};
  }
  std::vector<v1::JobDiagnostics> Diagnostics() override {
    v1::JobDiagnostics d;
    d.set_job_id("job-1");
    d.mutable_record()->set_step(17);
    d.add_log_lines()->set_text("step 17");
    return {d};
  }
  std::vector<v1::Assignment> handled() {
    absl::MutexLock l(&mu_);
    return handled_;
  }
  std::vector<std::string> drops() {
    absl::MutexLock l(&mu_);
    return drops_;
  }

 private:
  absl::Mutex mu_;
  std::vector<v1::Assignment> handled_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> drops_ ABSL_GUARDED_BY(mu_);
};

template <typename F>
bool Eventually(F pred) {
  const absl::Time limit = absl::Now() + absl::Seconds(10);
  while (!pred()) {
    if (absl::Now() > limit) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

v1::Assignment RunJob(const std::string& job) {
  v1::Assignment a;
  a.mutable_run()->set_job_id(job);
  return a;
}

class AgentJobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_.on_register =
        [](const v1::RegisterWorkerRequest& req) -> absl::StatusOr<v1::RegisterWorkerResponse> {
      v1::RegisterWorkerResponse r;
      *r.mutable_task() = req.task();
      r.set_heartbeat_interval_ms(2);
      return r;
    };
    // Hooks are set before the agent runs; a test asks for a LOST through the flag.
    client_.on_heartbeat = [this](const v1::HeartbeatRequest&) -> absl::Status {
      if (lose_next_heartbeat_.exchange(false)) {
        return absl::AbortedError("worker/0 was marked LOST");
      }
      if (forget_next_heartbeat_.exchange(false)) {
        return absl::NotFoundError("task worker/0 is not registered");
      }
      return absl::OkStatus();
    };
    AgentOptions o;
    o.task = TaskRef{"worker", 0};
    o.address = "127.0.0.1:5000";
    o.incarnation = 42;
    o.initial_backoff = absl::Milliseconds(1);
    o.max_backoff = absl::Milliseconds(4);
    o.jobs = &handler_;
    agent_ = std::make_unique<Agent>(o, &client_, Clock::Real());
    thread_ = std::thread([this] { agent_->Run().IgnoreError(); });
    ASSERT_TRUE(agent_->WaitForState(State::kAlive, absl::Now() + absl::Seconds(10)));
  }
  void TearDown() override {
    agent_->Stop();
    thread_.join();
  }

  std::atomic<bool> lose_next_heartbeat_{false};
  // The next heartbeat answers NOT_FOUND: a restarted coordinator forgot the task.
  std::atomic<bool> forget_next_heartbeat_{false};
  FakeWorkerServiceClient client_;
  RecordingHandler handler_;
  std::unique_ptr<Agent> agent_;
  std::thread thread_;
};

TEST_F(AgentJobsTest, HandsAssignmentsToTheHandlerAndReportsJobsInHeartbeats) {
  client_.PushAssignment(RunJob("job-1"));
  ASSERT_TRUE(Eventually([&] { return handler_.handled().size() == 1; }));
  EXPECT_EQ(handler_.handled()[0].run().job_id(), "job-1");
  ASSERT_TRUE(Eventually([&] {
    for (const v1::HeartbeatRequest& h : client_.heartbeats()) {
      // The flight record and log lines ride in the same heartbeat.
      if (h.jobs_size() == 1 && h.jobs(0).step() == 17 && h.jobs(0).job_id() == "job-1" &&
          h.diagnostics_size() == 1 && h.diagnostics(0).record().step() == 17 &&
          h.diagnostics(0).log_lines(0).text() == "step 17") {
        return true;
      }
    }
    return false;
  }));
  EXPECT_TRUE(handler_.drops().empty());
}

TEST_F(AgentJobsTest, ReopensABrokenStream) {
  ASSERT_TRUE(Eventually([&] { return client_.calls("WatchAssignments") >= 1; }));
  client_.BreakStreams(absl::UnavailableError("coordinator went away"));
  ASSERT_TRUE(Eventually([&] { return client_.calls("WatchAssignments") >= 2; }));
  client_.PushAssignment(RunJob("job-2"));
  ASSERT_TRUE(Eventually([&] { return handler_.handled().size() == 1; }));
  EXPECT_EQ(handler_.handled()[0].run().job_id(), "job-2");
}

// A restarted coordinator forgot this task (NOT_FOUND) and answers with a new incarnation:
// the agent registers again with its own incarnation and keeps its jobs, which the
// coordinator re-adopts from its store.
TEST_F(AgentJobsTest, KeepsJobsWhenTheCoordinatorRestarts) {
  ASSERT_TRUE(Eventually([&] { return client_.calls("WatchAssignments") >= 1; }));
  client_.set_coordinator_incarnation(1);
  const size_t before = client_.heartbeats().size();
  ASSERT_TRUE(Eventually([&] { return client_.heartbeats().size() >= before + 2; }));
  const int registrations = client_.calls("RegisterWorker");
  forget_next_heartbeat_ = true;
  client_.set_coordinator_incarnation(2);
  ASSERT_TRUE(Eventually([&] { return client_.calls("RegisterWorker") > registrations; }));
  ASSERT_TRUE(agent_->WaitForState(State::kAlive, absl::Now() + absl::Seconds(10)));
  const size_t after = client_.heartbeats().size();
  ASSERT_TRUE(Eventually([&] { return client_.heartbeats().size() >= after + 2; }));
  EXPECT_TRUE(handler_.drops().empty());
  EXPECT_EQ(client_.heartbeats().back().jobs_size(), 1);  // still reporting its job
}

TEST_F(AgentJobsTest, DropsJobsWhenLost) {
  // The watch must be open before the LOST, or re-registering opens the first one only.
  ASSERT_TRUE(Eventually([&] { return client_.calls("WatchAssignments") >= 1; }));
  lose_next_heartbeat_ = true;
  ASSERT_TRUE(Eventually([&] { return !handler_.drops().empty(); }));
  EXPECT_NE(handler_.drops()[0].find("LOST"), std::string::npos);
  ASSERT_TRUE(agent_->WaitForState(State::kAlive, absl::Now() + absl::Seconds(10)));
  ASSERT_TRUE(Eventually([&] { return client_.calls("WatchAssignments") >= 2; }));
}

}  // namespace
}  // namespace worker
}  // namespace lockstep
