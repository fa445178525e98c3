// JobServiceClient's one call path against a small in-process JobService: the answer, the
// coordinator's error with the RPC and the address named, the deadline, an unreachable
// coordinator, a malformed task, and WatchJob to the job's end.
#include "client/job_service_client.h"

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/loopback_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockstep::client {
namespace {

using ::testing::HasSubstr;

// job-1 exists (GetJob, and a stream RUNNING then SUCCEEDED); any other id is NOT_FOUND.
// ListJobs hangs until the test ends (a coordinator that does not answer in time).
class FakeJobService final : public v1::JobService::Service {
 public:
  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* request,
                      v1::GetJobResponse* response) override {
    if (request->job_id() != "job-1") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, request->job_id() + " not found");
    }
    response->mutable_job()->set_id("job-1");
    return grpc::Status::OK;
  }
  grpc::Status ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest*,
                        v1::ListJobsResponse*) override {
    while (!ctx->IsCancelled() && !release_.WaitForNotificationWithTimeout(absl::Seconds(1))) {
    }
    return grpc::Status::OK;
  }
  grpc::Status DrainWorker(grpc::ServerContext*, const v1::DrainWorkerRequest* request,
                           v1::DrainWorkerResponse* response) override {
    *response->mutable_task()->mutable_task() = request->task();
    return grpc::Status::OK;
  }
  grpc::Status WatchJob(grpc::ServerContext*, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override {
    if (request->job_id() != "job-1") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, request->job_id() + " not found");
    }
    for (v1::JobState state : {v1::RUNNING, v1::SUCCEEDED}) {
      v1::JobEvent e;
      e.mutable_job()->set_id("job-1");
      e.mutable_job()->set_state(state);
      writer->Write(e);
    }
    return grpc::Status::OK;
  }
  absl::Notification release_;
};

class JobServiceClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = StartLoopbackServer(&service_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server->server);
    address_ = server->address;
    auto client =
        JobServiceClient::Create(address_, TlsOptions{.insecure = true}, absl::Milliseconds(500));
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }
  void TearDown() override {
    service_.release_.Notify();
    server_->Shutdown(absl::ToChronoTime(absl::Now()));
  }

  FakeJobService service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::unique_ptr<JobServiceClient> client_;
};

TEST_F(JobServiceClientTest, AnswersComeBack) {
  auto job = client_->GetJob("job-1");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->job().id(), "job-1");
  auto drained = client_->DrainWorker("worker/3", false);
  ASSERT_TRUE(drained.ok()) << drained.status();
  EXPECT_EQ(drained->task().task().index(), 3);
}

TEST_F(JobServiceClientTest, ErrorsKeepTheirCodeAndNameTheRpcAndTheCoordinator) {
  auto job = client_->GetJob("job-9");
  EXPECT_EQ(job.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(job.status().message(), HasSubstr("GetJob to coordinator " + address_));
  EXPECT_THAT(job.status().message(), HasSubstr("job-9 not found"));
  // An RPC the service does not offer.
  auto status = client_->GetClusterStatus();
  EXPECT_EQ(status.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(status.status().message(), HasSubstr("GetClusterStatus to coordinator"));
}

TEST_F(JobServiceClientTest, EveryCallHasADeadline) {
  auto jobs = client_->ListJobs();
  EXPECT_EQ(jobs.status().code(), absl::StatusCode::kDeadlineExceeded) << jobs.status();
  EXPECT_THAT(jobs.status().message(), HasSubstr("ListJobs to coordinator " + address_));
}

TEST_F(JobServiceClientTest, AMalformedTaskIsRefusedBeforeAnyCall) {
  for (const char* task : {"worker", "worker/x", "/1", "worker/-1", "worker/1/2"}) {
    auto drained = client_->DrainWorker(task, false);
    EXPECT_EQ(drained.status().code(), absl::StatusCode::kInvalidArgument) << task;
    EXPECT_THAT(drained.status().message(), HasSubstr("TYPE/INDEX")) << task;
  }
}

TEST_F(JobServiceClientTest, WatchJobFollowsTheJobToItsEnd) {
  std::vector<v1::JobState> seen;
  auto last =
      client_->WatchJob("job-1", [&](const v1::JobEvent& e) { seen.push_back(e.job().state()); });
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->job().state(), v1::SUCCEEDED);
  EXPECT_EQ(seen, (std::vector<v1::JobState>{v1::RUNNING, v1::SUCCEEDED}));
  auto missing = client_->WatchJob("job-9", [](const v1::JobEvent&) {});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("WatchJob to coordinator " + address_));
}

TEST(JobServiceClientErrorsTest, AnUnreachableCoordinatorIsUnavailableNamingIt) {
  auto client =
      JobServiceClient::Create("127.0.0.1:1", TlsOptions{.insecure = true}, absl::Seconds(2));
  ASSERT_TRUE(client.ok());
  auto status = (*client)->GetClusterStatus();
  EXPECT_TRUE(absl::IsUnavailable(status.status()) || absl::IsDeadlineExceeded(status.status()))
      << status.status();
  EXPECT_THAT(status.status().message(), HasSubstr("GetClusterStatus to coordinator 127.0.0.1:1"));
  EXPECT_EQ(JobServiceClient::Create("no-port", TlsOptions{.insecure = true}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace lockstep::client
