// The coordinator's job RPCs over real gRPC in one process, with a hand-driven fake
// worker: WatchAssignments delivers the partition and the abort, heartbeat reports move
// the job, WatchJob streams it to its end, and Shutdown ends open streams promptly.
#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/job_format.h"
#include "client/job_service_client.h"
#include "common/cluster_proto.h"
#include "common/protocol_version.h"
#include "coordinator/grpc_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lockstep/v1/coordinator.grpc.pb.h"

namespace lockstep {
namespace {

using ::testing::HasSubstr;

// A tiny valid job on synthetic data, as a user would write it.
v1::JobSpec SmallJob() {
  auto spec = client::ParseJobSpecJson(R"({
      "name": "small",
      "model": {"inputShape": [8], "layers": [{"dense": {"units": 4}}],
                "loss": "SPARSE_CATEGORICAL_CROSSENTROPY"},
      "optimizer": {"sgd": {}, "learningRate": {"constant": {"value": 0.1}}},
      "data": {"train": {"format": "SYNTHETIC", "syntheticExamples": 256}},
      "globalBatchSize": 8, "steps": 10})",
                                       "small job");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.value_or(v1::JobSpec());
}

class JobsGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    coordinator::CoordinatorServerOptions o;
    o.host = "127.0.0.1";
    o.state_dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/state");
    // The job RPCs' behaviour, not their security (tests/security_test.cc): plaintext.
    o.tls.insecure = true;
    auto server = coordinator::CoordinatorServer::Create(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    stub_ = v1::WorkerService::NewStub(
        grpc::CreateChannel(server_->local_address(), grpc::InsecureChannelCredentials()));
    jobs_ = std::move(client::JobServiceClient::Create(
                          server_->local_address(), TlsOptions{.insecure = true}, absl::Seconds(5))
                          .value());
    grpc::ClientContext ctx;
    v1::RegisterWorkerRequest r;
    r.set_address("127.0.0.1:5999");
    r.set_incarnation(42);
    r.set_protocol_version(kProtocolVersion);
    r.add_devices()->set_index(0);
    v1::RegisterWorkerResponse response;
    ASSERT_TRUE(stub_->RegisterWorker(&ctx, r, &response).ok());
    task_ = response.task();
  }
  void Report(const std::string& id, v1::JobReport::Phase phase) {
    grpc::ClientContext ctx;
    v1::HeartbeatRequest h;
    *h.mutable_task() = task_;
    h.set_incarnation(42);
    v1::JobReport* r = h.add_jobs();
    r->set_job_id(id);
    r->set_attempt(1);
    r->set_phase(phase);
    r->set_step(10);
    r->set_total_steps(10);
    r->set_checkpoint_path("/ckpt/ckpt-10");
    v1::HeartbeatResponse response;
    ASSERT_TRUE(stub_->Heartbeat(&ctx, h, &response).ok());
  }

  std::unique_ptr<coordinator::CoordinatorServer> server_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  std::unique_ptr<client::JobServiceClient> jobs_;
  v1::TaskId task_;
};

