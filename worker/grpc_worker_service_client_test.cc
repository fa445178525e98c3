// The gRPC adapter's WatchAssignments stream against a small in-process server that only
// implements that RPC.
#include "worker/grpc_worker_service_client.h"

#include <grpcpp/grpcpp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
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

// Whether thread `tid` of this process sleeps in the kernel (state S or D in
// /proc/self/task/<tid>/stat), polled until `deadline`.
bool WaitUntilSleeping(pid_t tid, absl::Time deadline) {
  const std::string path = absl::StrCat("/proc/self/task/", tid, "/stat");
  while (absl::Now() < deadline) {
    std::ifstream in(path);
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // "<tid> (<comm>) <state> ...": the state follows the last ')'.
    const size_t paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size() &&
        (stat[paren + 2] == 'S' || stat[paren + 2] == 'D')) {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  return false;
}

class GrpcAssignmentsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = StartLoopbackServer(&service_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server->server);
    auto client = GrpcWorkerServiceClient::Create(server->address, TlsOptions{.insecure = true});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }
  void TearDown() override { server_->Shutdown(absl::ToChronoTime(absl::Now())); }

  AssignmentsOnlyService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<GrpcWorkerServiceClient> client_;
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
  // A blocked Next() ends promptly when another thread cancels. The reader announces that it
  // calls Next(); the cancel comes once that thread sleeps (the server holds the stream open
  // with nothing more to send) and Next() has not returned.
  std::atomic<pid_t> reader_tid{0};
  std::atomic<bool> returned{false};
  absl::StatusOr<std::optional<v1::Assignment>> end;
  std::thread reader([&] {
    reader_tid = static_cast<pid_t>(::syscall(SYS_gettid));
    end = (*stream)->Next();
    returned = true;
  });
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (reader_tid.load() == 0 && absl::Now() < deadline) std::this_thread::yield();
  ASSERT_NE(reader_tid.load(), 0);
  EXPECT_TRUE(WaitUntilSleeping(reader_tid.load(), deadline)) << "the reader never blocked";
  EXPECT_FALSE(returned.load()) << "Next() returned before the cancel";
  const absl::Time start = absl::Now();
  (*stream)->Cancel();
  reader.join();
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
  auto client = GrpcWorkerServiceClient::Create("127.0.0.1:1", TlsOptions{.insecure = true});
  ASSERT_TRUE(client.ok());
  auto stream = (*client)->WatchAssignments(v1::WatchAssignmentsRequest());
  ASSERT_TRUE(stream.ok());
  auto next = (*stream)->Next();
  EXPECT_TRUE(absl::IsUnavailable(next.status())) << next.status();
}

}  // namespace
}  // namespace lockstep::worker
