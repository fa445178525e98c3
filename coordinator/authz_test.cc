#include "coordinator/authz.h"

#include <google/protobuf/descriptor.h>

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lockstep/v1/coordinator.pb.h"

namespace lockstep {
namespace coordinator {
namespace {

using ::testing::HasSubstr;

const Principal kWorker{Role::kWorker, "worker-0"};
const Principal kViewer{Role::kViewer, "val"};
const Principal kOperator{Role::kOperator, "olga"};

TEST(AuthzTest, TheTableCoversEveryCoordinatorMethod) {
  const google::protobuf::ServiceDescriptor* service =
      v1::GetClusterStatusRequest::descriptor()->file()->FindServiceByName("Coordinator");
  ASSERT_NE(service, nullptr);
  std::set<std::string> table;
  for (absl::string_view m : AuthorizedMethods()) table.insert(std::string(m));
  std::set<std::string> proto;
  for (int i = 0; i < service->method_count(); ++i) proto.insert(service->method(i)->name());
  EXPECT_EQ(table, proto);
}

TEST(AuthzTest, WorkerMethodsAreForWorkersOnly) {
  for (const char* m : {"RegisterWorker", "Heartbeat", "Deregister", "WatchAssignments", "SetKey",
                        "GetKey", "Barrier"}) {
    EXPECT_TRUE(Authorize(m, kWorker).ok()) << m;
    for (const Principal& client : {kViewer, kOperator}) {
      absl::Status s = Authorize(m, client);
      EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << m;
      EXPECT_THAT(s.message(), HasSubstr("for worker only"));
    }
  }
}

TEST(AuthzTest, ViewersReadOperatorsChange) {
  for (const char* m : {"GetClusterStatus", "ListJobs", "GetJob", "WatchJob"}) {
    EXPECT_TRUE(Authorize(m, kViewer).ok()) << m;
    EXPECT_TRUE(Authorize(m, kOperator).ok()) << m;
    EXPECT_EQ(Authorize(m, kWorker).code(), absl::StatusCode::kPermissionDenied) << m;
  }
  for (const char* m : {"SubmitJob", "CancelJob"}) {
    EXPECT_TRUE(Authorize(m, kOperator).ok()) << m;
    absl::Status s = Authorize(m, kViewer);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << m;
    EXPECT_THAT(s.message(), HasSubstr("viewer val"));
    EXPECT_EQ(Authorize(m, kWorker).code(), absl::StatusCode::kPermissionDenied) << m;
  }
}

TEST(AuthzTest, NoCredentialsIsUnauthenticatedAndUnknownMethodsAreRefused) {
  EXPECT_EQ(Authorize("GetClusterStatus", std::nullopt).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Authorize("Heartbeat", std::nullopt).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Authorize("DropDatabase", kOperator).code(), absl::StatusCode::kPermissionDenied);
}

TEST(AuthzTest, CertificatesNameTheirPrincipal) {
  auto p = PrincipalFromCertificate("CN=worker-3,OU=daemon,O=lockstep");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->role, Role::kWorker);
  EXPECT_EQ(p->name, "worker-3");
  p = PrincipalFromCertificate("CN=alice,OU=viewer,O=lockstep");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->role, Role::kViewer);
  EXPECT_FALSE(PrincipalFromCertificate("CN=x,OU=admin,O=lockstep").has_value());
  EXPECT_FALSE(PrincipalFromCertificate("CN=x,O=lockstep").has_value());
  EXPECT_FALSE(PrincipalFromCertificate("OU=daemon,O=lockstep").has_value());
}

}  // namespace
}  // namespace coordinator
}  // namespace lockstep