TEST_F(JobsGrpcTest, PartitionReportsAndWatchToSuccess) {
  grpc::ClientContext assignments_ctx;
  v1::WatchAssignmentsRequest w;
  *w.mutable_task() = task_;
  w.set_incarnation(42);
  auto assignments = stub_->WatchAssignments(&assignments_ctx, w);

  auto id = jobs_->SubmitJob(SmallJob());
  ASSERT_TRUE(id.ok()) << id.status();
  v1::Assignment a;
  ASSERT_TRUE(assignments->Read(&a));
  EXPECT_EQ(a.run().job_id(), *id);
  // The group arrives typed, over the real gRPC service: this worker alone, as the chief.
  absl::StatusOr<TfConfig> group = TfConfigFromProto(a.run().cluster(), a.run().task());
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_TRUE(group->is_chief());
  EXPECT_EQ(group->cluster(), (ClusterMap{{"worker", {"127.0.0.1:5999"}}}));

  std::vector<v1::JobState> seen;
  absl::Notification watching;
  absl::StatusOr<v1::JobEvent> last;
  std::thread watcher([&] {
    last = jobs_->WatchJob(
        *id,
        [&](const v1::JobEvent& e) {
          seen.push_back(e.job().state());
          if (!watching.HasBeenNotified()) watching.Notify();
        },
        absl::Now() + absl::Seconds(20));
  });
  // The first event is the state when the watch starts: report only after it.
  EXPECT_TRUE(watching.WaitForNotificationWithTimeout(absl::Seconds(10)));
  Report(*id, v1::JobReport::TRAINING);
  Report(*id, v1::JobReport::DONE);
  watcher.join();
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->job().state(), v1::SUCCEEDED);
  EXPECT_EQ(last->job().progress().checkpoint_path(), "/ckpt/ckpt-10");
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front(), v1::RUNNING);
  absl::StatusOr<v1::GetJobResponse> got = jobs_->GetJob(*id);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->job().state(), v1::SUCCEEDED);
  // GetJob answers the plan the partition carried.
  EXPECT_EQ(got->plan().SerializeAsString(), a.run().plan().SerializeAsString());
  EXPECT_EQ(got->plan().strategy(), v1::MULTI_WORKER_MIRRORED);

  // Refusals carry the field; a wrong incarnation cannot watch assignments.
  v1::JobSpec bad = SmallJob();
  bad.set_global_batch_size(0);
  absl::Status s = jobs_->SubmitJob(bad).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("global_batch_size"));
  grpc::ClientContext stale_ctx;
  w.set_incarnation(7);
  auto stale = stub_->WatchAssignments(&stale_ctx, w);
  EXPECT_FALSE(stale->Read(&a));
  EXPECT_EQ(stale->Finish().error_code(), grpc::StatusCode::ABORTED);

  // Shutdown with the assignment stream still open ends it promptly.
  const absl::Time start = absl::Now();
  server_->Shutdown();
  EXPECT_FALSE(assignments->Read(&a));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

// Over the wire: a worker of another protocol version, or one that sends none (a lockstepd
// from before the field), is refused at registration naming both versions; nothing is held.
TEST_F(JobsGrpcTest, RegistrationRefusesAnotherProtocolVersion) {
  for (const int32_t version : {0, kProtocolVersion + 1}) {
    grpc::ClientContext ctx;
    v1::RegisterWorkerRequest r;
    r.mutable_task()->set_type("worker");
    r.mutable_task()->set_index(7);
    r.set_address("127.0.0.1:5998");
    r.set_incarnation(43);
    r.set_protocol_version(version);
    v1::RegisterWorkerResponse response;
    const grpc::Status s = stub_->RegisterWorker(&ctx, r, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("worker/7 at 127.0.0.1:5998"));
    EXPECT_THAT(s.error_message(), HasSubstr(absl::StrCat("protocol version ", version)));
    EXPECT_THAT(s.error_message(),
                HasSubstr(absl::StrCat("this coordinator speaks version ", kProtocolVersion)));
  }
  absl::StatusOr<v1::GetClusterStatusResponse> cluster = jobs_->GetClusterStatus();
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_EQ(cluster->tasks_size(), 1);  // the fixture's worker only
  EXPECT_EQ(cluster->tasks(0).task().index(), task_.index());
}

TEST_F(JobsGrpcTest, CancelPushesAbort) {
  grpc::ClientContext ctx;
  v1::WatchAssignmentsRequest w;
  *w.mutable_task() = task_;
  w.set_incarnation(42);
  auto assignments = stub_->WatchAssignments(&ctx, w);
  auto id = jobs_->SubmitJob(SmallJob());
  ASSERT_TRUE(id.ok());
  v1::Assignment a;
  ASSERT_TRUE(assignments->Read(&a));
  auto cancelled = jobs_->CancelJob(*id, "test");
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), v1::CANCELLED);
  ASSERT_TRUE(assignments->Read(&a));
  EXPECT_EQ(a.abort().job_id(), *id);
  EXPECT_EQ(a.abort().reason(), "test");
  EXPECT_EQ(jobs_->CancelJob(*id).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(jobs_->GetJob("job-424242").status().code(), absl::StatusCode::kNotFound);
  ctx.TryCancel();
}

}  // namespace
}  // namespace lockstep
