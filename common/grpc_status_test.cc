#include "common/grpc_status.h"

#include "gtest/gtest.h"

namespace lockstep {
namespace {

// Every canonical code, round-tripped in both directions with its message.
class GrpcStatusCodeTest : public ::testing::TestWithParam<int> {};

TEST_P(GrpcStatusCodeTest, RoundTripsCodeAndMessage) {
  const auto code = static_cast<absl::StatusCode>(GetParam());
  absl::Status in(code, "worker/1: something to check");
  grpc::Status g = ToGrpcStatus(in);
  EXPECT_EQ(static_cast<int>(g.error_code()), GetParam());
  if (code != absl::StatusCode::kOk) {
    EXPECT_EQ(g.error_message(), "worker/1: something to check");
  }
  absl::Status back = FromGrpcStatus(g);
  EXPECT_EQ(back.code(), code);
  EXPECT_EQ(back, in);
}

TEST_P(GrpcStatusCodeTest, FromGrpcKeepsCode) {
  const auto gcode = static_cast<grpc::StatusCode>(GetParam());
  grpc::Status g(gcode, GetParam() == 0 ? "" : "msg");
  absl::Status s = FromGrpcStatus(g, "GetKey to coordinator x:1");
  EXPECT_EQ(static_cast<int>(s.code()), GetParam());
  if (GetParam() != 0) {
    EXPECT_NE(s.message().find("GetKey to coordinator x:1: msg"), absl::string_view::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(AllCodes, GrpcStatusCodeTest, ::testing::Range(0, 17),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StatusCodeToString(
                               static_cast<absl::StatusCode>(info.param));
                         });

TEST(GrpcStatusTest, UnavailableSaysWhatToCheck) {
  absl::Status s = FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "refused"),
                                  "RegisterWorker to coordinator 127.0.0.1:1");
  EXPECT_TRUE(absl::IsUnavailable(s));
  EXPECT_NE(s.message().find("reachable"), absl::string_view::npos);
}

}  // namespace
}  // namespace lockstep
