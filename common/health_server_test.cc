#include "common/health_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/client_unary_call.h>
#include <grpcpp/impl/codegen/rpc_method.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/health_check.h"

namespace lockstep {
namespace {

std::string Local(int port) { return absl::StrCat("127.0.0.1:", port); }

TEST(HealthServerTest, NotServingUntilToldThenFollowsSetServing) {
  absl::StatusOr<std::unique_ptr<HealthServer>> s = HealthServer::Create("127.0.0.1:0");
  ASSERT_TRUE(s.ok()) << s.status();
  const std::string address = Local((*s)->port());
  EXPECT_EQ(CheckHealth(address).value(), HealthStatus::kNotServing);
  (*s)->SetServing(true);
  EXPECT_EQ(CheckHealth(address).value(), HealthStatus::kServing);
  (*s)->SetServing(false);  // draining
  EXPECT_EQ(CheckHealth(address).value(), HealthStatus::kNotServing);
  (*s)->SetServing(true);
  (*s)->Drain();
  EXPECT_EQ(CheckHealth(address).value(), HealthStatus::kNotServing);
  (*s)->SetServing(true);  // ignored once draining
  EXPECT_EQ(CheckHealth(address).value(), HealthStatus::kNotServing);
  (*s)->Shutdown();
  absl::Status gone = CheckHealth(address, "", absl::Seconds(1)).status();
  EXPECT_TRUE(absl::IsUnavailable(gone) || absl::IsDeadlineExceeded(gone)) << gone;
  EXPECT_NE(gone.message().find("health check of " + address), absl::string_view::npos) << gone;
}

TEST(HealthServerTest, ServesNothingButHealth) {
  absl::StatusOr<std::unique_ptr<HealthServer>> s = HealthServer::Create("127.0.0.1:0");
  ASSERT_TRUE(s.ok()) << s.status();
  auto channel = grpc::CreateChannel(Local((*s)->port()), grpc::InsecureChannelCredentials());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Slice empty("");
  grpc::ByteBuffer in(&empty, 1);
  grpc::ByteBuffer out;
  const grpc::internal::RpcMethod method("/lockstep.v1.Coordinator/ListTasks",
                                         grpc::internal::RpcMethod::NORMAL_RPC);
  grpc::Status status = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      channel.get(), method, &context, in, &out);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << status.error_message();
}

TEST(HealthServerTest, UnknownServiceNameIsNotFound) {
  absl::StatusOr<std::unique_ptr<HealthServer>> s = HealthServer::Create("127.0.0.1:0");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(CheckHealth(Local((*s)->port()), "no.such.Service").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(HealthServerTest, BadOrBusyAddressIsAnError) {
  EXPECT_EQ(HealthServer::Create("127.0.0.1").status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::unique_ptr<HealthServer>> first = HealthServer::Create("127.0.0.1:0");
  ASSERT_TRUE(first.ok());
  absl::StatusOr<std::unique_ptr<HealthServer>> second =
      HealthServer::Create(Local((*first)->port()));
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
}

TEST(HealthServerTest, CheckOfNothingListeningIsUnavailable) {
  int port = 0;
  {
    absl::StatusOr<std::unique_ptr<HealthServer>> s = HealthServer::Create("127.0.0.1:0");
    ASSERT_TRUE(s.ok());
    port = (*s)->port();
  }
  absl::Status gone = CheckHealth(Local(port), "", absl::Seconds(1)).status();
  EXPECT_TRUE(absl::IsUnavailable(gone) || absl::IsDeadlineExceeded(gone)) << gone;
  EXPECT_NE(gone.message().find("health check of " + Local(port)), absl::string_view::npos) << gone;
}

}  // namespace
}  // namespace lockstep
