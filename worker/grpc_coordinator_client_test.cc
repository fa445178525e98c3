// The gRPC adapter's WatchAssignments stream against a small in-process server that only
// implements that RPC.
#include "worker/grpc_coordinator_client.h"

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "common/loopback_server.h"
#include "gtest/gtest.h"
#include "lockstep/v1/coordinator.grpc.pb.h"

namespace lockstep::worker {
namespace {

// Pushes two partitions, then holds the stream open until the client cancels; task index 9
// is unknown (NOT_FOUND).
class AssignmentsOnlyService final : public v1::WorkerService::Service {
 public:
  grpc::Status WatchAssignments(grpc::ServerContext* ctx, const v1::WatchAssignmentsRequest* req,
                                grpc::ServerWriter<v1::Assignment>* writer) override {
    if (req->task().index() == 9) return grpc::Status(grpc::StatusCode::NOT_FOUND, "task 9");
    for (const char* job : {"job-1", "job-2"}) {
      v1::Assignment a;
      a.mutable_run()->set_job_id(job);
      writer->Write(a);
    }
    const absl::Time limit = absl::Now() + absl::Seconds(20);
    while (!ctx->IsCancelled() && absl::Now() < limit) absl::SleepFor(absl::Milliseconds(2));
    cancelled_.Notify();
    return grpc::Status::OK;
  }
  absl::Notification cancelled_;
};

class GrpcAssignmentsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = StartLoopbackServer(&service_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server->server);
    auto client = GrpcCoordinatorClient::Create(server->address, TlsOptions{.insecure = true});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }
  void TearDown() override { server_->Shutdown(absl::ToChronoTime(absl::Now())); }

  AssignmentsOnlyService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<GrpcCoordinatorClient> client_;
};

TEST_F(GrpcAssignmentsTest, ReadsPushedAssignmentsAndCancelEndsTheStream) {
  v1::WatchAssignmentsRequest req;
  req.mutable_task()->set_type("worker");
  auto stream = client_->WatchAssignments(req);
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (const char* job : {"job-1", "job-2"}) {
    auto next = (*stream)->Next();
    ASSERT_TRUE(next.ok()) << next.status();
    ASSERT_TRUE(next->has_value());
    EXPECT_EQ((*next)->run().job_id(), job);
  }
  // A blocked Next() ends promptly when another thread cancels.
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(50));
    (*stream)->Cancel();
  });
  const absl::Time start = absl::Now();
  auto end = (*stream)->Next();
  canceller.join();
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_FALSE(end->has_value());
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE(service_.cancelled_.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

TEST_F(GrpcAssignmentsTest, ServerErrorsAreConverted) {
  v1::WatchAssignmentsRequest req;
  req.mutable_task()->set_type("worker");
  req.mutable_task()->set_index(9);
  auto stream = client_->WatchAssignments(req);
  ASSERT_TRUE(stream.ok());
  auto next = (*stream)->Next();
  EXPECT_TRUE(absl::IsNotFound(next.status())) << next.status();
  EXPECT_NE(std::string(next.status().message()).find("WatchAssignments"), std::string::npos);
}

TEST(GrpcAssignments, AnUnreachableCoordinatorIsUnavailable) {
  // Port 1 on loopback: nothing listens there (connection refused at once).
  auto client = GrpcCoordinatorClient::Create("127.0.0.1:1", TlsOptions{.insecure = true});
  ASSERT_TRUE(client.ok());
  auto stream = (*client)->WatchAssignments(v1::WatchAssignmentsRequest());
  ASSERT_TRUE(stream.ok());
  auto next = (*stream)->Next();
  EXPECT_TRUE(absl::IsUnavailable(next.status())) << next.status();
}

}  // namespace
}  // namespace lockstep::worker
